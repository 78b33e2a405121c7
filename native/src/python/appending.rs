//! Appends: a batch of records encoded at the commit-log tail, with its entries and
//! results.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};

use super::{check_record_type, detach_if, id_prefix, message_id, new_record};
use crate::appending::{self, Placed, PlainBatch};
use crate::record::Fields;

/// A batch's bytes, each turn queue's packed entries, and the results.
type Encoded<'py> = (
    Bound<'py, PyBytes>,
    Vec<Bound<'py, PyBytes>>,
    Bound<'py, PyList>,
);

/// Encode `bodies` (a list of bytes) as records of `topic` from commit offset `tail`,
/// stamped `now`, dealt to the queues of `turn` in turn from the queue offsets `bases`.
/// Returns the records' bytes, the packed entries of each queue of `turn`, and an
/// AppendResult (of type `result_type`) per message with status `status`.
#[pyfunction]
#[pyo3(signature = (bodies, topic, tail, now, turn, bases, prefix, topic_name, status, result_type))]
#[allow(clippy::too_many_arguments)]
pub fn encode_plain<'py>(
    py: Python<'py>,
    bodies: &Bound<'py, PyList>,
    topic: &[u8],
    tail: u64,
    now: i64,
    turn: Vec<u32>,
    bases: Vec<u64>,
    prefix: &str,
    topic_name: &Bound<'py, PyString>,
    status: &Bound<'py, PyString>,
    result_type: &Bound<'py, PyType>,
) -> PyResult<Encoded<'py>> {
    check_record_type(result_type)?;
    let prefix = id_prefix(prefix)?;
    if turn.is_empty() || turn.len() != bases.len() || topic.len() > 255 {
        return Err(PyValueError::new_err(
            "a turn of queues, one base offset each",
        ));
    }
    let held: Vec<Bound<'py, PyBytes>> = bodies
        .iter()
        .map(|item| item.cast_into::<PyBytes>().map_err(PyErr::from))
        .collect::<PyResult<_>>()?;
    let slices: Vec<&[u8]> = held.iter().map(|b| b.as_bytes()).collect();
    let batch = PlainBatch {
        topic,
        tail,
        now,
        turn: &turn,
        bases: &bases,
    };
    let length = appending::plain_length(topic, &slices);
    let mut placed = None;
    let data = PyBytes::new_with(py, length, |out| {
        placed = Some(detach_if(py, length, || {
            appending::encode_plain(&batch, &slices, out)
        }));
        Ok(())
    })?;
    let encoded = placed.unwrap_or_default();
    let results = PyList::empty(py);
    for i in 0..encoded.starts.len() {
        results.append(new_record(
            py,
            result_type,
            [
                message_id(py, &prefix, encoded.starts[i]).into_any(),
                topic_name.clone().into_any(),
                encoded.queue_ids[i].into_pyobject(py)?.into_any(),
                encoded.queue_offsets[i].into_pyobject(py)?.into_any(),
                encoded.starts[i].into_pyobject(py)?.into_any(),
                now.into_pyobject(py)?.into_any(),
                status.clone().into_any(),
            ],
        )?)?;
    }
    let entries = encoded
        .entries
        .iter()
        .map(|e| PyBytes::new(py, e))
        .collect();
    Ok((data, entries, results))
}

/// Encode records whose places the caller chose: each item of `records` is
/// `(commit offset, queue offset, born ms, store ms, queue id, tag, keys, properties,
/// body, tag hash)`, all of `topic`, back to back. Returns their bytes and their packed
/// entries, in order.
#[pyfunction]
pub fn encode_placed<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyList>,
    topic: &[u8],
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let items: Vec<Bound<'py, PyTuple>> = records
        .iter()
        .map(|item| item.cast_into::<PyTuple>().map_err(PyErr::from))
        .collect::<PyResult<_>>()?;
    type Row<'a> = (
        u64,
        u64,
        i64,
        i64,
        u32,
        &'a [u8],
        &'a [u8],
        &'a [u8],
        &'a [u8],
        u64,
    );
    let rows: Vec<Row<'_>> = items
        .iter()
        .map(|item| item.extract())
        .collect::<PyResult<_>>()?;
    let mut placed = Vec::with_capacity(rows.len());
    for (
        commit_offset,
        queue_offset,
        born_ms,
        store_ms,
        queue_id,
        tag,
        keys,
        properties,
        body,
        tag_hash,
    ) in rows
    {
        if topic.len() > 255 || tag.len() > 255 || keys.len() > 0xFFFF || properties.len() > 0xFFFF
        {
            return Err(PyValueError::new_err(
                "a field is longer than the record format allows",
            ));
        }
        placed.push(Placed {
            fields: Fields {
                commit_offset,
                queue_offset,
                born_ms,
                store_ms,
                queue_id,
                topic,
                tag,
                keys,
                properties,
            },
            body,
            tag_hash,
        });
    }
    let work = placed.iter().map(|p| p.body.len() + 64).sum();
    let (data, entries) = detach_if(py, work, || appending::encode_placed(&placed));
    Ok((PyBytes::new(py, &data), PyBytes::new(py, &entries)))
}
