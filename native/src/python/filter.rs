//! `Filter`: a compiled filter expression (src/filter.rs) for Python. The store core's
//! `scan_filtered` evaluates it per record of a queue range; `matches` evaluates it on
//! one message given field by field (messages that do not come from the core: a masked
//! view, a shared topic's queue).
//!
//! A bad expression raises ValueError with (sentence, position, line, column), which
//! `storeadapter.engine.filters` turns into its FilterSyntaxError. No panic crosses into
//! Python: compiling and evaluating catch them (an evaluation that panics is an
//! evaluation error for that record).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::filter::{self, Fields};

#[pyclass(frozen, module = "storeadapter.engine._native")]
pub struct Filter {
    pub(super) inner: filter::Filter,
}

#[pymethods]
impl Filter {
    #[new]
    fn new(source: &str) -> PyResult<Filter> {
        match filter::Filter::compile(source) {
            Ok(inner) => Ok(Filter { inner }),
            Err(e) => Err(PyValueError::new_err((
                e.message, e.position, e.line, e.column,
            ))),
        }
    }

    #[getter]
    fn source(&self) -> &str {
        self.inner.source()
    }

    /// The messages of `messages` (StoredMessage tuples: id, topic, queue, queue offset,
    /// commit offset, born ms, store ms, tag, keys, properties, body) that match, in one
    /// call: the Spark source's batches. A message whose evaluation fails is left out.
    fn keep<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'py, PyList>,
    ) -> PyResult<Bound<'py, PyList>> {
        let kept = PyList::empty(py);
        let root = self.inner.context();
        let mut keys = Vec::new();
        let mut props = Vec::new();
        for message in messages.iter() {
            let fields = message.cast::<PyTuple>()?;
            if fields.len() < 11 {
                return Err(PyTypeError::new_err("keep takes StoredMessage tuples"));
            }
            let topic = fields.get_item(1)?;
            let tag = fields.get_item(7)?;
            let body = fields.get_item(10)?;
            let body = body.cast::<PyBytes>()?;
            join_keys(&fields.get_item(8)?.cast_into::<PyList>()?, &mut keys)?;
            join_properties(&fields.get_item(9)?.cast_into::<PyDict>()?, &mut props)?;
            let tag_text: Option<String> = tag.extract()?;
            let topic_text: String = topic.extract()?;
            let record = Fields {
                topic: topic_text.as_bytes(),
                queue: fields.get_item(2)?.extract()?,
                offset: fields.get_item(3)?.extract()?,
                commit_offset: fields.get_item(4)?.extract()?,
                born_ms: fields.get_item(5)?.extract()?,
                stored_ms: fields.get_item(6)?.extract()?,
                tag: tag_text.as_deref().unwrap_or_default().as_bytes(),
                keys: &keys,
                properties: &props,
                body: body.as_bytes(),
            };
            if let Ok(true) = self.inner.matches_fields(&root, &record) {
                kept.append(message)?;
            }
        }
        Ok(kept)
    }

    /// (matched, error sentence or None) for one message's fields.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (topic, queue, offset, commit_offset, born_ms, stored_ms, tag, keys, properties, body))]
    fn matches(
        &self,
        topic: &str,
        queue: u32,
        offset: u64,
        commit_offset: u64,
        born_ms: i64,
        stored_ms: i64,
        tag: Option<&str>,
        keys: &Bound<'_, PyList>,
        properties: &Bound<'_, PyDict>,
        body: &[u8],
    ) -> PyResult<(bool, Option<String>)> {
        let mut joined_keys = Vec::new();
        join_keys(keys, &mut joined_keys)?;
        let mut joined_props = Vec::new();
        join_properties(properties, &mut joined_props)?;
        let fields = Fields {
            topic: topic.as_bytes(),
            queue,
            offset,
            commit_offset,
            born_ms,
            stored_ms,
            tag: tag.unwrap_or_default().as_bytes(),
            keys: &joined_keys,
            properties: &joined_props,
            body,
        };
        let root = self.inner.context();
        Ok(match self.inner.matches_fields(&root, &fields) {
            Ok(hit) => (hit, None),
            Err(error) => (false, Some(error)),
        })
    }
}

/// Keys as a record holds them (joined by U+001F), into `out`.
fn join_keys(keys: &Bound<'_, PyList>, out: &mut Vec<u8>) -> PyResult<()> {
    out.clear();
    for (n, key) in keys.iter().enumerate() {
        if n > 0 {
            out.push(0x1f);
        }
        out.extend_from_slice(key.cast::<PyString>()?.to_str()?.as_bytes());
    }
    Ok(())
}

/// Properties as a record holds them (name U+0001 value, joined by U+0002), into `out`.
fn join_properties(properties: &Bound<'_, PyDict>, out: &mut Vec<u8>) -> PyResult<()> {
    out.clear();
    for (n, (name, value)) in properties.iter().enumerate() {
        if n > 0 {
            out.push(0x02);
        }
        out.extend_from_slice(name.cast::<PyString>()?.to_str()?.as_bytes());
        out.push(0x01);
        out.extend_from_slice(value.str()?.to_str()?.as_bytes());
    }
    Ok(())
}
