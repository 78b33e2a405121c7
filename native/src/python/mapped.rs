//! Queue files mapped for reading, so that a read copies its entries from memory instead
//! of asking the kernel for them (a `pread` cost more than the rest of a read's fixed
//! cost on this machine: docs/PERFORMANCE.md, issue 29 part 4).
//!
//! A mapping is only safe while the file is at least as long as the bytes read: a file
//! cut short under it (damage, never the store's own doing: queue files only grow)
//! makes a read past its new end fault with SIGBUS, which would end the process. So a
//! copy from a mapping runs under a guard: this thread notes the bytes it is copying,
//! and the process's SIGBUS handler, for a fault inside them, puts a page of zeros in
//! place of the page the file lost and lets the copy go on. The copy then reports that
//! it faulted, its bytes are not used, and the mapping is let go: the caller reads
//! the file the long way, which sees it short and says so as it always has. Any other
//! SIGBUS goes to the handler that was there before (or the default action).

use std::sync::atomic::{compiler_fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

thread_local! {
    /// The bytes this thread is copying from a mapping, [start, end); (0, 0) outside a
    /// copy. Constant-initialised and without a destructor, so the signal handler can
    /// read it (no lazy set-up, no allocation).
    static COPYING: (AtomicUsize, AtomicUsize) = const { (AtomicUsize::new(0), AtomicUsize::new(0)) };
    /// Set by the handler when a copy of this thread faulted.
    static FAULTED: AtomicBool = const { AtomicBool::new(false) };
}

/// The SIGBUS action in place before the guard's, and the page size; set once, before
/// the guard is installed.
static PREVIOUS: OnceLock<Previous> = OnceLock::new();
static PAGE: AtomicUsize = AtomicUsize::new(4096);

struct Previous(libc::sigaction);

// SAFETY: a `sigaction` is plain data (a handler address, a mask, flags); it is written
// once before the guard is installed and only read after.
unsafe impl Send for Previous {}
// SAFETY: as above: never written after it is shared.
unsafe impl Sync for Previous {}

/// Install the guard (once per process); false if it could not be.
fn guard_installed() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if let Ok(page) = usize::try_from(page) {
            if page.is_power_of_two() {
                PAGE.store(page, Ordering::Relaxed);
            }
        }
        let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
        // SAFETY: reading the current action into a zeroed, properly sized struct.
        if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), old.as_mut_ptr()) } != 0 {
            return false;
        }
        // SAFETY: sigaction succeeded, so it filled `old`.
        let old = unsafe { old.assume_init() };
        if PREVIOUS.set(Previous(old)).is_err() {
            return false;
        }
        // SAFETY: a zeroed sigaction is a valid starting point; every field the kernel
        // reads is set below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `action.sa_mask` is a valid sigset to empty; `action` is complete and
        // its handler is async-signal-safe (see `on_sigbus`).
        unsafe {
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0
        }
    })
}

/// The SIGBUS handler: a fault inside this thread's copy gets a page of zeros in place
/// and the copy is marked; anything else goes where it went before the guard. Only
/// async-signal-safe work: thread-local atomics and two system calls.
extern "C" fn on_sigbus(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (code, address) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let (start, end) =
        COPYING.with(|(s, e)| (s.load(Ordering::Relaxed), e.load(Ordering::Relaxed)));
    // A fault the kernel raised (si_code > 0), inside the copy under way.
    if code > 0 && start <= address && address < end {
        let page = address & !(PAGE.load(Ordering::Relaxed) - 1);
        // SAFETY: `page` is a page of a mapping this thread is copying from, which is
        // let go (never read again) once the copy reports the fault; MAP_FIXED replaces
        // just that page with readable zeros so that the faulting load can complete.
        let zeros = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                PAGE.load(Ordering::Relaxed),
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if zeros != libc::MAP_FAILED {
            FAULTED.with(|f| f.store(true, Ordering::Relaxed));
            return;
        }
    }
    let Some(Previous(previous)) = PREVIOUS.get() else {
        return;
    };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // SAFETY: putting back the action that was there before the guard; the fault
        // happens again on return and is then handled as it would have been.
        unsafe { libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut()) };
        return;
    }
    if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: an SA_SIGINFO action's handler has this signature.
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        handler(signal, info, context);
    } else {
        // SAFETY: a plain action's handler takes the signal number alone.
        let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        handler(signal);
    }
}

/// What a copy from a mapping did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copied {
    Done,
    Outside,
    Cut,
}

/// A queue file's first `len` bytes mapped read-only and shared (the writers' `pwrite`s
/// show in it at once: the same pages). Let go when dropped.
pub struct Mapping {
    at: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only memory owned by this value; copies from it are made
// under the GIL and nothing else refers to it.
unsafe impl Send for Mapping {}
// SAFETY: as above: `copy` only reads it.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `fd` (an open queue file) up to `len` bytes, no further than its length now;
    /// None if it is empty, cannot be mapped, or the guard could not be installed.
    pub fn of(fd: i32, len: usize) -> Option<Mapping> {
        if !guard_installed() {
            return None;
        }
        let mut stat = std::mem::MaybeUninit::<libc::stat>::zeroed();
        // SAFETY: fstat writes a stat into the properly sized buffer.
        if unsafe { libc::fstat(fd, stat.as_mut_ptr()) } != 0 {
            return None;
        }
        // SAFETY: fstat succeeded, so it filled `stat`.
        let size = usize::try_from(unsafe { stat.assume_init() }.st_size).ok()?;
        let len = len.min(size);
        if len == 0 {
            return None;
        }
        // SAFETY: a fresh read-only shared mapping of an open descriptor; the kernel
        // picks the address. The descriptor may be closed later: the mapping stays.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        (at != libc::MAP_FAILED).then_some(Mapping { at, len })
    }

    /// Copy the mapping's bytes from `from` into `out` (all of it). `Outside` when they
    /// are not all in the mapping; `Cut` when the file was cut short under them (the
    /// guard stepped in): then `out` is not to be used, nor is this mapping again.
    pub fn copy(&self, from: usize, out: &mut [u8]) -> Copied {
        let Some(to) = from.checked_add(out.len()).filter(|&to| to <= self.len) else {
            return Copied::Outside;
        };
        let start = self.at as usize + from;
        FAULTED.with(|f| f.store(false, Ordering::Relaxed));
        COPYING.with(|(s, e)| {
            s.store(start, Ordering::Relaxed);
            e.store(self.at as usize + to, Ordering::Relaxed);
        });
        compiler_fence(Ordering::SeqCst);
        // SAFETY: [from, to) lies inside the mapping (checked above), which lives as
        // long as `self`; `out` is a distinct buffer of the same length. A page the file
        // lost meanwhile faults, and the guard (noted just above) makes it read zeros.
        unsafe {
            std::ptr::copy_nonoverlapping(start as *const u8, out.as_mut_ptr(), out.len());
        }
        compiler_fence(Ordering::SeqCst);
        COPYING.with(|(s, e)| {
            s.store(0, Ordering::Relaxed);
            e.store(0, Ordering::Relaxed);
        });
        if FAULTED.with(|f| f.load(Ordering::Relaxed)) {
            Copied::Cut
        } else {
            Copied::Done
        }
    }
}

impl Mapping {
    /// The little-endian word at `at` (8-aligned, inside the mapping), loaded as an atomic
    /// with Acquire ordering (other processes store it as one); None outside. Not under
    /// the guard: for a file never cut short (the shared state's header, which Python
    /// reads through a mapping of its own the same way).
    pub fn word(&self, at: usize) -> Option<u64> {
        if !at.is_multiple_of(8) || at.checked_add(8)? > self.len {
            return None;
        }
        // SAFETY: [at, at + 8) lies inside the mapping, which lives as long as `self`,
        // and is 8-aligned (the mapping starts on a page); an AtomicU64 has a u64's
        // size and alignment, and the word is only ever written atomically.
        let word = unsafe {
            &*self
                .at
                .cast::<u8>()
                .add(at)
                .cast::<std::sync::atomic::AtomicU64>()
        };
        Some(u64::from_le(word.load(Ordering::Acquire)))
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `at`/`len` are the mapping made in `of`, unmapped only here.
        unsafe { libc::munmap(self.at, self.len) };
    }
}
