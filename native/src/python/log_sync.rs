//! `_native.LogSyncer`: sync mode's group commit (crate::group_commit) for one open
//! store (issue 31, part 9). The store makes it in sync mode (store.py) and hands it to
//! the flush service, which tells it of every other flush (`advance`) and failure
//! (`fail`); the append core (append_core.rs) waits on it without the GIL for each
//! sync append it wrote (`wait_written`). Its rounds' fdatasyncs (the flusher's, or a
//! leading appender's in its wait: crate::group_commit, step 2) go through the fault
//! seam at `log.sync` (io_seam.rs): under a fault plan the thread running the round
//! takes the GIL to show each one to the plan's hook, which may fail it with an errno
//! (the group commit then fails every waiter) or end the process before or after it.

use std::fs::File;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyOSError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::io_seam::{self, Site, What};
use crate::group_commit::{self, GroupCommit, Waited, Watermark};

#[pyclass(module = "storeadapter.engine._native", frozen)]
pub struct LogSyncer {
    group: GroupCommit,
    timeout: Duration,
    /// Exports of the mappings of the segments handed to the flusher, by base, which
    /// it makes the tail page of writable again after each round
    /// (`GroupCommit::use_segment_mapped`): exported, an mmap cannot be closed, and the
    /// store closes its segments only after this (`close`). Kept: the newest, and an
    /// older one while the flusher's round in flight is on it.
    maps: std::sync::Mutex<Vec<(u64, PyBuffer<u8>)>>,
}

/// How a native sync append's wait ended, for the append core.
pub(crate) enum Written {
    /// Durable: return the results as they are.
    Durable,
    /// No fdatasync covered it in time (or the store closed first): FLUSH_TIMEOUT.
    TimedOut,
}

#[pymethods]
impl LogSyncer {
    /// Start the flusher thread: the log is durable below `flushed`; after each
    /// fdatasync the checkpoint at `checkpoint` (None: none) gets the durable
    /// watermark; a wait gives up after `timeout_ms` (`flush_timeout_ms`).
    #[new]
    #[pyo3(signature = (flushed, checkpoint, timeout_ms))]
    fn new(flushed: u64, checkpoint: Option<PathBuf>, timeout_ms: u64) -> PyResult<LogSyncer> {
        let watermark = checkpoint
            .map(|path| Watermark::open(&path))
            .transpose()
            .map_err(os_error)?;
        Ok(LogSyncer {
            group: GroupCommit::start_with(flushed, watermark, Box::new(sync_at_site))
                .map_err(os_error)?,
            timeout: Duration::from_millis(timeout_ms),
            maps: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The log is durable below this offset, as far as this group commit knows.
    #[getter]
    fn flushed(&self) -> u64 {
        self.group.flushed()
    }

    /// How many fdatasyncs of the log its flusher issued.
    #[getter]
    fn syncs(&self) -> u64 {
        self.group.syncs()
    }

    /// (seconds in fdatasyncs, seconds gathering) of its flusher so far.
    #[getter]
    fn times(&self) -> (f64, f64) {
        let (syncing, gathering) = self.group.times_ns();
        (syncing as f64 / 1e9, gathering as f64 / 1e9)
    }

    /// Where its flusher's wall went, in seconds summed over its rounds: (fdatasync,
    /// the watermark's raise, waking the covered waiters, idle with no waiter
    /// registered, gathering the rest of a group).
    #[getter]
    fn round_times(&self) -> (f64, f64, f64, f64, f64) {
        let times = self.group.round_times();
        let seconds = |ns: u64| ns as f64 / 1e9;
        (
            seconds(times.fdatasync),
            seconds(times.watermark),
            seconds(times.waking),
            seconds(times.idle),
            seconds(times.gathering),
        )
    }

    /// Another flush made the log durable below `flushed`: wake the waiters it covers.
    fn advance(&self, flushed: u64) {
        self.group.advance(flushed);
    }

    /// The store failed (`errno`): every waiter, now and later, is told so.
    fn fail(&self, errno: i32) {
        self.group.fail(errno);
    }

    /// Tests: every fdatasync of the flusher from now on fails with `errno` (None:
    /// they succeed again).
    #[pyo3(signature = (errno))]
    fn fail_syncs(&self, errno: Option<i32>) {
        self.group.fail_syncs(errno);
    }

    /// Tests: start no fdatasync while `held` (waiters wait for another flush's
    /// `advance`, or time out).
    fn hold_syncs(&self, held: bool) {
        self.group.hold_syncs(held);
    }

    /// Stop the flusher (after the fdatasync in flight); waiters it did not cover
    /// return FLUSH_TIMEOUT. Safe to call twice.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.group.stop());
        self.release_maps();
    }
}

impl LogSyncer {
    /// Let go of the segments' mappings (the flusher stopped; with the GIL held).
    fn release_maps(&self) {
        let mut maps = self.maps.lock().unwrap_or_else(|p| p.into_inner());
        maps.clear();
    }

    /// Wait, without the GIL, until the log is durable up to `end`, which this thread's
    /// append just wrote into the log's active segment (it still holds the GIL since).
    /// The segment is handed to the flusher first when it is a new one and everything
    /// below it is durable; otherwise (a roll, segments of other processes yet to sync,
    /// rare) `store._sync_through()` fsyncs the log in Python. A failed fdatasync fails
    /// the store and raises its typed error (`FlushService.refusal`).
    pub(crate) fn wait_written(
        &self,
        py: Python<'_>,
        store: &Bound<'_, PyAny>,
        end: u64,
    ) -> PyResult<Written> {
        if self.group.flushed() >= end {
            return Ok(Written::Durable);
        }
        let timeout = self.timeout;
        // The usual case: the flusher's segment holds `end` (no look at the store).
        let waited = match py.detach(|| self.group.wait_in_segment(end, timeout)) {
            Some(waited) => waited,
            None => {
                if !self.segment_ready(py, store, end)? {
                    store.call_method0(intern!(py, "_sync_through"))?;
                    return Ok(Written::Durable);
                }
                py.detach(|| self.group.wait(end, timeout))
            }
        };
        match waited {
            Waited::Durable => Ok(Written::Durable),
            Waited::TimedOut | Waited::Closed => Ok(Written::TimedOut),
            Waited::Failed => {
                let errno = self.group.failure().unwrap_or(libc::EIO);
                let error = PyOSError::new_err((
                    errno,
                    std::io::Error::from_raw_os_error(errno).to_string(),
                ));
                store.call_method1(intern!(py, "_fail"), (error.value(py),))?;
                let refusal = store
                    .getattr(intern!(py, "_flusher"))?
                    .call_method0(intern!(py, "refusal"))?;
                let raised = PyErr::from_value(refusal);
                raised.set_cause(py, Some(error));
                Err(raised)
            }
        }
    }

    /// Whether the flusher syncs the segment holding `end` and everything below that
    /// segment is durable; hands it a new active segment that qualifies.
    fn segment_ready(&self, py: Python<'_>, store: &Bound<'_, PyAny>, end: u64) -> PyResult<bool> {
        let log = store.getattr(intern!(py, "commitlog"))?;
        let segments = log
            .getattr(intern!(py, "segments"))?
            .cast_into::<PyList>()?;
        let Some(active) = segments.iter().last() else {
            return Ok(false);
        };
        let base: u64 = active.getattr(intern!(py, "base"))?.extract()?;
        let seg_end: u64 = active.getattr(intern!(py, "end"))?.extract()?;
        if end <= base || end > seg_end {
            return Ok(false);
        }
        let unsynced = log
            .getattr(intern!(py, "unsynced"))?
            .cast_into::<PyList>()?;
        for segment in unsynced.iter() {
            if !segment.is(&active) {
                return Ok(false); // another segment to sync first: the long way does it
            }
        }
        match self.group.segment_base() {
            Some(current) if current == base => return Ok(true),
            Some(current) if current > base => return Ok(false),
            _ => {}
        }
        let flushed: u64 = log.getattr(intern!(py, "flushed"))?.extract()?;
        if flushed < base {
            return Ok(false);
        }
        let fd: i32 = active.getattr(intern!(py, "fd"))?.extract()?;
        if fd < 0 {
            return Ok(false);
        }
        // SAFETY: `fd` is the open segment's descriptor (Segment.fd, open while the
        // segment is in the log, and the GIL is held); it is only borrowed to be dup'ed.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let owned: OwnedFd = borrowed.try_clone_to_owned().map_err(os_error)?;
        let map = PyBuffer::<u8>::get(&active.getattr(intern!(py, "map"))?)?;
        let range = (map.buf_ptr() as usize, map.len_bytes());
        let mut maps = self.maps.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the mapping stays exported (an mmap refuses to close while it is) in
        // `maps` until the flusher is stopped (`close`, drop), or a later segment was
        // handed over and the flusher's round in flight is not on this one (below); the
        // store closes segments after `close`; segments are reserved whole (fallocated)
        // when created.
        unsafe {
            self.group
                .use_segment_mapped(base, seg_end, File::from(owned), Some(range))
        };
        if self.group.segment_base() == Some(base) {
            maps.push((base, map));
        }
        // Let go of the older ones no round in flight is on: a round takes the newest
        // segment handed over, so none will be on them again.
        let in_round = self.group.in_round();
        let newest = maps.last().map(|(base, _)| *base);
        maps.retain(|(base, _)| Some(*base) == newest || Some(*base) == in_round);
        Ok(true)
    }
}

impl Drop for LogSyncer {
    /// Stop the flusher with the GIL let go: under a fault plan it may be waiting for
    /// the GIL to show an fdatasync to the plan (`sync_at_site`).
    fn drop(&mut self) {
        Python::attach(|py| {
            py.detach(|| self.group.stop());
            self.release_maps();
        });
    }
}

/// A round's fdatasync of the active segment (on the flusher's thread or a leading
/// appender's, without the GIL), through the `Io` in force at `log.sync`: without a
/// fault plan, the fdatasync and nothing else.
fn sync_at_site(file: &File) -> std::io::Result<()> {
    if !io_seam::planned() {
        return group_commit::fdatasync(file);
    }
    Python::attach(|py| {
        io_seam::with_io(py, |io| {
            io.call(
                py,
                Site::LogSync,
                file.as_raw_fd(),
                0,
                What::Sync,
                &mut || group_commit::fdatasync(file).map_err(os_error),
            )
        })
        .map_err(|error| {
            let errno = error
                .value(py)
                .getattr(intern!(py, "errno"))
                .ok()
                .and_then(|code| code.extract::<i32>().ok())
                .unwrap_or(libc::EIO);
            std::io::Error::from_raw_os_error(errno)
        })
    })
}

fn os_error(error: std::io::Error) -> PyErr {
    match error.raw_os_error() {
        Some(code) => PyOSError::new_err((code, error.to_string())),
        None => PyOSError::new_err(error.to_string()),
    }
}
