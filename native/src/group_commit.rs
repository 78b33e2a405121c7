//! Group commit for sync mode (issue 31, part 9): a flusher thread fdatasyncs the
//! log's active segment back to back while appenders wait for it, and wakes exactly
//! the waiters each fdatasync covered. No Python here: the appenders wait without the
//! GIL (`python/log_sync.rs` is the door).
//!
//! 1. An appender, its record written and published, registers `(end, its thread)`
//!    and parks (`GroupCommit::wait`).
//! 2. The flusher gathers: while fewer waiters are registered than its last group had
//!    (those its last fdatasync covered and those that registered while it ran), it
//!    waits for more, at most `GATHER_SHARE` of the last fdatasync's time from the
//!    first one's registration (a group just woken comes back one thread at a time,
//!    and an fdatasync started a little later covers all of them). A group of more than
//!    one is expected back whole (by the last round's idle plus that window): the
//!    flusher sleeps until then, and the registration that makes the group whole runs
//!    the round itself, on its own thread (a *leader*: no futex wake of the flusher,
//!    no wait for it to get a CPU, and no wake of the first waiter after the
//!    fdatasync, which is the leader, already running: docs/PERFORMANCE.md,
//!    "sync31-s51"); a lone waiter (a group of one) leads at once. Only a group not
//!    back by then, or a first waiter after an idle spell, wakes the flusher at its
//!    first registration; a waiter that registers while a round is in flight waits
//!    for the next, which the flusher runs (a leader that leaves waiters wakes it).
//! 3. The round (the flusher's or a leader's; one at a time) takes the highest end
//!    registered (bounded by its segment's end), fdatasyncs the segment, raises the
//!    durable watermark in the checkpoint (`Watermark`), and wakes the waiters whose
//!    end it covered; the others wait for the next one, which starts at once (back to
//!    back). The flusher unparks only the first of them (a leader none: it is the
//!    first); the rest form a *relay*: each waiter, when it next lets go of the GIL to
//!    wait (`wait`: its next append written), unparks the next one, which then takes
//!    the GIL just let go. The appenders run Python one at a
//!    time anyway: woken all at once, they made the flusher pay a futex wake each on its
//!    round and crowded the CPUs its next fdatasync's own wake-ups queue for
//!    (docs/PERFORMANCE.md, "sync31-s45": half the flusher's futex calls, a quarter of
//!    its run-queue wait). A relay no waiter passes on (the thread stopped appending,
//!    or took the long way) is unparked whole by the flusher after its next fdatasync,
//!    or after `RELAY_IDLE` when nothing else wakes it; a waiter also looks at its slot
//!    by itself every `SELF_CHECK` (a leader's relay: the flusher is not woken by it).
//!    A waiter woken by another's `wait` whose waker has not reached its park yet (the
//!    wake preempted it: it is runnable on this CPU with its park still to do) hands
//!    the next wake to it (`Mailbox`): the waker wakes the next as it parks or returns,
//!    when the CPU has one thread to run and not two; woken from beside a runnable one,
//!    the next was sent to the other vCPU, which halts when idle and takes 20-40 µs to
//!    come back (docs/PERFORMANCE.md, "sync31-s58"). Only while such wakes go there:
//!    one in `PROBE_EVERY` (and every one while the last did not) is made directly, and
//!    its wakee says whether it got another CPU than its waker's (`other_idle`).
//!    Having woken the first, the flusher makes the page the next record goes into
//!    writable again (`MADV_POPULATE_WRITE` through the appenders' mapping, when it was
//!    given one: `use_segment_mapped`), which its fdatasync write-protected: that fault
//!    was the first woken appender's, on the chain of re-appends the next round waits
//!    for. A leader leaves it: its own next append takes the fault, as it would wait
//!    for the advice.
//! 4. A failed fdatasync (or watermark write) fails the group commit for good: every
//!    waiter, now and later, is told so (`Waited::Failed`), as the store refuses writes.
//!
//! The segment it syncs is registered by the appenders (`use_segment`), only once
//! everything below the segment's base is durable: an fdatasync of the segment then
//! makes the log durable up to the end it covered.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::crc::crc32c;

/// The most of the last fdatasync's time the flusher waits for a group to come back.
const GATHER_SHARE: f64 = 0.5;
/// The longest gather, whatever the last fdatasync took.
const GATHER_MAX: Duration = Duration::from_millis(2);
/// The longest a waiter sleeps before it looks at its slot again by itself.
const SELF_CHECK: Duration = Duration::from_millis(2);
/// The least `whole_in` a group not back in time makes it (doubled from then on).
const WHOLE_IN_MIN: Duration = Duration::from_micros(50);
/// The shortest the flusher naps while a leader's round is in flight.
const NAP_MIN: Duration = Duration::from_micros(50);
/// How long the flusher, with no waiter to sync for, lets a relay stand before it
/// unparks the waiters left in it.
const RELAY_IDLE: Duration = Duration::from_millis(1);
/// One in this many wakes a waiter could hand to its waker is made directly, to see
/// whether the other CPU still takes such wakes (`wait_if`).
const PROBE_EVERY: u64 = 32;

const WAITING: u8 = 0;
const DURABLE: u8 = 1;
const FAILED: u8 = 2;
const CLOSED: u8 = 3;

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// An fdatasync covered the end: the record is durable.
    Durable,
    /// An fdatasync failed (now or before): the store refuses writes.
    Failed,
    /// Not covered within the timeout.
    TimedOut,
    /// The group commit was stopped (the store closed) before covering it.
    Closed,
}

struct Slot {
    state: AtomicU8,
    thread: Thread,
    /// The mailbox of the thread whose `wait` unparked it (None: the flusher did).
    waker: std::sync::OnceLock<Arc<Mailbox>>,
    /// Unparked directly where its wake could have been handed on (a probe): the CPU
    /// of the thread that unparked it (-1: not a probe).
    probe_cpu: std::sync::atomic::AtomicI32,
}

/// A thread's mailbox for the wake of the relay's next, handed to it by the waiter it
/// unparked (`wait_if`): open from that unpark until the thread is at its park (or back
/// from its wait), when it wakes what was handed to it (`drain_and_close`).
struct Mailbox {
    /// (open, the slot to wake)
    inner: Mutex<(bool, Option<Arc<Slot>>)>,
}

impl Mailbox {
    fn lock(&self) -> MutexGuard<'_, (bool, Option<Arc<Slot>>)> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn open(&self) {
        self.lock().0 = true;
    }

    fn is_open(&self) -> bool {
        self.lock().0
    }

    /// Take `next`'s wake, if still open and empty.
    fn deposit(&self, next: &Arc<Slot>) -> bool {
        let mut inner = self.lock();
        if inner.0 && inner.1.is_none() {
            inner.1 = Some(next.clone());
            true
        } else {
            false
        }
    }
}

/// Wake what was handed to this thread's mailbox `me` (each woken with `me` as its
/// waker, the mailbox still open for what it hands on in turn), then close it.
fn drain_and_close(me: &Arc<Mailbox>) {
    loop {
        let handed = {
            let mut inner = me.lock();
            match inner.1.take() {
                Some(slot) => slot,
                None => {
                    inner.0 = false;
                    return;
                }
            }
        };
        let _ = handed.waker.set(me.clone());
        handed.thread.unpark();
    }
}

thread_local! {
    static MAILBOX: Arc<Mailbox> = Arc::new(Mailbox { inner: Mutex::new((false, None)) });
    /// The mailbox of the waiter that unparked this thread's last wait.
    static LAST_WAKER: std::cell::RefCell<Option<Arc<Mailbox>>> = const { std::cell::RefCell::new(None) };
}

struct Waiter {
    end: u64,
    slot: Arc<Slot>,
}

/// The segment the flusher syncs: its base, end and file.
#[derive(Clone)]
struct Segment {
    base: u64,
    end: u64,
    file: Arc<File>,
    /// The appenders' shared mapping of it (address, length), if given.
    map: Option<(usize, usize)>,
}

struct State {
    segment: Option<Segment>,
    waiters: Vec<Waiter>,
    /// Waiters covered (marked durable) but not unparked yet: the relay, in order;
    /// each `wait` unparks the first.
    relay: VecDeque<Arc<Slot>>,
    /// The errno of the failure that stopped it.
    failed: Option<i32>,
    stopping: bool,
    /// The flusher sleeps on `work` until this many waiters are registered (1: for a
    /// first one; its last group's size when gathering); 0: it does not sleep.
    wake_at: usize,
    /// How many waiters the flusher waits for when gathering: its last group's size
    /// (the waiters it covered and those registered while it synced).
    want: usize,
    last_sync: Duration,
    /// When the first of the registered waiters registered (None: none yet).
    first_at: Option<Instant>,
    /// The last round's idle: from the round before's end to its first registration.
    last_idle: Duration,
    /// Tests: every fdatasync from now on fails with this errno.
    fail_with: Option<i32>,
    /// Tests: no fdatasync starts while set (waiters wait for `advance` or time out).
    held: bool,
    /// Tests: the gather's window, instead of `GATHER_SHARE` of the last fdatasync's time.
    gather: Option<Duration>,
    /// Raised after each fdatasync, by the flusher or a leader (let go at `stop`: its
    /// descriptor is the store's checkpoint file).
    watermark: Option<Arc<Watermark>>,
    /// A round (fdatasync, watermark, wake) is in flight, the flusher's or a leader's.
    round: bool,
    /// Rounds done, the flusher's and the leaders': the flusher plans again when it moved.
    rounds: u64,
    /// When the last round woke its waiters.
    ended: Instant,
    /// How long the last group a leader ran took to come back whole (from the round
    /// before's end to its last registration); doubled when the flusher's wait for a
    /// group ran out and it synced part of it (the window was too short).
    whole_in: Duration,
    /// The waiter whose registration makes this many registered runs the round itself,
    /// a *leader* (the group is back whole: step 2 of the module's docs); 0: none.
    lead_at: usize,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    /// How a round makes the segment durable.
    sync: SyncFn,
    /// How many rounds a leader ran (the others: the flusher).
    led: AtomicU64,
    /// The log is durable below it (raised by the flusher and by `advance`).
    flushed: AtomicU64,
    syncs: AtomicU64,
    /// How many times the flusher made the tail page writable again.
    populated: AtomicU64,
    /// The base of the segment of the flusher's round in flight (`u64::MAX`: none).
    in_round: AtomicU64,
    /// How many registrations woke the flusher (`wake_at` reached).
    notified: AtomicU64,
    /// Nanoseconds the flusher spent in fdatasyncs (with the watermark's write), and
    /// gathering (waiting for a group to come back): its accounting.
    syncing_ns: AtomicU64,
    gathering_ns: AtomicU64,
    /// A round's wall, step by step (`RoundTimes`).
    fdatasync_ns: AtomicU64,
    watermark_ns: AtomicU64,
    waking_ns: AtomicU64,
    idle_ns: AtomicU64,
    /// The last probe's wakee got another CPU than its waker's (`wait_if`): wakes are
    /// handed to a waker not at its park yet.
    other_idle: std::sync::atomic::AtomicBool,
    /// Wakes that could have been handed on, counted for the probes.
    candidates: AtomicU64,
}

/// Where the flusher's wall went, summed over its rounds (nanoseconds): a round is
/// `idle` (no waiter registered: the woken group's appenders re-appending), `gathering`
/// (some registered, waiting for the rest), the `fdatasync`, the `watermark`'s raise,
/// and `waking` (marking the covered waiters and unparking the first of them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundTimes {
    pub fdatasync: u64,
    pub watermark: u64,
    pub waking: u64,
    pub idle: u64,
    pub gathering: u64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Mark every waiter `end <= flushed` durable; their slots, to unpark.
    fn covered(&self, state: &mut State, flushed: u64) -> Vec<Arc<Slot>> {
        let mut woken = Vec::new();
        state.waiters.retain(|waiter| {
            if waiter.end <= flushed {
                waiter.slot.state.store(DURABLE, Ordering::Release);
                woken.push(waiter.slot.clone());
                false
            } else {
                true
            }
        });
        woken
    }

    fn all_with(state: &mut State, outcome: u8) -> Vec<Arc<Slot>> {
        state
            .waiters
            .drain(..)
            .map(|waiter| {
                waiter.slot.state.store(outcome, Ordering::Release);
                waiter.slot
            })
            .collect()
    }

    fn raise(&self, flushed: u64) {
        self.flushed.fetch_max(flushed, Ordering::AcqRel);
    }

    /// The slots of the covered waiters `woken` (in order) to unpark now: the first,
    /// and what is left of an earlier relay; the others become the relay.
    fn relay(state: &mut State, woken: Vec<Arc<Slot>>) -> Vec<Arc<Slot>> {
        let mut now: Vec<Arc<Slot>> = state.relay.drain(..).collect();
        let mut woken = woken.into_iter();
        now.extend(woken.next());
        state.relay.extend(woken);
        now
    }
}

fn unpark(slots: Vec<Arc<Slot>>) {
    for slot in slots {
        slot.thread.unpark();
    }
}

/// What the flusher does after each fdatasync, before it wakes anyone: raise the
/// durable watermark in the checkpoint file (checkpoint.py's `save_flushed`).
///
/// The file's two slots are read and written through a shared mapping of them once the
/// file holds both (no `pread`/`pwrite` a round; docs/PERFORMANCE.md, "sync31-s47"),
/// with `pread`/`pwrite` before that; the `flock` around each raise stays, as other
/// processes and checkpoint.py write the file under it. The mapping covers the slots'
/// bytes, inside the file's first block, which the file holds once it is that long:
/// a store into it needs no new block (no SIGBUS at a full disk), and the checkpoint
/// is never made shorter.
pub struct Watermark {
    file: File,
    slots: std::sync::OnceLock<Slots>,
}

/// A shared mapping of the checkpoint's two slots.
struct Slots(*mut u8);

// SAFETY: the pointer is a shared file mapping owned by its `Slots` (unmapped on drop),
// read and written only under the checkpoint file's `flock`.
unsafe impl Send for Slots {}
// SAFETY: as above; no access to the mapping happens outside the file's lock.
unsafe impl Sync for Slots {}

impl Slots {
    /// Map the first `2 * SLOT_SIZE` bytes of `file`, if it is at least that long.
    fn map(file: &File) -> io::Result<Option<Slots>> {
        if file.metadata()?.len() < (2 * SLOT_SIZE) as u64 {
            return Ok(None);
        }
        // SAFETY: a new shared mapping of an open file's first bytes, which exist (its
        // length was just checked, and the checkpoint is never truncated); the kernel
        // chooses the address.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * SLOT_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Some(Slots(at.cast())))
    }

    fn read(&self, into: &mut [u8; 2 * SLOT_SIZE]) {
        // SAFETY: the mapping is `2 * SLOT_SIZE` bytes long, readable, and alive while
        // `self` is; `into` is a distinct local buffer of the same length.
        unsafe { std::ptr::copy_nonoverlapping(self.0, into.as_mut_ptr(), into.len()) };
    }

    fn write(&self, slot: usize, raw: &[u8; SLOT_SIZE]) {
        debug_assert!(slot < 2);
        // SAFETY: `slot * SLOT_SIZE + SLOT_SIZE` is within the writable mapping (slot
        // is 0 or 1), alive while `self` is; `raw` is a local buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(raw.as_ptr(), self.0.add(slot * SLOT_SIZE), SLOT_SIZE)
        };
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Slots::map`, not used after this.
        unsafe { libc::munmap(self.0.cast(), 2 * SLOT_SIZE) };
    }
}

/// A checkpoint slot (checkpoint.py, FORMAT.md "Checkpoint"): magic, version, reserved,
/// sequence, commit-log flushed, dispatched, index dispatched, time; CRC32C after.
const SLOT_SIZE: usize = 64;
const SLOT_FIELDS: usize = 48;
const MAGIC: &[u8; 4] = b"TDMC";
const VERSION: u16 = 1;

struct Slotted {
    sequence: u64,
    flushed: u64,
    dispatched: u64,
    index_dispatched: u64,
}

fn parse_slot(raw: &[u8]) -> Option<Slotted> {
    let word = |at: usize| u64::from_le_bytes(raw[at..at + 8].try_into().unwrap_or([0; 8]));
    let crc = u32::from_le_bytes(raw[SLOT_FIELDS..SLOT_FIELDS + 4].try_into().ok()?);
    if crc32c(&raw[..SLOT_FIELDS]) != crc
        || &raw[..4] != MAGIC
        || u16::from_le_bytes([raw[4], raw[5]]) != VERSION
    {
        return None;
    }
    Some(Slotted {
        sequence: word(8),
        flushed: word(16),
        dispatched: word(24),
        index_dispatched: word(32),
    })
}

impl Watermark {
    /// The checkpoint file at `path`, opened anew: its own open file description, so
    /// its `flock` takes turns with the engine's (checkpoint.py) as with another
    /// process's.
    pub fn open(path: &std::path::Path) -> io::Result<Watermark> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        Ok(Watermark {
            file,
            slots: std::sync::OnceLock::new(),
        })
    }

    /// Raise the checkpoint's commit-log flushed field to `flushed` (never lower it),
    /// the other fields as they are: written into the older slot, not fsynced, under
    /// the file's lock, as `Checkpoint.save_flushed` does.
    pub fn raise(&self, flushed: u64) -> io::Result<()> {
        let fd = self.file.as_raw_fd();
        // SAFETY: `fd` is this Watermark's open file; flock only takes a lock on it.
        if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let written = self.raise_locked(flushed);
        // SAFETY: as above; the lock taken just before is let go.
        unsafe { libc::flock(fd, libc::LOCK_UN) };
        written
    }

    fn raise_locked(&self, flushed: u64) -> io::Result<()> {
        let mut both = [0u8; 2 * SLOT_SIZE];
        let mapped = match self.slots.get() {
            Some(slots) => Some(slots),
            None => Slots::map(&self.file)?.map(|slots| self.slots.get_or_init(|| slots)),
        };
        let mut read = 0;
        match mapped {
            Some(slots) => {
                slots.read(&mut both);
                read = both.len();
            }
            None => {
                while read < both.len() {
                    let n = self.file.read_at(&mut both[read..], read as u64)?;
                    if n == 0 {
                        break;
                    }
                    read += n;
                }
            }
        }
        let current = both[..read]
            .chunks_exact(SLOT_SIZE)
            .filter_map(parse_slot)
            .max_by_key(|slot| slot.sequence);
        let (sequence, dispatched, index_dispatched) = match &current {
            Some(slot) if slot.flushed >= flushed => return Ok(()),
            Some(slot) => (slot.sequence + 1, slot.dispatched, slot.index_dispatched),
            None => (1, 0, 0),
        };
        let when = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let mut raw = [0u8; SLOT_SIZE];
        raw[..4].copy_from_slice(MAGIC);
        raw[4..6].copy_from_slice(&VERSION.to_le_bytes());
        raw[8..16].copy_from_slice(&sequence.to_le_bytes());
        raw[16..24].copy_from_slice(&flushed.to_le_bytes());
        raw[24..32].copy_from_slice(&dispatched.to_le_bytes());
        raw[32..40].copy_from_slice(&index_dispatched.to_le_bytes());
        raw[40..48].copy_from_slice(&when.to_le_bytes());
        let crc = crc32c(&raw[..SLOT_FIELDS]);
        raw[SLOT_FIELDS..SLOT_FIELDS + 4].copy_from_slice(&crc.to_le_bytes());
        let slot = (sequence % 2) as usize;
        match mapped {
            Some(slots) => {
                slots.write(slot, &raw);
                Ok(())
            }
            None => self.file.write_all_at(&raw, (slot * SLOT_SIZE) as u64),
        }
    }
}

/// How the flusher makes a segment durable (`fdatasync` in production).
pub type SyncFn = Box<dyn Fn(&File) -> io::Result<()> + Send + Sync>;

/// The group commit of one open store in sync mode: the flusher thread and its waiters.
pub struct GroupCommit {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The process that started the flusher: a child forked since has no flusher
    /// thread, and its copy of the state's lock may be held by it forever.
    pid: u32,
}

impl GroupCommit {
    /// Start the flusher; the log is durable below `flushed`; `watermark` is raised
    /// after each fdatasync (None: no checkpoint to raise, as in tests).
    pub fn start(flushed: u64, watermark: Option<Watermark>) -> io::Result<GroupCommit> {
        GroupCommit::start_with(flushed, watermark, Box::new(fdatasync))
    }

    /// `start`, the flusher making each segment durable with `sync` (`fdatasync`, or
    /// the fault seam's site around it: python/log_sync.rs).
    pub fn start_with(
        flushed: u64,
        watermark: Option<Watermark>,
        sync: SyncFn,
    ) -> io::Result<GroupCommit> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                segment: None,
                waiters: Vec::new(),
                relay: VecDeque::new(),
                failed: None,
                stopping: false,
                wake_at: 0,
                want: 1,
                last_sync: Duration::ZERO,
                first_at: None,
                last_idle: Duration::ZERO,
                fail_with: None,
                held: false,
                gather: None,
                watermark: watermark.map(Arc::new),
                round: false,
                rounds: 0,
                ended: Instant::now(),
                whole_in: Duration::ZERO,
                lead_at: 0,
            }),
            work: Condvar::new(),
            sync,
            led: AtomicU64::new(0),
            flushed: AtomicU64::new(flushed),
            syncs: AtomicU64::new(0),
            populated: AtomicU64::new(0),
            in_round: AtomicU64::new(u64::MAX),
            notified: AtomicU64::new(0),
            syncing_ns: AtomicU64::new(0),
            gathering_ns: AtomicU64::new(0),
            fdatasync_ns: AtomicU64::new(0),
            watermark_ns: AtomicU64::new(0),
            waking_ns: AtomicU64::new(0),
            idle_ns: AtomicU64::new(0),
            other_idle: std::sync::atomic::AtomicBool::new(true),
            candidates: AtomicU64::new(1),
        });
        let flusher = shared.clone();
        let thread = thread::Builder::new()
            .name("tidemark-group-commit".into())
            .spawn(move || run(&flusher))?;
        Ok(GroupCommit {
            shared,
            thread: Mutex::new(Some(thread)),
            pid: std::process::id(),
        })
    }

    /// The log is durable below this offset.
    pub fn flushed(&self) -> u64 {
        self.shared.flushed.load(Ordering::Acquire)
    }

    /// How many fdatasyncs the flusher issued.
    pub fn syncs(&self) -> u64 {
        self.shared.syncs.load(Ordering::Relaxed)
    }

    /// Nanoseconds the flusher spent in fdatasyncs (the watermark's write included) and
    /// in gathering.
    pub fn times_ns(&self) -> (u64, u64) {
        (
            self.shared.syncing_ns.load(Ordering::Relaxed),
            self.shared.gathering_ns.load(Ordering::Relaxed),
        )
    }

    /// How many times a waiter's registration woke the flusher.
    pub fn notified(&self) -> u64 {
        self.shared.notified.load(Ordering::Relaxed)
    }

    /// How many rounds a leader ran (a waiter whose registration made its group whole).
    pub fn led(&self) -> u64 {
        self.shared.led.load(Ordering::Relaxed)
    }

    /// The flusher's wall so far, step by step.
    pub fn round_times(&self) -> RoundTimes {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        RoundTimes {
            fdatasync: load(&self.shared.fdatasync_ns),
            watermark: load(&self.shared.watermark_ns),
            waking: load(&self.shared.waking_ns),
            idle: load(&self.shared.idle_ns),
            gathering: load(&self.shared.gathering_ns),
        }
    }

    /// The base of the segment the flusher syncs (None before the first).
    pub fn segment_base(&self) -> Option<u64> {
        self.shared.lock().segment.as_ref().map(|s| s.base)
    }

    /// Sync the segment `[base, end)` from now on (`file` opened on it), everything
    /// below `base` being durable. A segment older than the current one is ignored.
    pub fn use_segment(&self, base: u64, end: u64, file: File) {
        // SAFETY: no mapping is given.
        unsafe { self.use_segment_mapped(base, end, file, None) }
    }

    /// The base of the segment the flusher has a round in flight on (from when it
    /// took the segment, under the state's lock, until the round is over).
    pub fn in_round(&self) -> Option<u64> {
        let base = self.shared.in_round.load(Ordering::Acquire);
        (base != u64::MAX).then_some(base)
    }

    /// How many times the flusher made the tail page writable again after a round.
    pub fn populated(&self) -> u64 {
        self.shared.populated.load(Ordering::Relaxed)
    }

    /// `use_segment`, with the appenders' shared mapping of the segment (`map`: its
    /// address and length): after each round the flusher makes the page at the synced
    /// end writable again (`MADV_POPULATE_WRITE`), which the fdatasync write-protected,
    /// so that the first appender it woke does not take that fault.
    ///
    /// # Safety
    ///
    /// `map` must stay mapped, and within the segment's reserved (fallocated) space,
    /// until the flusher is stopped, or another segment was handed over since and
    /// `in_round` is not this one's base (a round takes the newest segment handed over;
    /// python/log_sync.rs keeps the mmap exported for as long).
    pub unsafe fn use_segment_mapped(
        &self,
        base: u64,
        end: u64,
        file: File,
        map: Option<(usize, usize)>,
    ) {
        let mut state = self.shared.lock();
        if state.segment.as_ref().is_some_and(|s| s.base >= base) {
            return;
        }
        state.segment = Some(Segment {
            base,
            end,
            file: Arc::new(file),
            map,
        });
        state.wake_at = 0;
        self.shared.work.notify_one();
        drop(state);
        self.advance(base);
    }

    /// Everything below `flushed` is durable (another flush made it so): wake the
    /// waiters it covers.
    pub fn advance(&self, flushed: u64) {
        self.shared.raise(flushed);
        let mut state = self.shared.lock();
        let woken = self.shared.covered(&mut state, self.flushed());
        drop(state);
        unpark(woken);
    }

    /// The store failed (`errno`): every waiter, now and later, gets `Waited::Failed`.
    pub fn fail(&self, errno: i32) {
        let mut state = self.shared.lock();
        state.failed.get_or_insert(errno);
        let mut woken = Shared::all_with(&mut state, FAILED);
        woken.extend(state.relay.drain(..));
        drop(state);
        unpark(woken);
    }

    /// Unpark the first waiter of the relay, if any (`wait` does, as its thread lets
    /// go of the GIL).
    pub fn pass_on(&self) {
        let next = {
            let mut state = self.shared.lock();
            state.relay.pop_front()
        };
        if let Some(slot) = next {
            slot.thread.unpark();
        }
    }

    /// The errno of the failure, if it failed.
    pub fn failure(&self) -> Option<i32> {
        self.shared.lock().failed
    }

    /// Tests: every fdatasync from now on fails with `errno` (None: they succeed).
    pub fn fail_syncs(&self, errno: Option<i32>) {
        self.shared.lock().fail_with = errno;
    }

    /// Tests: start no fdatasync while `held` (one in flight finishes).
    pub fn hold_syncs(&self, held: bool) {
        let mut state = self.shared.lock();
        state.held = held;
        state.wake_at = 0;
        self.shared.work.notify_all();
    }

    /// Tests: gather for a group within `window`, and expect a group a round woke back
    /// whole within it, however loaded the machine (None: `GATHER_SHARE` of the last
    /// fdatasync's time, at most `GATHER_MAX`; expected back within `expect_whole`'s cap).
    pub fn gather_within(&self, window: Option<Duration>) {
        self.shared.lock().gather = window;
    }

    /// Wait (parked; call it without the GIL) until the log is durable up to `end`,
    /// the group commit failed or stopped, or `timeout` passed. First unparks the
    /// next waiter of the relay (the module's step 3): the caller just let go of the
    /// GIL, which that waiter then takes.
    pub fn wait(&self, end: u64, timeout: Duration) -> Waited {
        self.wait_if(end, timeout, |_| true)
            .unwrap_or(Waited::Closed)
    }

    /// `wait`, if the segment the flusher syncs holds `end` (`base < end <= its end`):
    /// everything below its base was durable when it was handed over, so its
    /// fdatasync covers `end`. None (nothing done, the relay not passed on): it does
    /// not, and the caller hands over a segment or syncs the long way first. The
    /// append's usual case, without a look at the store's Python objects.
    pub fn wait_in_segment(&self, end: u64, timeout: Duration) -> Option<Waited> {
        self.wait_if(end, timeout, |segment| {
            segment.is_some_and(|s| s.base < end && end <= s.end)
        })
    }

    /// The waits' one lock: if `holds(segment)`, pass the relay on and register (or
    /// return at once: failed, durable already, stopping), then park.
    fn wait_if(
        &self,
        end: u64,
        timeout: Duration,
        holds: impl Fn(Option<&Segment>) -> bool,
    ) -> Option<Waited> {
        let slot = Arc::new(Slot {
            state: AtomicU8::new(WAITING),
            thread: thread::current(),
            waker: std::sync::OnceLock::new(),
            probe_cpu: std::sync::atomic::AtomicI32::new(-1),
        });
        let mut state = self.shared.lock();
        if !holds(state.segment.as_ref()) {
            return None;
        }
        let mut lead = false;
        let next = state.relay.pop_front();
        let early = if state.failed.is_some() {
            Some(Waited::Failed)
        } else if self.flushed() >= end {
            Some(Waited::Durable)
        } else if state.stopping {
            Some(Waited::Closed)
        } else {
            if state.waiters.is_empty() {
                state.first_at = Some(Instant::now());
            }
            state.waiters.push(Waiter {
                end,
                slot: slot.clone(),
            });
            if state.lead_at > 0
                && state.waiters.len() >= state.lead_at
                && !state.round
                && !state.held
                && state.segment.is_some()
            {
                // The group is whole: this waiter runs its round (step 2).
                state.whole_in = Instant::now().saturating_duration_since(state.ended);
                state.lead_at = 0;
                state.wake_at = 0;
                state.round = true;
                lead = true;
            } else if state.wake_at > 0 && state.waiters.len() >= state.wake_at {
                state.wake_at = 0;
                self.shared.notified.fetch_add(1, Ordering::Relaxed);
                self.shared.work.notify_one();
            }
            None
        };
        drop(state);
        let waker = LAST_WAKER.with(|w| w.borrow_mut().take());
        if let Some(next) = next {
            // The waiter that unparked this one, if not at its park yet, runs again
            // before it parks: it wakes the next then, when this CPU has one thread to
            // run and not two (docs/PERFORMANCE.md, "sync31-s58"). Only while such wakes
            // were seen sent to the other CPU (it idles): one in `PROBE_EVERY`, and all
            // while none was, is made directly and tells (`parked`).
            let waker = waker.filter(|waker| waker.is_open());
            let shared = &*self.shared;
            let handed = waker.as_ref().is_some_and(|waker| {
                let probe = !shared.other_idle.load(Ordering::Relaxed)
                    || shared
                        .candidates
                        .fetch_add(1, Ordering::Relaxed)
                        .is_multiple_of(PROBE_EVERY);
                if probe {
                    // SAFETY: sched_getcpu takes no arguments and only reads.
                    next.probe_cpu
                        .store(unsafe { libc::sched_getcpu() }, Ordering::Relaxed);
                    return false;
                }
                waker.deposit(&next)
            });
            if !handed {
                MAILBOX.with(|me| {
                    me.open();
                    let _ = next.waker.set(me.clone());
                });
                next.thread.unpark();
            }
        }
        let waited = if early.is_some() {
            early
        } else {
            if lead {
                self.lead(&slot);
            }
            Some(self.parked(&slot, timeout))
        };
        MAILBOX.with(drain_and_close);
        waited
    }

    /// Run the round this waiter (`slot`, registered) is the leader of, then return:
    /// it is covered (marked) unless its end lies past the segment's.
    fn lead(&self, slot: &Arc<Slot>) {
        let shared = &*self.shared;
        let mut state = shared.lock();
        let ended = state.ended;
        account(shared, &mut state, ended, Instant::now());
        let Some(segment) = state.segment.clone() else {
            state.round = false;
            shared.work.notify_one();
            return;
        };
        shared.led.fetch_add(1, Ordering::Relaxed);
        drop(round(shared, state, segment, Some(slot)));
    }

    /// Park until `slot` (registered) is marked, or `timeout` passes (it then leaves
    /// the list).
    fn parked(&self, slot: &Arc<Slot>, timeout: Duration) -> Waited {
        let deadline = Instant::now() + timeout;
        let mut woke = false;
        loop {
            match slot.state.load(Ordering::Acquire) {
                DURABLE => {
                    if woke {
                        let waker = slot.waker.get().cloned();
                        LAST_WAKER.with(|w| *w.borrow_mut() = waker);
                        let probe = slot.probe_cpu.load(Ordering::Relaxed);
                        if probe >= 0 {
                            // SAFETY: sched_getcpu takes no arguments and only reads.
                            let here = unsafe { libc::sched_getcpu() };
                            self.shared
                                .other_idle
                                .store(here != probe, Ordering::Relaxed);
                        }
                    }
                    return Waited::Durable;
                }
                FAILED => return Waited::Failed,
                CLOSED => return Waited::Closed,
                _ => {}
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            // Not longer than `SELF_CHECK` at a time: a waiter covered but left in a
            // relay no one passes on (its leader's thread stopped appending) returns by
            // itself, whenever the flusher next looks.
            MAILBOX.with(drain_and_close);
            thread::park_timeout((deadline - now).min(SELF_CHECK));
            woke = true;
        }
        let mut state = self.shared.lock();
        match slot.state.load(Ordering::Acquire) {
            DURABLE => Waited::Durable,
            FAILED => Waited::Failed,
            CLOSED => Waited::Closed,
            _ => {
                state.waiters.retain(|w| !Arc::ptr_eq(&w.slot, slot));
                Waited::TimedOut
            }
        }
    }

    /// Stop the flusher (after its fdatasync in flight, if any); the waiters left get
    /// `Waited::Closed`. Safe to call twice; does nothing in a forked child.
    pub fn stop(&self) {
        if std::process::id() != self.pid {
            // Its handle names a thread of the parent: never joined or detached here.
            if let Ok(mut thread) = self.thread.try_lock() {
                std::mem::forget(thread.take());
            }
            return;
        }
        {
            let mut state = self.shared.lock();
            state.stopping = true;
            self.shared.work.notify_all();
        }
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        let mut state = self.shared.lock();
        while state.round {
            // A leader's round in flight: it ends with its fdatasync.
            drop(state);
            thread::sleep(Duration::from_micros(100));
            state = self.shared.lock();
        }
        let mut woken = Shared::all_with(&mut state, CLOSED);
        woken.extend(state.relay.drain(..));
        // Let go of the segment's descriptor now, not when this is dropped: a closed
        // store may wait for the collector (its objects hold one another), and a
        // segment deleted meanwhile keeps its blocks and cached pages until the last
        // descriptor goes. The checkpoint's too.
        state.segment = None;
        state.watermark = None;
        drop(state);
        unpark(woken);
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The flusher thread: steps 2 to 4 of the module's docs, until stopped.
fn run(shared: &Shared) {
    let mut state = shared.lock();
    'plan: loop {
        let idle = Instant::now();
        let rounds = state.rounds;
        let ended = state.ended;
        let window = state
            .gather
            .unwrap_or_else(|| state.last_sync.mul_f64(GATHER_SHARE).min(GATHER_MAX));
        // A group the last round woke (more than one waiter) is expected back whole by
        // then (its first registration as late as last round's, then the gather's
        // window): till then the flusher sleeps, and the registration that makes the
        // group whole runs the round itself (a leader); only a group not back by then,
        // or a first waiter after an idle spell, wakes it at its first registration.
        let mut whole_by = (state.want > 1).then(|| ended + expect_whole(&state, window));
        loop {
            if state.stopping {
                return;
            }
            if state.round || state.rounds != rounds {
                // A leader's round is in flight or ran since: plan from its end. Its
                // end wakes the flusher only if it left waiters; otherwise the flusher
                // looks again after about an fdatasync's time.
                if state.round {
                    let nap = state.last_sync.clamp(NAP_MIN, GATHER_MAX);
                    state = shared
                        .work
                        .wait_timeout(state, nap)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                continue 'plan;
            }
            let blocked = state.failed.is_some() || state.held;
            if blocked {
                whole_by = None;
            }
            let now = Instant::now();
            match whole_by {
                Some(_) if state.waiters.len() >= state.want => break,
                Some(by) if now >= by => {
                    // Not back whole in time: the first registered (gather from it,
                    // below), or wait for one as when no group is expected.
                    whole_by = None;
                    continue;
                }
                Some(_) => {}
                None if !blocked && !state.waiters.is_empty() => break,
                None => {}
            }
            // A relay stands and no one waits for an fdatasync: it has `RELAY_IDLE` to
            // be passed on, then what is left of it is unparked.
            let relay_by =
                (!state.relay.is_empty() && state.waiters.is_empty()).then(|| idle + RELAY_IDLE);
            if relay_by.is_some_and(|by| now >= by) {
                let left: Vec<_> = state.relay.drain(..).collect();
                drop(state);
                unpark(left);
                state = shared.lock();
                continue;
            }
            // The group's last registration leads; a lone waiter (a group of one) leads
            // at once. Expecting a larger group, the flusher sleeps until its timer;
            // otherwise the first registration wakes it, to gather from it.
            state.lead_at = if blocked { 0 } else { state.want };
            state.wake_at = if whole_by.is_some() || state.lead_at == 1 {
                0
            } else {
                1
            };
            state = match whole_by.into_iter().chain(relay_by).min() {
                None => shared.work.wait(state).unwrap_or_else(|p| p.into_inner()),
                Some(by) => {
                    shared
                        .work
                        .wait_timeout(state, by - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
        if state.waiters.len() < state.want {
            // Gather the rest of the group, for the window from the first's registration
            // (from the last round's end for one that registered during its fdatasync);
            // the registration that makes it whole leads.
            let deadline = state.first_at.map_or(idle, |at| at.max(ended)) + window;
            while !state.stopping && state.failed.is_none() && state.waiters.len() < state.want {
                if state.round || state.rounds != rounds {
                    continue 'plan;
                }
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                state.lead_at = if state.held { 0 } else { state.want };
                state.wake_at = 0;
                state = shared
                    .work
                    .wait_timeout(state, deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            if state.stopping || state.failed.is_some() || state.held {
                state.wake_at = 0;
                state.lead_at = 0;
                continue;
            }
        }
        if state.round || state.rounds != rounds {
            continue 'plan;
        }
        state.wake_at = 0;
        state.lead_at = 0;
        if state.waiters.len() < state.want {
            // The group was not back in time: wait longer for it next time.
            state.whole_in = (state.whole_in * 2).clamp(WHOLE_IN_MIN, GATHER_MAX);
        }
        account(shared, &mut state, idle, Instant::now());
        let Some(segment) = state.segment.clone() else {
            // No segment registered: nothing this flusher can make durable; the
            // waiters are woken by `advance` or time out, or it syncs once one is.
            state.wake_at = 1;
            state = shared.work.wait(state).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        state.round = true;
        state = round(shared, state, segment, None);
    }
}

/// How long after a round's end its group is expected back whole: the last round's
/// idle plus the gather's `window`, or twice the time the last group a leader ran took
/// to come back (the chain of its re-appends), whichever is longer; at most twice
/// `GATHER_MAX` (a window set by `gather_within` is kept whole).
fn expect_whole(state: &State, window: Duration) -> Duration {
    let expected = (state.last_idle.min(GATHER_MAX) + window).max(state.whole_in * 2);
    if state.gather.is_some() {
        expected
    } else {
        expected.min(GATHER_MAX * 2)
    }
}

/// Where the wall from `since` (the last round's end, or the flusher's plan) until the
/// round starting `now` went: idle until the first registration, gathering after it;
/// and the round's idle, for the next gather.
fn account(shared: &Shared, state: &mut State, since: Instant, now: Instant) {
    let first = state.first_at.map_or(now, |at| at.clamp(since, now));
    let ns = |took: Duration| took.as_nanos() as u64;
    shared
        .idle_ns
        .fetch_add(ns(first - since), Ordering::Relaxed);
    shared
        .gathering_ns
        .fetch_add(ns(now - first), Ordering::Relaxed);
    state.last_idle = state.first_at.map_or(Duration::ZERO, |at| {
        at.saturating_duration_since(state.ended)
    });
}

/// One round, its `round` flag set by the caller under the lock (the flusher, or the
/// leader `leader`): fdatasync `segment` up to the highest end registered, raise the
/// watermark, mark the waiters it covered and wake them (step 3). A leader is not
/// woken (it runs): the others it covered become the relay, which its own next wait
/// passes on. Returns with the state locked again and the flag cleared.
fn round<'a>(
    shared: &'a Shared,
    mut state: MutexGuard<'a, State>,
    segment: Segment,
    leader: Option<&Arc<Slot>>,
) -> MutexGuard<'a, State> {
    shared.in_round.store(segment.base, Ordering::Release);
    let highest = state.waiters.iter().map(|w| w.end).max().unwrap_or(0);
    let target = highest.min(segment.end);
    let fail_with = state.fail_with;
    let watermark = state.watermark.clone();
    drop(state);
    let started = Instant::now();
    let synced = match fail_with {
        Some(errno) => Err(io::Error::from_raw_os_error(errno)),
        None => (shared.sync)(&segment.file),
    };
    let fdatasynced = started.elapsed();
    let synced = synced.and_then(|()| match &watermark {
        Some(watermark) => watermark.raise(target),
        None => Ok(()),
    });
    let took = started.elapsed();
    let add = |counter: &AtomicU64, ns: Duration| {
        counter.fetch_add(ns.as_nanos() as u64, Ordering::Relaxed);
    };
    add(&shared.fdatasync_ns, fdatasynced);
    add(&shared.watermark_ns, took - fdatasynced);
    shared.syncs.fetch_add(1, Ordering::Relaxed);
    shared
        .syncing_ns
        .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    state = shared.lock();
    state.last_sync = took;
    let synced_ok = synced.is_ok();
    let woken = match synced {
        Ok(()) => {
            shared.raise(target);
            let mut woken = shared.covered(&mut state, shared.flushed.load(Ordering::Acquire));
            // The group is the waiters it covered (they come back) and those that
            // came back during its fdatasync, too late for it: gathering for the
            // covered alone would leave one of them behind round after round.
            state.want = (woken.len() + state.waiters.len()).max(1);
            match leader {
                Some(leader) => {
                    // What is left of the last round's relay was not passed on during
                    // a whole fdatasync: unparked now; the covered others are the relay.
                    woken.retain(|slot| !Arc::ptr_eq(slot, leader));
                    let left: Vec<_> = state.relay.drain(..).collect();
                    state.relay.extend(woken);
                    left
                }
                // The same, with the first covered unparked now (the flusher runs no
                // Python: someone must start the relay).
                None => Shared::relay(&mut state, woken),
            }
        }
        Err(error) => {
            state
                .failed
                .get_or_insert(error.raw_os_error().unwrap_or(libc::EIO));
            let mut woken = Shared::all_with(&mut state, FAILED);
            woken.extend(state.relay.drain(..));
            woken
        }
    };
    state.round = false;
    state.rounds += 1;
    state.ended = Instant::now();
    if leader.is_some() {
        // The next group's last registration leads again; waiters this round left
        // (registered during its fdatasync) are the flusher's to gather for.
        state.lead_at = state.want;
        if !state.waiters.is_empty() || state.stopping {
            shared.work.notify_one();
        }
    }
    drop(state);
    let woke = !woken.is_empty();
    unpark(woken);
    if leader.is_none() && synced_ok && woke && target > segment.base {
        if let Some((at, length)) = segment.map {
            // SAFETY: `use_segment_mapped`'s contract: the mapping stays for the
            // round in flight; `target - base` is inside the segment.
            if unsafe { writable_again(at, length, target - segment.base) } {
                shared.populated.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    shared.in_round.store(u64::MAX, Ordering::Release);
    add(&shared.waking_ns, started.elapsed() - took);
    shared.lock()
}

/// Make the page at `offset` of the shared mapping `[at, at + length)` writable again
/// (`MADV_POPULATE_WRITE`: the fault taken here, no byte changed, no signal: an error
/// is returned instead); whether it was done. The page the next record goes into,
/// which the fdatasync just write-protected.
///
/// # Safety
///
/// `[at, at + length)` must be a live shared file mapping, reserved on disk.
unsafe fn writable_again(at: usize, length: usize, offset: u64) -> bool {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let page = *PAGE.get_or_init(|| {
        // SAFETY: sysconf only reads a system constant.
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
    });
    let Ok(offset) = usize::try_from(offset) else {
        return false;
    };
    if offset >= length {
        return false;
    }
    let from = (at + offset) & !(page - 1);
    // SAFETY: `from` is a page of the live mapping (the caller's contract; `offset` is
    // inside it); the advice only faults the page in for writing.
    unsafe { libc::madvise(from as *mut libc::c_void, page, libc::MADV_POPULATE_WRITE) == 0 }
}

/// `fdatasync` of `file`, tried again when interrupted.
pub fn fdatasync(file: &File) -> io::Result<()> {
    loop {
        // SAFETY: the descriptor belongs to `file`, open for as long as it is borrowed.
        if unsafe { libc::fdatasync(file.as_raw_fd()) } == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment_file(dir: &std::path::Path) -> File {
        let path = dir.join("segment");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .unwrap();
        file.set_len(1 << 16).unwrap();
        file
    }

    /// A thread waiting on `group` until `end` is durable.
    fn wait_on(group: &Arc<GroupCommit>, end: u64) -> thread::JoinHandle<Waited> {
        let group = group.clone();
        thread::spawn(move || group.wait(end, Duration::from_secs(600)))
    }

    /// An fdatasync whose first `gated` calls each say on `in_sync` that they began,
    /// then wait for a `release` before syncing.
    fn gated_syncs(
        gated: u64,
    ) -> (
        SyncFn,
        std::sync::mpsc::Receiver<()>,
        std::sync::mpsc::Sender<()>,
    ) {
        let (entered, in_sync) = std::sync::mpsc::channel::<()>();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = Mutex::new(released);
        let calls = AtomicU64::new(0);
        let sync: SyncFn = Box::new(move |file| {
            if calls.fetch_add(1, Ordering::SeqCst) < gated {
                entered.send(()).unwrap();
                released.lock().unwrap().recv().unwrap();
            }
            fdatasync(file)
        });
        (sync, in_sync, release)
    }

    /// A group syncing with `sync` (no watermark, nothing flushed yet) over a new
    /// segment in `dir`.
    fn group_over(dir: &std::path::Path, sync: SyncFn) -> Arc<GroupCommit> {
        let group = Arc::new(GroupCommit::start_with(0, None, sync).unwrap());
        group.use_segment(0, 1 << 16, segment_file(dir));
        group
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("group-commit-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn waiters_on_many_threads_return_once_covered() {
        let dir = scratch("covered");
        let group = group_over(&dir, Box::new(fdatasync));
        let ends = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let group = group.clone();
                let ends = ends.clone();
                thread::spawn(move || {
                    for _ in 0..50 {
                        let end = ends.fetch_add(100, Ordering::SeqCst) + 100;
                        assert_eq!(group.wait(end, Duration::from_secs(10)), Waited::Durable);
                        assert!(group.flushed() >= end);
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        assert!(group.syncs() >= 1 && group.syncs() <= 400);
        group.stop();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_failed_sync_fails_every_waiter_and_later_ones() {
        let dir = scratch("failed");
        let group = group_over(&dir, Box::new(fdatasync));
        group.fail_syncs(Some(libc::EIO));
        let workers: Vec<_> = (1..=4u64)
            .map(|i| {
                let group = group.clone();
                thread::spawn(move || group.wait(i * 10, Duration::from_secs(10)))
            })
            .collect();
        for worker in workers {
            assert_eq!(worker.join().unwrap(), Waited::Failed);
        }
        assert_eq!(group.failure(), Some(libc::EIO));
        assert_eq!(group.wait(1000, Duration::from_secs(1)), Waited::Failed);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn stop_wakes_the_waiters_it_did_not_cover() {
        let group = Arc::new(GroupCommit::start(0, None).unwrap());
        // No segment: the flusher cannot cover anything; stop must still wake them.
        let waiter = {
            let group = group.clone();
            thread::spawn(move || group.wait(10, Duration::from_secs(30)))
        };
        while group.shared.lock().waiters.is_empty() {
            thread::sleep(Duration::from_millis(1));
        }
        group.stop();
        assert_eq!(waiter.join().unwrap(), Waited::Closed);
        assert_eq!(group.wait(10, Duration::from_secs(1)), Waited::Closed);
    }

    fn slot() -> Arc<Slot> {
        Arc::new(Slot {
            state: AtomicU8::new(DURABLE),
            thread: thread::current(),
            waker: std::sync::OnceLock::new(),
            probe_cpu: std::sync::atomic::AtomicI32::new(-1),
        })
    }

    #[test]
    fn a_round_unparks_its_first_waiter_and_what_was_left_of_the_last_relay() {
        let group = GroupCommit::start(0, None).unwrap();
        let (left, a, b, c) = (slot(), slot(), slot(), slot());
        let mut state = group.shared.lock();
        state.relay.push_back(left.clone());
        let now = Shared::relay(&mut state, vec![a.clone(), b.clone(), c.clone()]);
        assert_eq!(now.len(), 2);
        assert!(Arc::ptr_eq(&now[0], &left) && Arc::ptr_eq(&now[1], &a));
        assert_eq!(state.relay.len(), 2);
        assert!(Arc::ptr_eq(&state.relay[0], &b) && Arc::ptr_eq(&state.relay[1], &c));
        drop(state);
        // Each pass (a waiter letting go of the GIL) unparks the next one, in order.
        group.pass_on();
        let state = group.shared.lock();
        assert_eq!(state.relay.len(), 1);
        assert!(Arc::ptr_eq(&state.relay[0], &c));
        drop(state);
        group.stop();
        assert!(group.shared.lock().relay.is_empty());
    }

    /// The relay of the mailbox tests, syncs held: A (this thread, its mailbox open)
    /// woke B; B (a thread of its own, A its waker) waits and passes the relay on to C
    /// (parked, durable; `c_woke` says when it was unparked).
    struct RelayOfThree {
        dir: std::path::PathBuf,
        group: Arc<GroupCommit>,
        a: Arc<Mailbox>,
        c: Arc<Slot>,
        c_woke: std::sync::mpsc::Receiver<()>,
        c_thread: thread::JoinHandle<()>,
        b: thread::JoinHandle<Waited>,
    }

    impl RelayOfThree {
        /// `other_idle`: the last probe's wakee got another CPU than its waker's.
        fn new(name: &str, other_idle: bool) -> Self {
            let dir = scratch(name);
            let group = group_over(&dir, Box::new(fdatasync));
            group.hold_syncs(true);
            group.shared.other_idle.store(other_idle, Ordering::Relaxed);
            let a = MAILBOX.with(Arc::clone);
            a.open();
            let (c_thread, c_woke) = {
                let (tx, rx) = std::sync::mpsc::channel::<()>();
                let handle = thread::spawn(move || {
                    thread::park();
                    let _ = tx.send(());
                });
                (handle, rx)
            };
            let c = Arc::new(Slot {
                state: AtomicU8::new(DURABLE),
                thread: c_thread.thread().clone(),
                waker: std::sync::OnceLock::new(),
                probe_cpu: std::sync::atomic::AtomicI32::new(-1),
            });
            group.shared.lock().relay.push_back(c.clone());
            let b = {
                let group = group.clone();
                let a = a.clone();
                thread::spawn(move || {
                    LAST_WAKER.with(|w| *w.borrow_mut() = Some(a));
                    group.wait(10, Duration::from_secs(600))
                })
            };
            RelayOfThree {
                dir,
                group,
                a,
                c,
                c_woke,
                c_thread,
                b,
            }
        }

        /// Syncs let go: B returns durable, C's thread ends, the group stops.
        fn finish(self) {
            self.group.hold_syncs(false);
            assert_eq!(self.b.join().unwrap(), Waited::Durable);
            self.c_thread.join().unwrap();
            self.group.stop();
            std::fs::remove_dir_all(self.dir).unwrap();
        }
    }

    #[test]
    fn a_waiter_hands_the_next_wake_to_the_one_that_woke_it_while_that_one_has_not_parked() {
        // A (this thread) woke B and has not parked yet (its mailbox open); B's wait
        // passes the relay on to C: C's wake goes into A's mailbox, and A wakes C when
        // it parks or returns (drain_and_close), as C's waker.
        let relay = RelayOfThree::new("handed", true);
        let (a, c) = (&relay.a, &relay.c);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !a
            .lock()
            .1
            .as_ref()
            .is_some_and(|handed| Arc::ptr_eq(handed, c))
        {
            assert!(
                Instant::now() < deadline,
                "C's wake never reached A's mailbox"
            );
            thread::sleep(Duration::from_millis(1));
        }
        drain_and_close(a);
        relay.c_woke.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(c.waker.get().is_some_and(|waker| Arc::ptr_eq(waker, a)));
        assert!(!a.deposit(c), "a closed mailbox takes no wake");
        relay.finish();
    }

    #[test]
    fn a_waiter_wakes_the_next_itself_while_such_wakes_stay_on_their_cpu() {
        // As above, but the last probe's wakee stayed on its waker's CPU (the other CPU
        // is busy): B's wait wakes C itself, as a probe, and A's mailbox stays empty.
        let relay = RelayOfThree::new("probe", false);
        let (a, c) = (&relay.a, &relay.c);
        relay.c_woke.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(a.lock().1.is_none());
        assert!(c.probe_cpu.load(Ordering::Relaxed) >= 0);
        drain_and_close(a);
        relay.finish();
    }

    #[test]
    fn waiters_no_one_passes_the_relay_to_are_unparked_by_the_flusher() {
        // Eight waiters covered by one fdatasync, none of which waits again: the
        // relay is never passed on, and the flusher unparks it.
        let dir = scratch("relay");
        let group = group_over(&dir, Box::new(fdatasync));
        group.hold_syncs(true);
        let (done, returned) = std::sync::mpsc::channel();
        for i in 1..=8u64 {
            let group = group.clone();
            let done = done.clone();
            thread::spawn(move || {
                let waited = group.wait(i * 10, Duration::from_secs(600));
                done.send(waited).unwrap();
            });
        }
        while group.shared.lock().waiters.len() < 8 {
            thread::sleep(Duration::from_millis(1));
        }
        group.hold_syncs(false);
        for _ in 0..8 {
            // Not a timing: a waiter left parked would wait its 600 s.
            let waited = returned.recv_timeout(Duration::from_secs(60));
            assert_eq!(waited, Ok(Waited::Durable), "a waiter was never unparked");
        }
        // Whichever came first, the flusher's unpark or a waiter's own look at its slot
        // (`SELF_CHECK`), the flusher lets go of the relay.
        until(|| group.shared.lock().relay.is_empty());
        group.stop();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_group_is_gathered_whole_when_one_of_it_came_back_during_the_fdatasync() {
        // Seven waiters are covered by a round; an eighth registered during its
        // fdatasync, too late for it. The next round waits for all eight (the seven
        // covered come back), not for seven again (which would leave one behind
        // each round: 7 messages a fdatasync from 8 threads).
        let dir = scratch("whole");
        // The first two fdatasyncs tell the test they began and wait for it.
        let (sync, in_sync, release) = gated_syncs(2);
        let group = group_over(&dir, sync);
        group.hold_syncs(true);
        let waiter = |end: u64| wait_on(&group, end);
        let seven: Vec<_> = (1..=7u64).map(|i| waiter(i * 10)).collect();
        while group.shared.lock().waiters.len() < 7 {
            thread::sleep(Duration::from_millis(1));
        }
        group.hold_syncs(false);
        in_sync.recv_timeout(Duration::from_secs(60)).unwrap();
        let eighth = waiter(80);
        while group.shared.lock().waiters.len() < 8 {
            thread::sleep(Duration::from_millis(1));
        }
        release.send(()).unwrap();
        // The next round began (the seven never came back: the gather ran out); what
        // it gathered for is the last round's.
        in_sync.recv_timeout(Duration::from_secs(60)).unwrap();
        let want = group.shared.lock().want;
        release.send(()).unwrap();
        for seven in seven {
            assert_eq!(seven.join().unwrap(), Waited::Durable);
        }
        assert_eq!(eighth.join().unwrap(), Waited::Durable);
        assert_eq!(want, 8);
        group.stop();
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A group commit whose fdatasyncs record the thread that ran each.
    fn recording(dir: &std::path::Path) -> (Arc<GroupCommit>, Arc<Mutex<Vec<thread::ThreadId>>>) {
        let ran = Arc::new(Mutex::new(Vec::new()));
        let record = ran.clone();
        let sync: SyncFn = Box::new(move |file| {
            record.lock().unwrap().push(thread::current().id());
            fdatasync(file)
        });
        (group_over(dir, sync), ran)
    }

    fn until(what: impl Fn() -> bool) {
        while !what() {
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_last_of_a_group_to_come_back_runs_its_round_and_wakes_no_one() {
        // Eight waiters covered by one fdatasync come back (each registers again): the
        // registration that makes the group whole runs the round on its own thread;
        // the flusher is not woken, and the leader is not woken either (it runs).
        let dir = scratch("leader");
        let (group, ran) = recording(&dir);
        // A window no group misses (not a timing: the flusher's timer never fires).
        group.gather_within(Some(Duration::from_secs(600)));
        group.hold_syncs(true);
        let waiter = |end: u64| wait_on(&group, end);
        let first: Vec<_> = (1..=8u64).map(|i| waiter(i * 10)).collect();
        until(|| group.shared.lock().waiters.len() == 8);
        group.hold_syncs(false);
        for first in first {
            assert_eq!(first.join().unwrap(), Waited::Durable);
        }
        // The flusher ran that round and now expects the eight back, led by the last.
        until(|| group.shared.lock().lead_at == 8);
        let (syncs, notified, led) = (group.syncs(), group.notified(), group.led());
        // Each returned waiter passes the relay on, as its next wait would (the leader
        // wakes none of the others: they are the relay).
        let relayed = |end: u64| {
            let group = group.clone();
            thread::spawn(move || {
                let waited = group.wait(end, Duration::from_secs(600));
                group.pass_on();
                waited
            })
        };
        let seven: Vec<_> = (10..=16u64).map(|i| relayed(i * 10)).collect();
        until(|| group.shared.lock().waiters.len() == 7);
        assert_eq!(
            group.syncs(),
            syncs,
            "a round started before the group was whole"
        );
        let last = relayed(170);
        let leader = last.thread().id();
        assert_eq!(last.join().unwrap(), Waited::Durable);
        for seven in seven {
            assert_eq!(seven.join().unwrap(), Waited::Durable);
        }
        assert_eq!(
            group.syncs(),
            syncs + 1,
            "the eight were not synced as one group"
        );
        assert_eq!(group.led() - led, 1);
        assert_eq!(
            group.notified() - notified,
            0,
            "a registration woke the flusher"
        );
        assert_eq!(ran.lock().unwrap().last(), Some(&leader));
        group.stop();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_relay_a_leader_left_that_no_one_passes_on_returns_by_itself() {
        // A leader's round covers eight; none of them waits again (no relay passed
        // on), and the flusher, expecting the group back, sleeps: each covered waiter
        // still returns, by its own look at its slot.
        let dir = scratch("leader-relay");
        let group = group_over(&dir, Box::new(fdatasync));
        group.gather_within(Some(Duration::from_secs(600)));
        group.hold_syncs(true);
        let waiter = |end: u64| wait_on(&group, end);
        let first: Vec<_> = (1..=8u64).map(|i| waiter(i * 10)).collect();
        until(|| group.shared.lock().waiters.len() == 8);
        group.hold_syncs(false);
        for first in first {
            assert_eq!(first.join().unwrap(), Waited::Durable);
        }
        until(|| group.shared.lock().lead_at == 8);
        let again: Vec<_> = (10..=17u64).map(|i| waiter(i * 10)).collect();
        for again in again {
            // Not a timing: a waiter nothing wakes would wait its 600 s.
            assert_eq!(again.join().unwrap(), Waited::Durable);
        }
        assert_eq!(group.led(), 1);
        group.stop();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_group_not_back_in_time_is_waited_for_twice_as_long_next_time() {
        // Two waiters covered by one round; one comes back, the other never does: the
        // flusher's wait for the group runs out, it syncs the one, and from then on
        // expects a group back within twice as long as before.
        let dir = scratch("whole-in");
        let group = group_over(&dir, Box::new(fdatasync));
        group.hold_syncs(true);
        let waiter = |end: u64| wait_on(&group, end);
        let two: Vec<_> = (1..=2u64).map(|i| waiter(i * 10)).collect();
        until(|| group.shared.lock().waiters.len() == 2);
        group.hold_syncs(false);
        for two in two {
            assert_eq!(two.join().unwrap(), Waited::Durable);
        }
        until(|| group.shared.lock().lead_at == 2);
        group.shared.lock().whole_in = Duration::from_millis(1);
        assert_eq!(group.wait(30, Duration::from_secs(600)), Waited::Durable);
        assert_eq!(group.shared.lock().whole_in, Duration::from_millis(2));
        assert_eq!(group.led(), 0);
        group.stop();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_lone_waiter_runs_its_own_round() {
        // One thread appending: its wait fdatasyncs on its own thread, no wake-up of
        // the flusher and none back.
        let dir = scratch("lone");
        let (group, ran) = recording(&dir);
        until(|| group.shared.lock().lead_at == 1);
        assert_eq!(group.wait(10, Duration::from_secs(600)), Waited::Durable);
        assert!(group.flushed() >= 10);
        assert_eq!(group.led(), 1);
        assert_eq!(group.notified(), 0);
        assert_eq!(*ran.lock().unwrap(), vec![thread::current().id()]);
        group.stop();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_waiter_registered_during_a_leaders_round_is_synced_after_it() {
        // A leader's fdatasync is in flight when another waiter registers (too late for
        // it, and no leader while a round runs): the flusher syncs it afterwards.
        let dir = scratch("after-leader");
        let (sync, in_sync, release) = gated_syncs(1);
        let group = group_over(&dir, sync);
        until(|| group.shared.lock().lead_at == 1);
        let waiter = |end: u64| wait_on(&group, end);
        let first = waiter(10);
        in_sync.recv_timeout(Duration::from_secs(60)).unwrap();
        let second = waiter(20);
        until(|| group.shared.lock().waiters.len() == 2);
        release.send(()).unwrap();
        assert_eq!(first.join().unwrap(), Waited::Durable);
        assert_eq!(second.join().unwrap(), Waited::Durable);
        assert!(group.flushed() >= 20);
        assert_eq!(group.syncs(), 2);
        group.stop();
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn checkpoint_slots(path: &std::path::Path) -> Vec<Slotted> {
        let raw = std::fs::read(path).unwrap();
        raw.chunks_exact(SLOT_SIZE).filter_map(parse_slot).collect()
    }

    fn newest(path: &std::path::Path) -> (u64, u64, u64) {
        let slot = checkpoint_slots(path)
            .into_iter()
            .max_by_key(|slot| slot.sequence)
            .unwrap();
        (slot.sequence, slot.flushed, slot.dispatched)
    }

    #[test]
    fn the_watermark_is_raised_in_a_new_checkpoint_and_never_lowered() {
        // A new checkpoint is empty (shorter than its two slots): the first raises
        // write it, the later ones find what they wrote.
        let dir = scratch("watermark-new");
        let path = dir.join("checkpoint");
        std::fs::write(&path, b"").unwrap();
        let watermark = Watermark::open(&path).unwrap();
        watermark.raise(100).unwrap();
        assert_eq!(newest(&path), (1, 100, 0));
        watermark.raise(200).unwrap();
        assert_eq!(newest(&path), (2, 200, 0));
        watermark.raise(150).unwrap();
        assert_eq!(newest(&path), (2, 200, 0));
        watermark.raise(300).unwrap();
        assert_eq!(newest(&path), (3, 300, 0));
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            2 * SLOT_SIZE as u64
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_raise_keeps_what_another_writer_saved_in_the_checkpoint_meanwhile() {
        // checkpoint.py (or another process) writes a slot with its own file calls
        // between two raises: the next raise starts from it (its dispatched kept).
        let dir = scratch("watermark-other");
        let path = dir.join("checkpoint");
        std::fs::write(&path, b"").unwrap();
        let watermark = Watermark::open(&path).unwrap();
        watermark.raise(100).unwrap();
        watermark.raise(200).unwrap();
        let mut raw = [0u8; SLOT_SIZE];
        raw[..4].copy_from_slice(MAGIC);
        raw[4..6].copy_from_slice(&VERSION.to_le_bytes());
        raw[8..16].copy_from_slice(&3u64.to_le_bytes());
        raw[16..24].copy_from_slice(&500u64.to_le_bytes());
        raw[24..32].copy_from_slice(&77u64.to_le_bytes());
        let crc = crc32c(&raw[..SLOT_FIELDS]);
        raw[SLOT_FIELDS..SLOT_FIELDS + 4].copy_from_slice(&crc.to_le_bytes());
        let other = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        other.write_all_at(&raw, SLOT_SIZE as u64).unwrap();
        watermark.raise(400).unwrap();
        assert_eq!(newest(&path), (3, 500, 77), "a raise below it changed it");
        watermark.raise(600).unwrap();
        assert_eq!(newest(&path), (4, 600, 77));
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// This thread's minor page faults so far.
    fn minor_faults() -> i64 {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes a rusage into the properly sized buffer.
        assert_eq!(
            unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) },
            0
        );
        // SAFETY: initialised by the successful call above.
        unsafe { usage.assume_init() }.ru_minflt
    }

    #[test]
    fn the_next_append_into_the_tail_page_takes_no_fault_after_a_round() {
        // An fdatasync write-protects the tail page it cleaned; the first store into it
        // afterwards faults, on the appender that the round woke first (the chain). The
        // flusher makes the page writable again after waking it (a leader's round does
        // not: the leader's own next append would wait for the advice as for the fault).
        let dir = scratch("tail-page");
        let file = segment_file(&dir);
        let length = 1 << 16;
        // SAFETY: a new shared mapping of the test's own file, `length` bytes long.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                length,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED);
        let map = at as *mut u8;
        let group = GroupCommit::start(0, None).unwrap();
        // SAFETY: the mapping above lives until the munmap after `stop`.
        unsafe { group.use_segment_mapped(0, length as u64, file, Some((at as usize, length))) };
        for offset in 0..100 {
            // SAFETY: inside the mapping.
            unsafe { map.add(offset).write_volatile(1) };
        }
        let populated = group.populated();
        // The flusher's round: held until the waiter is registered (a lone waiter would
        // otherwise lead its own).
        group.hold_syncs(true);
        thread::scope(|scope| {
            let waiter = scope.spawn(|| group.wait(100, Duration::from_secs(600)));
            until(|| group.shared.lock().waiters.len() == 1);
            group.hold_syncs(false);
            assert_eq!(waiter.join().unwrap(), Waited::Durable);
        });
        assert_eq!(group.led(), 0);
        // The flusher does it after waking this thread (not a timing: the bound is for
        // a flusher that never does it, which the assertion below then shows).
        let deadline = Instant::now() + Duration::from_secs(60);
        while group.populated() == populated && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        let before = minor_faults();
        // SAFETY: inside the mapping: the next record's first byte.
        unsafe { map.add(100).write_volatile(2) };
        let faults = minor_faults() - before;
        group.stop();
        // SAFETY: the mapping made above, no longer used by the flusher (stopped).
        unsafe { libc::munmap(at, length) };
        assert_eq!(faults, 0, "the store into the tail page faulted");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_wait_times_out_and_leaves_the_list() {
        let group = GroupCommit::start(0, None).unwrap();
        assert_eq!(group.wait(10, Duration::from_millis(20)), Waited::TimedOut);
        assert!(group.shared.lock().waiters.is_empty());
        group.advance(10);
        assert_eq!(group.wait(10, Duration::from_millis(20)), Waited::Durable);
    }
}
