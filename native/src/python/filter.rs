//! `Filter`: a compiled filter expression (src/filter.rs) for Python. The store core's
//! `scan_filtered` evaluates it per record of a queue range; `matches` evaluates it on
//! one message given field by field (messages that do not come from the core: a masked
//! view, a shared topic's queue).
//!
//! A bad expression raises ValueError with (sentence, position, line, column), which
//! `storeadapter.engine.filters` turns into its FilterSyntaxError. No panic crosses into
//! Python: compiling and evaluating catch them (an evaluation that panics is an
//! evaluation error for that record).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

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
        for (n, key) in keys.iter().enumerate() {
            if n > 0 {
                joined_keys.push(0x1f);
            }
            joined_keys.extend_from_slice(key.extract::<String>()?.as_bytes());
        }
        let mut joined_props = Vec::new();
        for (n, (name, value)) in properties.iter().enumerate() {
            if n > 0 {
                joined_props.push(0x02);
            }
            joined_props.extend_from_slice(name.extract::<String>()?.as_bytes());
            joined_props.push(0x01);
            joined_props.extend_from_slice(value.str()?.to_str()?.as_bytes());
        }
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
