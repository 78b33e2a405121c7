//! Consume-queue entries' checks, for the queue classes that write and verify them.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::Bytes;
use crate::consume_queue;

/// `entries` (packed, 20 bytes each) with every written entry sealed (its tag hash and
/// check as docs/FORMAT.md gives them): `entries` itself when all are sealed already,
/// else new bytes.
#[pyfunction]
pub fn seal_entries<'py>(
    py: Python<'py>,
    entries: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let view = Bytes::of(entries)?;
    let data = view.slice();
    if consume_queue::all_sealed(data) {
        return Ok(entries.clone());
    }
    let mut sealed = data.to_vec();
    consume_queue::seal(&mut sealed);
    Ok(PyBytes::new(py, &sealed).into_any())
}

/// Whether the entry at the start of `entry` passes its check.
#[pyfunction]
pub fn entry_checked(entry: &[u8]) -> bool {
    entry.len() >= consume_queue::ENTRY_SIZE && consume_queue::checked(entry)
}
