//! `_native.Pen`: the store's write mutex in `state` (crate::pen) for Python's write
//! session (storeadapter/engine/writesession.py).

use std::path::PathBuf;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;

use super::returning;
use crate::pen::{Found, Pen as Mutex, Taken, SLICE};

fn os_error(error: std::io::Error) -> PyErr {
    match error.raw_os_error() {
        Some(code) => PyOSError::new_err((code, error.to_string())),
        None => PyOSError::new_err(error.to_string()),
    }
}

#[pyclass(module = "storeadapter.engine._native", frozen)]
pub struct Pen {
    mutex: Mutex,
}

impl Pen {
    /// The mutex itself, for the append core (append_core.rs).
    pub(crate) fn mutex(&self) -> &Mutex {
        &self.mutex
    }
}

#[pymethods]
impl Pen {
    /// Open the mutex in the `state` file at `path` (the caller holds `open.lock`;
    /// `alone`: no other process has the store open), initialising it when no process
    /// can be using it (crate::pen); None when a marker of another pthread layout is
    /// there (the caller keeps the flock path).
    #[staticmethod]
    #[pyo3(signature = (path, alone = false))]
    fn open(path: PathBuf, alone: bool) -> PyResult<Option<Pen>> {
        let (mutex, found) = Mutex::open(&path, alone).map_err(os_error)?;
        Ok((found == Found::Ready).then_some(Pen { mutex }))
    }

    /// Take the mutex; True when its last owner died holding it. Waits, without the
    /// GIL, when another thread or process holds it: in sleeps of at most `SLICE`,
    /// each followed by a fresh try (crate::pen's `lock` says why), between which the
    /// main thread sees its signals (a KeyboardInterrupt ends the wait). Each sleep is
    /// a `returning::blocking` call: a native append makes way when it ends.
    fn lock(&self, py: Python<'_>) -> PyResult<bool> {
        if let Some(taken) = self.mutex.try_lock().map_err(os_error)? {
            return Ok(taken == Taken::OwnerDied);
        }
        loop {
            let waited = returning::blocking(py, || self.mutex.lock_for(SLICE));
            if let Some(taken) = waited.map_err(os_error)? {
                return Ok(taken == Taken::OwnerDied);
            }
            py.check_signals()?;
        }
    }

    /// Mark the mutex consistent after a lock that returned True.
    fn consistent(&self) -> PyResult<()> {
        self.mutex.consistent().map_err(os_error)
    }

    fn unlock(&self) -> PyResult<()> {
        self.mutex.unlock().map_err(os_error)
    }
}
