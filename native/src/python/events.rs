//! Event streams: the appends of a batch encoded in one call (records, consume-queue
//! entries, event-index entries, results). Events are read back for the index's rebuild
//! by `Run.events` (scan.rs).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};

use super::{check_record_type, detach_if, id_prefix, message_id, new_record};
use crate::events::{self, EventAppend};

/// Per append: its packed consume-queue entries, the commit offset of its last record,
/// its results, and the jump chain of its last event.
type Placed<'py> = (
    Bound<'py, PyBytes>,
    u64,
    Bound<'py, PyList>,
    Vec<(u64, u32)>,
);

/// Encode `appends` (each a tuple `(stream_id, command_id or None, first_version, types,
/// bodies, queue_id, queue_offset, stream_hash, command_hash, previous, chain,
/// stream_next, command_next)`, `types` and `bodies` lists of bytes, one type per body,
/// and `chain` the stream's jump chain, a list of (version, entry number)) one after
/// another from commit offset `start`, as
/// records of `topic` stamped `store_ms`, their index entries numbered from
/// `first_number`, each event's jump found from the chain (`eventindex.run_jumps`).
/// Returns the records' bytes, per append its entries, last commit offset, results
/// (EventAppendResult, of type `result_type`, status `status`) and new jump chain, and
/// the index entries' bytes.
#[pyfunction]
#[pyo3(signature = (topic, store_ms, start, first_number, appends, prefix, topic_name, status, result_type))]
#[allow(clippy::too_many_arguments)]
pub fn encode_events<'py>(
    py: Python<'py>,
    topic: &[u8],
    store_ms: i64,
    start: u64,
    first_number: u32,
    appends: &Bound<'py, PyList>,
    prefix: &str,
    topic_name: &Bound<'py, PyString>,
    status: &Bound<'py, PyString>,
    result_type: &Bound<'py, PyType>,
) -> PyResult<(Bound<'py, PyBytes>, Vec<Placed<'py>>, Bound<'py, PyBytes>)> {
    check_record_type(result_type)?;
    let prefix = id_prefix(prefix)?;
    let items: Vec<Bound<'py, PyTuple>> = appends
        .iter()
        .map(|item| item.cast_into::<PyTuple>().map_err(PyErr::from))
        .collect::<PyResult<_>>()?;
    // Hold every object the slices borrow from for the whole call.
    let mut ids: Vec<Bound<'py, PyString>> = Vec::with_capacity(items.len());
    let mut commands: Vec<Option<Bound<'py, PyString>>> = Vec::with_capacity(items.len());
    type Lists<'py> = (Vec<Bound<'py, PyBytes>>, Vec<Bound<'py, PyBytes>>);
    let mut held: Vec<Lists<'py>> = Vec::with_capacity(items.len());
    type Numbers = (u64, u32, u64, u64, u64, u32, Vec<(u64, u32)>, u32, u32);
    let mut numbers: Vec<Numbers> = Vec::with_capacity(items.len());
    for item in &items {
        if item.len() != 13 {
            return Err(PyValueError::new_err("an append is a tuple of 13 fields"));
        }
        ids.push(item.get_item(0)?.cast_into::<PyString>()?);
        let command = item.get_item(1)?;
        commands.push(if command.is_none() {
            None
        } else {
            Some(command.cast_into::<PyString>()?)
        });
        let bytes_of = |list: Bound<'py, PyAny>| -> PyResult<Vec<Bound<'py, PyBytes>>> {
            list.cast_into::<PyList>()?
                .iter()
                .map(|b| b.cast_into::<PyBytes>().map_err(PyErr::from))
                .collect()
        };
        let types = bytes_of(item.get_item(3)?)?;
        let bodies = bytes_of(item.get_item(4)?)?;
        let chain: Vec<(u64, u32)> = item.get_item(10)?.extract()?;
        if types.len() != bodies.len() || bodies.is_empty() {
            return Err(PyValueError::new_err(
                "an append has events, and a type for each",
            ));
        }
        held.push((types, bodies));
        numbers.push((
            item.get_item(2)?.extract()?,
            item.get_item(5)?.extract()?,
            item.get_item(6)?.extract()?,
            item.get_item(7)?.extract()?,
            item.get_item(8)?.extract()?,
            item.get_item(9)?.extract()?,
            chain,
            item.get_item(11)?.extract()?,
            item.get_item(12)?.extract()?,
        ));
    }
    let mut batch: Vec<EventAppend<'_>> = Vec::with_capacity(items.len());
    for (i, number) in numbers.iter().enumerate() {
        let (first_version, queue_id, queue_offset, stream_hash, command_hash, previous, _, sn, cn) =
            *number;
        batch.push(EventAppend {
            stream_id: ids[i].to_str()?.as_bytes(),
            command_id: match &commands[i] {
                Some(command) => Some(command.to_str()?.as_bytes()),
                None => None,
            },
            first_version,
            types: held[i].0.iter().map(|b| b.as_bytes()).collect(),
            bodies: held[i].1.iter().map(|b| b.as_bytes()).collect(),
            queue_id,
            queue_offset,
            stream_hash,
            command_hash,
            previous,
            chain: number.6.clone(),
            stream_next: sn,
            command_next: cn,
        });
    }
    let length = events::encoded_length(topic, &batch)
        .ok_or_else(|| PyValueError::new_err("a field is longer than the record format allows"))?;
    let mut encoded = detach_if(py, length, || {
        events::encode_appends(topic, store_ms, start, first_number, &batch, length)
    });
    let mut placed = Vec::with_capacity(batch.len());
    for (i, append) in batch.iter().enumerate() {
        let results = PyList::empty(py);
        let starts = &encoded.starts[i];
        for (j, &offset) in starts.iter().enumerate() {
            results.append(new_record(
                py,
                result_type,
                [
                    message_id(py, &prefix, offset).into_any(),
                    topic_name.clone().into_any(),
                    append.queue_id.into_pyobject(py)?.into_any(),
                    (append.queue_offset + j as u64)
                        .into_pyobject(py)?
                        .into_any(),
                    offset.into_pyobject(py)?.into_any(),
                    store_ms.into_pyobject(py)?.into_any(),
                    status.clone().into_any(),
                    ids[i].clone().into_any(),
                    (append.first_version + j as u64)
                        .into_pyobject(py)?
                        .into_any(),
                ],
            )?)?;
        }
        placed.push((
            PyBytes::new(py, &encoded.entries[i]),
            *starts.last().unwrap_or(&start),
            results,
            std::mem::take(&mut encoded.chains[i]),
        ));
    }
    Ok((
        PyBytes::new(py, &encoded.data),
        placed,
        PyBytes::new(py, &encoded.index),
    ))
}
