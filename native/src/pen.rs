//! The pen: a robust, process-shared, error-checking pthread mutex in the `state`
//! file's header, the write lock of every process that has the store open
//! (docs/FORMAT.md, "Shared state"; docs/RECOVERY.md, "Several processes").
//!
//! Taking it uncontended is one atomic instruction in this process, no system call.
//! A process that died holding it leaves it to the next taker with `EOWNERDEAD`
//! (`Taken::OwnerDied`): that writer clears what the dead one left, then marks the
//! mutex consistent (`consistent`) before it lets go.
//!
//! The mutex sits at `MUTEX_AT` in the header, after a marker at `MARKER_AT` that says
//! it was initialised, for which pthread layout (`pthread_mutex_t`'s size) and in which
//! boot of the machine (`BOOT_AT`). An opener holding `open.lock` initialises it again
//! when no process can be using it: no marker (a store an older engine made), a marker
//! of an earlier boot, or no other process has the store open (`alone`). A mutex from
//! before a crash of every process or a reboot may name an owner the kernel never
//! marked dead, and would be waited for forever. An opener that finds a marker of
//! another layout does not touch it and keeps the `flock` path.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::ptr;
use std::time::Duration;

/// The marker's offset in `state` (16 bytes: magic, version, `pthread_mutex_t` size,
/// zero), and the mutex's (up to `MUTEX_ROOM` bytes, to the end of the header).
pub const MARKER_AT: usize = 3968;
pub const MUTEX_AT: usize = 4032;
pub const MUTEX_ROOM: usize = 64;
/// The header's size: what is mapped here.
pub const HEADER_BYTES: usize = 4096;
pub const MARKER_MAGIC: &[u8; 4] = b"TDMX";
pub const MARKER_VERSION: u32 = 1;
/// The boot id (16 bytes, `/proc/sys/kernel/random/boot_id`; zeros where there is
/// none) of the boot in which the mutex was last initialised.
pub const BOOT_AT: usize = 3984;
/// The longest one sleep on a busy mutex lasts before the waiter looks at it again
/// (`Pen::lock`).
pub const SLICE: Duration = Duration::from_millis(100);

/// Pauses between two tries of a busy mutex in `Pen::try_spinning` (16 `pause`s:
/// 0.2 µs on session 57's Xeon).
const SPIN_PAUSES: usize = 16;

/// How a lock was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// The mutex was free (or freed by its owner).
    Free,
    /// Its last owner died holding it: clear what it left, then call `consistent`.
    OwnerDied,
}

/// What `open` found in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A mutex of this layout, ready (initialised now or by an earlier opener).
    Ready,
    /// A marker of another layout (another libc or architecture shares the store):
    /// left alone; the caller keeps the `flock` path.
    Foreign,
}

/// The mutex in a store's `state` file, through a mapping of the header of its own.
pub struct Pen {
    map: *mut u8,
}

// SAFETY: the mapping is process-wide and lives until `Drop`; the pthread mutex it
// holds is made for use from any thread (and process); `Pen` hands out no references
// into the mapping, only calls pthread functions on it.
unsafe impl Send for Pen {}
// SAFETY: as for `Send`: every method goes through the pthread functions, which are
// thread-safe on a process-shared mutex.
unsafe impl Sync for Pen {}

extern "C" {
    /// glibc 2.30's `pthread_mutex_timedlock` on a clock of the caller's choice (the
    /// `libc` crate does not declare it): a monotonic deadline, which no change of the
    /// wall clock stretches.
    fn pthread_mutex_clocklock(
        mutex: *mut libc::pthread_mutex_t,
        clock: libc::clockid_t,
        until: *const libc::timespec,
    ) -> libc::c_int;
}

fn check(code: libc::c_int) -> io::Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(code))
    }
}

fn marker() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[..4].copy_from_slice(MARKER_MAGIC);
    bytes[4..8].copy_from_slice(&MARKER_VERSION.to_le_bytes());
    let size = std::mem::size_of::<libc::pthread_mutex_t>() as u32;
    bytes[8..12].copy_from_slice(&size.to_le_bytes());
    bytes
}

/// This boot's id as 16 bytes (zeros when the kernel does not tell it).
fn boot_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    let Ok(text) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") else {
        return id;
    };
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    if digits.len() != 32 {
        return id;
    }
    for (byte, pair) in id.iter_mut().zip(digits.chunks(2)) {
        let text = std::str::from_utf8(pair).unwrap_or("00");
        *byte = u8::from_str_radix(text, 16).unwrap_or(0);
    }
    id
}

impl Pen {
    /// Map the header of the `state` file at `path` (at least `HEADER_BYTES` long) and
    /// find the mutex, initialising it when no marker is there yet. The caller holds
    /// `open.lock` exclusively, so no other process initialises or uses it meanwhile.
    pub fn open(path: &Path, alone: bool) -> io::Result<(Pen, Found)> {
        if std::mem::size_of::<libc::pthread_mutex_t>() > MUTEX_ROOM {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "pthread_mutex_t does not fit the state header's room",
            ));
        }
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        if file.metadata()?.len() < HEADER_BYTES as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the state file is shorter than its header",
            ));
        }
        // SAFETY: a fresh shared mapping of the file's first HEADER_BYTES (checked to
        // exist above); the kernel picks the address; the descriptor may close after.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                HEADER_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let pen = Pen { map: map.cast() };
        let wanted = marker();
        let mut found = [0u8; 16];
        // SAFETY: MARKER_AT + 16 <= HEADER_BYTES, inside the mapping made above.
        unsafe { ptr::copy_nonoverlapping(pen.map.add(MARKER_AT), found.as_mut_ptr(), 16) };
        let boot = boot_id();
        let mut booted = [0u8; 16];
        // SAFETY: BOOT_AT + 16 <= MUTEX_AT, inside the mapping.
        unsafe { ptr::copy_nonoverlapping(pen.map.add(BOOT_AT), booted.as_mut_ptr(), 16) };
        if found == wanted && booted == boot && !alone {
            return Ok((pen, Found::Ready));
        }
        if found != wanted && found[..4] == MARKER_MAGIC[..] {
            return Ok((pen, Found::Foreign));
        }
        pen.initialise()?;
        // SAFETY: as above; boot id and marker go in after the mutex is whole.
        unsafe {
            ptr::copy_nonoverlapping(boot.as_ptr(), pen.map.add(BOOT_AT), 16);
            ptr::copy_nonoverlapping(wanted.as_ptr(), pen.map.add(MARKER_AT), 16);
        }
        Ok((pen, Found::Ready))
    }

    fn mutex(&self) -> *mut libc::pthread_mutex_t {
        // SAFETY: MUTEX_AT + MUTEX_ROOM == HEADER_BYTES, inside the mapping; MUTEX_AT
        // is 64-byte aligned in a page-aligned mapping, enough for pthread_mutex_t.
        unsafe { self.map.add(MUTEX_AT).cast() }
    }

    fn initialise(&self) -> io::Result<()> {
        let mut attr = std::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
        // SAFETY: pthread_mutexattr_init initialises `attr`, which is used only after it
        // succeeded and destroyed once; the mutex's bytes are in our mapping and no
        // process uses them (the caller holds open.lock, and no marker was there).
        unsafe {
            check(libc::pthread_mutexattr_init(attr.as_mut_ptr()))?;
            let attr = attr.as_mut_ptr();
            let made = check(libc::pthread_mutexattr_setpshared(
                attr,
                libc::PTHREAD_PROCESS_SHARED,
            ))
            .and_then(|_| {
                check(libc::pthread_mutexattr_setrobust(
                    attr,
                    libc::PTHREAD_MUTEX_ROBUST,
                ))
            })
            .and_then(|_| {
                check(libc::pthread_mutexattr_settype(
                    attr,
                    libc::PTHREAD_MUTEX_ERRORCHECK,
                ))
            })
            .and_then(|_| check(libc::pthread_mutex_init(self.mutex(), attr)));
            libc::pthread_mutexattr_destroy(attr);
            made
        }
    }

    /// Take the mutex if it is free; None when another thread or process holds it.
    pub fn try_lock(&self) -> io::Result<Option<Taken>> {
        // SAFETY: the mutex was initialised (`open` returned Ready) and stays mapped.
        match unsafe { libc::pthread_mutex_trylock(self.mutex()) } {
            0 => Ok(Some(Taken::Free)),
            libc::EOWNERDEAD => Ok(Some(Taken::OwnerDied)),
            libc::EBUSY => Ok(None),
            code => Err(io::Error::from_raw_os_error(code)),
        }
    }

    /// Take the mutex if it is let go while `go_on` (asked between tries with the
    /// time spent so far, on the monotonic clock) says to keep trying, between short
    /// pauses and without ever sleeping on it; None when another thread or process
    /// still holds it when `go_on` says to stop. No waiters flag is set, so the
    /// holder's unlock makes no system call for a spinner. (A sleeper's wake-up is a
    /// thread hand-off of 17–26 µs plus the futex calls on both sides, during which
    /// the mutex is free and unused: docs/PERFORMANCE.md, procs31-s57.)
    pub fn try_spinning(
        &self,
        mut go_on: impl FnMut(Duration) -> bool,
    ) -> io::Result<Option<Taken>> {
        let began = std::time::Instant::now();
        loop {
            if let Some(taken) = self.try_lock()? {
                return Ok(Some(taken));
            }
            if !go_on(began.elapsed()) {
                return Ok(None);
            }
            for _ in 0..SPIN_PAUSES {
                std::hint::spin_loop();
            }
        }
    }

    /// Take the mutex, waiting for it as long as another thread or process holds it,
    /// in sleeps of at most `SLICE`, each followed by a fresh try.
    ///
    /// A sleep on the mutex alone could last for ever: glibc wakes one waiter when the
    /// owner lets go; if that waiter is killed before it runs while another thread
    /// takes the mutex by its fast path (which sets no waiters flag), the kernel wakes
    /// no one at the killed waiter's exit (the mutex is neither free nor its) and no
    /// unlock wakes anyone after (no flag), though the mutex is taken and freed again
    /// and again (tests/faults/test_pen_wakeup.py). A fresh try sets the flag again, so
    /// such a waiter is woken by the next unlock, or takes the mutex free.
    pub fn lock(&self) -> io::Result<Taken> {
        loop {
            if let Some(taken) = self.lock_for(SLICE)? {
                return Ok(taken);
            }
        }
    }

    /// Take the mutex, waiting at most `wait` (on the monotonic clock); None when
    /// another thread or process still holds it then.
    pub fn lock_for(&self, wait: Duration) -> io::Result<Option<Taken>> {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec it is given, a local.
        if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let nanos = now.tv_nsec as u64 + u64::from(wait.subsec_nanos());
        let until = libc::timespec {
            tv_sec: now.tv_sec
                + wait.as_secs() as libc::time_t
                + (nanos / 1_000_000_000) as libc::time_t,
            tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: as in `try_lock`; `until` is a valid timespec on the clock named.
        match unsafe { pthread_mutex_clocklock(self.mutex(), libc::CLOCK_MONOTONIC, &until) } {
            0 => Ok(Some(Taken::Free)),
            libc::EOWNERDEAD => Ok(Some(Taken::OwnerDied)),
            libc::ETIMEDOUT => Ok(None),
            code => Err(io::Error::from_raw_os_error(code)),
        }
    }

    /// Mark the mutex consistent after `Taken::OwnerDied` (the caller holds it).
    pub fn consistent(&self) -> io::Result<()> {
        // SAFETY: as in `try_lock`; pthread refuses (EINVAL) when it is not ours to mark.
        check(unsafe { libc::pthread_mutex_consistent(self.mutex()) })
    }

    /// Let go of the mutex (EPERM when this thread does not hold it).
    pub fn unlock(&self) -> io::Result<()> {
        // SAFETY: as in `try_lock`; the error-checking type refuses a non-owner.
        check(unsafe { libc::pthread_mutex_unlock(self.mutex()) })
    }
}

impl Drop for Pen {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, unmapped once; nothing refers into it.
        unsafe { libc::munmap(self.map.cast(), HEADER_BYTES) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn state_file(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("state");
        std::fs::write(&path, vec![0u8; HEADER_BYTES * 2]).unwrap();
        path
    }

    /// A directory of the test's own under the temporary directory, removed with
    /// everything in it when dropped (declared first in a test, it is dropped last).
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("tdm-pen-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn first_open_initialises_and_writes_the_marker() {
        let dir = Scratch::new("marker");
        let path = state_file(&dir.0);
        let (pen, found) = Pen::open(&path, false).unwrap();
        assert_eq!(found, Found::Ready);
        drop(pen);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[MARKER_AT..MARKER_AT + 16], &marker());
        assert!(
            bytes[..MARKER_AT].iter().all(|b| *b == 0),
            "no other header byte changes"
        );
        assert_eq!(&bytes[BOOT_AT..BOOT_AT + 16], &boot_id());
        let (_again, found) = Pen::open(&path, false).unwrap();
        assert_eq!(found, Found::Ready);
    }

    #[test]
    fn a_held_mutex_is_busy_and_refuses_a_second_lock_by_its_owner() {
        let dir = Scratch::new("busy");
        let path = state_file(&dir.0);
        let (pen, _) = Pen::open(&path, false).unwrap();
        let (other, _) = Pen::open(&path, false).unwrap();
        assert_eq!(pen.lock().unwrap(), Taken::Free);
        assert_eq!(pen.lock().unwrap_err().raw_os_error(), Some(libc::EDEADLK));
        let other = Arc::new(other);
        let seen = {
            let other = Arc::clone(&other);
            std::thread::spawn(move || other.try_lock().unwrap())
                .join()
                .unwrap()
        };
        assert_eq!(seen, None);
        pen.unlock().unwrap();
        assert_eq!(other.try_lock().unwrap(), Some(Taken::Free));
        other.unlock().unwrap();
    }

    #[test]
    fn a_mutex_let_go_within_the_spin_is_taken_without_a_sleep() {
        let dir = Scratch::new("spun");
        let path = state_file(&dir.0);
        let (pen, _) = Pen::open(&path, false).unwrap();
        let pen = Arc::new(pen);
        let (held, holding) = std::sync::mpsc::channel();
        let holder = {
            let pen = Arc::clone(&pen);
            std::thread::spawn(move || {
                assert_eq!(pen.lock().unwrap(), Taken::Free);
                held.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(20));
                pen.unlock().unwrap();
            })
        };
        holding.recv().unwrap();
        assert_eq!(
            pen.try_spinning(|spun| spun < Duration::from_secs(30))
                .unwrap(),
            Some(Taken::Free)
        );
        pen.unlock().unwrap();
        holder.join().unwrap();
    }

    #[test]
    fn a_mutex_held_past_the_spin_is_left_busy_and_unflagged() {
        use std::sync::atomic::{AtomicU32, Ordering};
        const WAITERS: u32 = 0x8000_0000; // the futex word's flag (linux/futex.h)
        let dir = Scratch::new("spin-busy");
        let path = state_file(&dir.0);
        let (pen, _) = Pen::open(&path, false).unwrap();
        let (other, _) = Pen::open(&path, false).unwrap();
        assert_eq!(pen.lock().unwrap(), Taken::Free);
        let other = Arc::new(other);
        let seen = {
            let other = Arc::clone(&other);
            std::thread::spawn(move || {
                other
                    .try_spinning(|spun| spun < Duration::from_millis(5))
                    .unwrap()
            })
            .join()
            .unwrap()
        };
        assert_eq!(seen, None);
        // SAFETY: as in `a_waiter_whose_wake_up_was_lost_takes_the_mutex_at_its_next_try`.
        let word = unsafe { &*(pen.mutex() as *const AtomicU32) };
        assert_eq!(
            word.load(Ordering::SeqCst) & WAITERS,
            0,
            "a spinner never sleeps"
        );
        pen.unlock().unwrap();
    }

    #[test]
    fn an_owner_that_dies_holding_it_leaves_it_owner_died_until_marked_consistent() {
        let dir = Scratch::new("dead");
        let path = state_file(&dir.0);
        let (pen, _) = Pen::open(&path, false).unwrap();
        let pen = Arc::new(pen);
        {
            let pen = Arc::clone(&pen);
            std::thread::spawn(move || assert_eq!(pen.lock().unwrap(), Taken::Free))
                .join()
                .unwrap();
        }
        assert_eq!(pen.lock().unwrap(), Taken::OwnerDied);
        pen.consistent().unwrap();
        pen.unlock().unwrap();
        assert_eq!(pen.lock().unwrap(), Taken::Free);
        pen.unlock().unwrap();
    }

    #[test]
    fn a_waiter_whose_wake_up_was_lost_takes_the_mutex_at_its_next_try() {
        use std::sync::atomic::{AtomicU32, Ordering};
        use std::time::Instant;
        const WAITERS: u32 = 0x8000_0000; // the futex word's flag (linux/futex.h)
        let dir = Scratch::new("lost");
        let path = state_file(&dir.0);
        let (pen, _) = Pen::open(&path, false).unwrap();
        let pen = Arc::new(pen);
        assert_eq!(pen.lock().unwrap(), Taken::Free);
        let (done, taken) = std::sync::mpsc::channel();
        {
            let pen = Arc::clone(&pen);
            std::thread::spawn(move || {
                pen.lock().unwrap();
                pen.unlock().unwrap();
                done.send(Instant::now()).unwrap();
            });
        }
        // SAFETY: the mutex's first word is glibc's futex word (FORMAT.md), an aligned
        // u32 in the mapping; it is only read and changed atomically here.
        let word = unsafe { &*(pen.mutex() as *const AtomicU32) };
        while word.load(Ordering::SeqCst) & WAITERS == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Asleep on the futex by now.
        std::thread::sleep(Duration::from_millis(20));
        // What a process taking the mutex by its fast path leaves after the waiter woken
        // for it was killed before it ran: no waiters flag. The unlock wakes no one.
        word.fetch_and(!WAITERS, Ordering::SeqCst);
        pen.unlock().unwrap();
        let freed = Instant::now();
        let at = taken
            .recv_timeout(Duration::from_secs(5))
            .expect("the waiter sleeps on a free mutex");
        assert!(at.duration_since(freed) < SLICE * 10);
    }

    /// Leave the mutex in `path` held by an owner no kernel will mark dead, as a copy
    /// of the file made mid-write (or a file kept across a reboot) holds it.
    fn held_by_a_stale_owner(path: &Path) {
        let owner = path.to_path_buf();
        let copy = std::thread::spawn(move || {
            let (pen, _) = Pen::open(&owner, false).unwrap();
            pen.lock().unwrap();
            let copy = std::fs::read(&owner).unwrap();
            pen.unlock().unwrap();
            copy
        })
        .join()
        .unwrap();
        std::fs::write(path, copy).unwrap();
        let (pen, _) = Pen::open(path, false).unwrap();
        assert_eq!(pen.try_lock().unwrap(), None, "held, by no one alive");
    }

    #[test]
    fn an_opener_alone_initialises_a_held_mutex_again() {
        let dir = Scratch::new("alone");
        let path = state_file(&dir.0);
        held_by_a_stale_owner(&path);
        let (fresh, found) = Pen::open(&path, true).unwrap();
        assert_eq!(found, Found::Ready);
        assert_eq!(fresh.try_lock().unwrap(), Some(Taken::Free));
        fresh.unlock().unwrap();
    }

    #[test]
    fn a_mutex_of_an_earlier_boot_is_initialised_again() {
        let dir = Scratch::new("boot");
        let path = state_file(&dir.0);
        held_by_a_stale_owner(&path);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[BOOT_AT] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let (again, _) = Pen::open(&path, false).unwrap();
        assert_eq!(again.try_lock().unwrap(), Some(Taken::Free));
        again.unlock().unwrap();
    }

    #[test]
    fn a_foreign_marker_is_left_alone() {
        let dir = Scratch::new("foreign");
        let path = state_file(&dir.0);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[MARKER_AT..MARKER_AT + 4].copy_from_slice(MARKER_MAGIC);
        bytes[MARKER_AT + 8] = 200;
        std::fs::write(&path, &bytes).unwrap();
        let (_pen, found) = Pen::open(&path, false).unwrap();
        assert_eq!(found, Found::Foreign);
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }
}
