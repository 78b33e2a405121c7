//! `record_layout()`: the crate's record layout constants, for Python to compare with
//! `storeadapter/engine/record.py`'s (tests/engine/test_record_layout.py), so the two
//! sides cannot drift apart from docs/FORMAT.md, "Record".

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::record;

/// The record's layout as the crate has it: the magics, the sizes of the header, trailer,
/// end-of-segment marker and overhead, the trailer's fields counted back from a record's
/// end, and the header's fields as `(name, byte position, size)` in their order on disk.
#[pyfunction]
pub fn record_layout(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let layout = PyDict::new(py);
    layout.set_item("record_magic", record::RECORD_MAGIC)?;
    layout.set_item("end_of_segment_magic", record::END_OF_SEGMENT_MAGIC)?;
    layout.set_item("header_size", record::HEADER_SIZE)?;
    layout.set_item("trailer_size", record::TRAILER_SIZE)?;
    layout.set_item("record_overhead", record::RECORD_OVERHEAD)?;
    layout.set_item("marker_size", record::MARKER_SIZE)?;
    layout.set_item("crc_from_end", record::CRC_FROM_END)?;
    layout.set_item("length_from_end", record::LENGTH_FROM_END)?;
    layout.set_item("header_fields", record::HEADER_FIELDS.to_vec())?;
    Ok(layout)
}
