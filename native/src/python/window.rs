//! Queue entries stored into a mapped window of the queue file (issue 31, part 8).
//!
//! The native append keeps a shared, writable mapping of the last file of each queue it
//! writes (the whole file, `entries × 20` bytes; the file is sparse). An entry is stored
//! only into a *reserved window*: a range of the file that this process allocated with
//! `fallocate` (mode 0) before its first store into it. Storing into a hole of a shared
//! mapping on a full disk would end the process with SIGBUS; with the window reserved
//! first, a full disk shows as the `fallocate`'s ENOSPC, at the window's extension,
//! which the core turns into the typed `DiskFullError` as any failed write. The bytes
//! are the ones `pwrite` wrote before; the flush's `fdatasync` of the file makes the
//! stores durable as it made the writes (the page cache is one).
//!
//! A window starts at the page of the entry that needed it and is `WINDOW` bytes long
//! (cut at the file's end), so the file's allocated bytes reach at most `WINDOW` past
//! its last entry: fewer than the 4,096 entries `ConsumeQueue` reads back from the end
//! of a file's data to find its last entry (consumequeue.py, `_TAIL_READ_ENTRIES`).
//!
//! The pretoucher (`AppendCore.pretouch`, on the flush thread) populates the page
//! tables of the next `PRETOUCH` bytes of each window past its last entry
//! (`MADV_POPULATE_WRITE`), so that the appending thread does not take those faults.

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

/// The bytes a window reserves (16 pages; 3,276 entries).
pub const WINDOW: usize = 64 << 10;
/// How far past a window's last entry the pretoucher populates.
pub const PRETOUCH: usize = 16 << 10;
/// consumequeue._TAIL_READ_ENTRIES × the entry size: a window must stay within it.
const TAIL_READ_BYTES: usize = 4096 * 20;
const _: () = assert!(WINDOW < TAIL_READ_BYTES);

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
}

/// A shared, writable mapping of a whole queue file, unmapped when the last `Arc` goes.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with the kernel's page cache; its pointer
// stays valid until `Drop` (which runs once, when the last owner lets go). Stores go
// through `QueueWindow::store` under the core's `tails` mutex and the pen; the
// pretoucher only asks the kernel to populate page tables, which changes no byte.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what a successful mmap returned, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

impl Mapping {
    /// Map `len` bytes of `fd` shared and writable.
    fn of(fd: RawFd, len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: a fresh mapping at an address the kernel picks; `fd` is open (the
        // caller's); failure is MAP_FAILED, checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Populate the page tables of `[from, to)` for writing (no byte changes); errors
    /// are ignored (a kernel without MADV_POPULATE_WRITE: the stores fault as before).
    /// The caller passes a range of a reserved window (`QueueWindow::ahead`), so it
    /// meets no hole on a full disk.
    pub fn populate(&self, from: usize, to: usize) {
        let to = to.min(self.len);
        if from < to {
            // SAFETY: `[from, to)` is inside this mapping, which lives while `self`
            // does, and the caller passes a range of a reserved window.
            unsafe { populate_write(self.ptr as usize + from, to - from) };
        }
    }
}

/// Populate the page tables of the `length` bytes at address `at` for writing
/// (`MADV_POPULATE_WRITE` from `at`'s page on); errors ignored (a kernel before 5.14:
/// the stores fault as before).
///
/// # Safety
///
/// `[at, at + length)` must be inside a shared file mapping that stays mapped for the
/// call, and reserved on disk (fallocated) so that populating it allocates nothing:
/// the advice then faults pages in, changes no byte and raises no signal.
pub unsafe fn populate_write(at: usize, length: usize) {
    let page = page_size();
    let from = at & !(page - 1);
    let length = at + length - from;
    // SAFETY: the caller's contract (above); `from` is `at`'s page, in the same mapping.
    unsafe { libc::madvise(from as *mut libc::c_void, length, libc::MADV_POPULATE_WRITE) };
}

/// What a store into a window did not do: the caller writes with `pwrite` instead
/// (`Unmapped`), or fails the write with the error (`Failed`).
pub enum NotStored {
    Unmapped,
    Failed(io::Error),
}

/// The mapped last file of one queue and the window of it reserved by this process.
pub struct QueueWindow {
    map: Arc<Mapping>,
    /// The reserved bytes, `[from, to)`.
    from: usize,
    to: usize,
    /// One past the last byte stored.
    written_to: usize,
    /// How far the pretoucher was asked to populate.
    touched_to: usize,
}

impl QueueWindow {
    /// Map the file `fd` of `len` bytes (its entries × 20); None where it cannot be
    /// mapped (the caller keeps writing it with `pwrite`).
    pub fn open(fd: RawFd, len: usize) -> Option<QueueWindow> {
        Some(QueueWindow {
            map: Arc::new(Mapping::of(fd, len).ok()?),
            from: 0,
            to: 0,
            written_to: 0,
            touched_to: 0,
        })
    }

    /// Store `data` at byte `at` of the file `fd` (the mapped one), reserving a new
    /// window first when `[at, at + len)` is not inside the reserved one. Returns
    /// whether a window was reserved.
    pub fn store(&mut self, fd: RawFd, data: &[u8], at: usize) -> Result<bool, NotStored> {
        let end = at.checked_add(data.len()).ok_or(NotStored::Unmapped)?;
        if end > self.map.len {
            return Err(NotStored::Unmapped);
        }
        let mut reserved = false;
        if at < self.from || end > self.to {
            self.reserve(fd, at, end)?;
            reserved = true;
        }
        // SAFETY: `[at, end)` is inside the mapping (checked) and inside the window just
        // reserved with fallocate, so the store cannot fault on a hole; the caller holds
        // the pen, so no other writer stores into these bytes, and readers read entries
        // only below the published queue ends.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.map.ptr.add(at), data.len()) };
        self.written_to = self.written_to.max(end);
        Ok(reserved)
    }

    fn reserve(&mut self, fd: RawFd, at: usize, end: usize) -> Result<(), NotStored> {
        let (from, to) = Self::window_around(at, end, self.map.len);
        self.reserve_range(fd, from, to)
    }

    /// The window a store of `[at, end)` reserves: from `at`'s page, `WINDOW` bytes (or
    /// to `end`), cut at the file's end.
    fn window_around(at: usize, end: usize, len: usize) -> (usize, usize) {
        let page = page_size();
        let from = at & !(page - 1);
        (from, (from + WINDOW).max(end).min(len))
    }

    /// The window `[from, to)` a store of `len` bytes at `at` must reserve first; None
    /// when it lies inside the reserved one (or past the mapping: the store writes it
    /// with `pwrite`). The fault seam reserves it apart, at its own site
    /// (io_seam.rs, `queue.reserve`), before the store.
    pub fn to_reserve(&self, at: usize, len: usize) -> Option<(usize, usize)> {
        let end = at.checked_add(len)?;
        if end > self.map.len || (at >= self.from && end <= self.to) {
            return None;
        }
        Some(Self::window_around(at, end, self.map.len))
    }

    /// Reserve `[from, to)` of the file `fd` with `fallocate` (mode 0) as the window.
    pub fn reserve_range(&mut self, fd: RawFd, from: usize, to: usize) -> Result<(), NotStored> {
        let length = i64::try_from(to - from).map_err(|_| NotStored::Unmapped)?;
        let offset = i64::try_from(from).map_err(|_| NotStored::Unmapped)?;
        // SAFETY: plain syscall on the caller's open descriptor.
        if unsafe { libc::fallocate(fd, 0, offset, length) } != 0 {
            let error = io::Error::last_os_error();
            return Err(match error.raw_os_error() {
                // No fallocate on this file system: written with pwrite from now on.
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => NotStored::Unmapped,
                _ => NotStored::Failed(error),
            });
        }
        self.from = from;
        self.to = to;
        Ok(())
    }

    /// The mapping and the range the pretoucher is to populate: past the last entry
    /// stored, within the reserved window, at most `PRETOUCH` bytes; None while what it
    /// populated last reaches half of that past the last entry.
    pub fn ahead(&mut self) -> Option<(Arc<Mapping>, usize, usize)> {
        let from = self.written_to.max(self.from);
        let to = self.to.min(from + PRETOUCH);
        if from >= to || (self.touched_to >= from + PRETOUCH / 2 && self.touched_to <= self.to) {
            return None;
        }
        self.touched_to = to;
        Some((self.map.clone(), from, to))
    }
}
