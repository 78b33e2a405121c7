//! `_native.prepare_items`: `append_batch`'s items made ready for `Writer.append_prepared`
//! in one call (issue 31, part 5): bytes, str and dicts of `body` (bytes or str),
//! `queue` (int), `key` (str or list of str), `tag` (str) and `properties` (dict of str
//! to str) and `born_time_ms` (int), and `Message`s of those (no dedup id), each as the
//! tuple `Writer.prepare` makes of it. Anything else, and any item
//! `Writer.prepare` would refuse, makes the whole call None: the Python path then
//! prepares the batch and raises its typed error, with nothing written.

use std::cell::RefCell;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PyString, PyTuple, PyType};
use pyo3::{ffi, intern};

use crate::tags::tag_hash;

/// record.MAX_TAG_BYTES, MAX_KEYS_BYTES, MAX_PROPERTIES_BYTES.
const MAX_TAG_BYTES: usize = 255;
const MAX_KEYS_BYTES: usize = 0xFFFF;
const MAX_PROPERTIES_BYTES: usize = 0xFFFF;
/// record.KEY_SEPARATOR, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR: never inside a field.
const KEY_SEPARATOR: u8 = 0x1f;
const NAME_VALUE_SEPARATOR: u8 = 0x01;
const PROPERTY_SEPARATOR: u8 = 0x02;
/// names.DEDUP_PROPERTY: reserved (`dedup_id=` sets it).
const DEDUP_PROPERTY: &str = "DEDUP_ID";

/// Not an item this call prepares: the Python path decides.
struct Refused;

impl From<PyErr> for Refused {
    fn from(_: PyErr) -> Refused {
        Refused
    }
}

fn clean(text: &str) -> bool {
    !text
        .bytes()
        .any(|b| b == KEY_SEPARATOR || b == NAME_VALUE_SEPARATOR || b == PROPERTY_SEPARATOR)
}

/// An exact `str` as UTF-8 (a lone surrogate, which `str.encode` refuses: refused).
fn text<'a>(value: &'a Bound<'_, PyAny>) -> Result<&'a str, Refused> {
    if !value.is_exact_instance_of::<PyString>() {
        return Err(Refused);
    }
    Ok(value.cast::<PyString>().map_err(|_| Refused)?.to_str()?)
}

/// What `Writer.prepare` checks of one message and the tuple it makes.
struct Limits<'py> {
    queue_count: i64,
    frozen: Bound<'py, PyAny>,
    max_body: usize,
    fixed: usize,
    capacity: usize,
    /// `results.Message`: an item of exactly this type is prepared by its fields.
    message_type: Option<Bound<'py, PyType>>,
    /// The batch's first `TAGS_KEPT` distinct tags and their hashes (a batch's items
    /// mostly share a few tags; the hash is BLAKE2b's, ~900 instructions).
    tags: RefCell<Vec<(Vec<u8>, u64)>>,
    /// What a `{"body", "queue"}` dict is prepared with (`body_and_queue`); None for a
    /// single message.
    plain: Option<Plain<'py>>,
}

/// The parts of a `{"body": bytes, "queue": int}` dict's preparation shared by a
/// batch's items: the two keys (interned, as a literal's are), the empty tag, keys and
/// properties (the empty `bytes`), the empty index keys, and whether any queue is frozen.
struct Plain<'py> {
    body_key: Bound<'py, PyString>,
    queue_key: Bound<'py, PyString>,
    empty: Bound<'py, PyBytes>,
    no_keys: Bound<'py, PyTuple>,
    any_frozen: bool,
}

impl<'py> Plain<'py> {
    fn new(py: Python<'py>, frozen: &Bound<'py, PyAny>) -> Plain<'py> {
        let any_frozen =
            !(frozen.is_exact_instance_of::<PyList>() && frozen.is_empty().unwrap_or(false));
        Plain {
            body_key: intern!(py, "body").clone(),
            queue_key: intern!(py, "queue").clone(),
            empty: PyBytes::new(py, b""),
            no_keys: PyTuple::empty(py),
            any_frozen,
        }
    }
}

/// results.Message's fields.
const MESSAGE_FIELDS: usize = 7;

/// How many distinct tags of a batch `Limits::tag_hash` keeps.
const TAGS_KEPT: usize = 16;

impl Limits<'_> {
    fn tag_hash(&self, tag: &[u8]) -> u64 {
        let mut kept = self.tags.borrow_mut();
        if let Some((_, hash)) = kept.iter().find(|(bytes, _)| bytes.as_slice() == tag) {
            return *hash;
        }
        let hash = tag_hash(tag);
        if kept.len() < TAGS_KEPT {
            kept.push((tag.to_vec(), hash));
        }
        hash
    }
}

fn body_bytes<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
) -> Result<Bound<'py, PyBytes>, Refused> {
    if body.is_exact_instance_of::<PyBytes>() {
        return Ok(body.cast::<PyBytes>().map_err(|_| Refused)?.clone());
    }
    Ok(PyBytes::new(py, text(body)?.as_bytes()))
}

/// Where CPython 3.11 lays out a dict's keys table (`struct _dictkeysobject`, after
/// its `dk_refcnt` word): `dk_log2_index_bytes`, `dk_kind`, `dk_nentries`, then the
/// indices (`dk_indices`), then the entries.
const DK_LOG2_INDEX_BYTES: usize = 9;
const DK_KIND: usize = 10;
const DK_NENTRIES: usize = 24;
const DK_INDICES: usize = 32;
/// `dk_kind`: keys of any type (an entry is hash, key, value) or str keys only (key,
/// value).
const DICT_KEYS_GENERAL: u8 = 0;
const DICT_KEYS_UNICODE: u8 = 1;

/// The two items of `dict`, an exact dict of two items, in order: read from its entries
/// where they are laid out as on CPython 3.11 and both in its first two (no item ever
/// deleted), else by `PyDict_Next` (None if it finds fewer). Two `PyDict_Next` calls
/// were ~106 instructions of an item's ~255 in `prepare_all` (docs/PERFORMANCE.md,
/// put33-s54).
///
/// # Safety
/// The GIL is held, `dict` is an exact dict of two items, and nothing that could change
/// it runs while the pointers returned (borrowed) are used.
unsafe fn two_items(
    py: Python<'_>,
    dict: *mut ffi::PyObject,
) -> Option<[(*mut ffi::PyObject, *mut ffi::PyObject); 2]> {
    if dict_layout_known(py) {
        if let Some(items) = laid_out_items(dict) {
            return Some(items);
        }
    }
    let mut position: ffi::Py_ssize_t = 0;
    let mut items = [(std::ptr::null_mut(), std::ptr::null_mut()); 2];
    for (key, value) in items.iter_mut() {
        if ffi::PyDict_Next(dict, &mut position, key, value) == 0 {
            return None;
        }
    }
    Some(items)
}

/// `two_items` read from the dict's entries (CPython 3.11's layout, which
/// `dict_layout_known` checked): None for a split table, a dict whose first two entries
/// are not its two items, or a kind of keys table not known.
///
/// # Safety
/// As `two_items`, and `dict_layout_known` is true.
unsafe fn laid_out_items(
    dict: *mut ffi::PyObject,
) -> Option<[(*mut ffi::PyObject, *mut ffi::PyObject); 2]> {
    let object = dict.cast::<ffi::PyDictObject>();
    if (*object).ma_used != 2 || !(*object).ma_values.is_null() {
        return None;
    }
    let keys = (*object).ma_keys.cast::<u8>();
    if *keys.add(DK_NENTRIES).cast::<ffi::Py_ssize_t>() != 2 {
        return None;
    }
    let entries = keys.add(DK_INDICES + (1usize << *keys.add(DK_LOG2_INDEX_BYTES)));
    let (size, key_at) = match *keys.add(DK_KIND) {
        DICT_KEYS_UNICODE => (2, 0),
        DICT_KEYS_GENERAL => (3, 1),
        _ => return None,
    };
    let words = entries.cast::<*mut ffi::PyObject>();
    let item = |i: usize| {
        (
            *words.add(i * size + key_at),
            *words.add(i * size + key_at + 1),
        )
    };
    let items = [item(0), item(1)];
    if items
        .iter()
        .any(|(key, value)| key.is_null() || value.is_null())
    {
        return None;
    }
    Some(items)
}

/// Whether dicts are laid out as `laid_out_items` reads them: CPython 3.11, and a dict of
/// str keys and one of other keys, each made with two items, read there as `PyDict_Next`
/// reads them (looked at once).
fn dict_layout_known(py: Python<'_>) -> bool {
    static KNOWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if let Some(known) = KNOWN.get() {
        return *known;
    }
    // Looked at outside the cell's initialisation: making the dicts may set off a
    // collection, whose finalizers may prepare items and come here again.
    let look = || -> PyResult<bool> {
        if !super::cpython_3_11(py) {
            return Ok(false);
        }
        let named = PyDict::new(py);
        named.set_item(intern!(py, "body"), PyBytes::new(py, b""))?;
        named.set_item(intern!(py, "queue"), 7)?;
        let general = PyDict::new(py);
        general.set_item(1, "one")?;
        general.set_item("two", 2)?;
        for dict in [&named, &general] {
            let mut position: ffi::Py_ssize_t = 0;
            let mut expected = [(std::ptr::null_mut(), std::ptr::null_mut()); 2];
            // SAFETY: the GIL is held; `dict` is a dict of two items made above, which
            // nothing changes while its borrowed keys and values are compared.
            let same = unsafe {
                for (key, value) in expected.iter_mut() {
                    if ffi::PyDict_Next(dict.as_ptr(), &mut position, key, value) == 0 {
                        return Ok(false);
                    }
                }
                laid_out_items(dict.as_ptr()) == Some(expected)
            };
            if !same {
                return Ok(false);
            }
        }
        Ok(true)
    };
    let known = look().unwrap_or(false);
    let _ = KNOWN.set(known);
    known
}

/// A dict of exactly `{"body": bytes, "queue": int}` (the two keys the strings a
/// literal interns, in either order) whose queue is in range and not frozen and whose
/// record fits: prepared without the general walk (no key matched by its text, no
/// field encoded, the empty ones shared). None: any other item, or one of this shape
/// the general way refuses (`prepare_one` decides, as before).
fn body_and_queue<'py>(item: &Bound<'py, PyAny>, limits: &Limits<'py>) -> Option<Prepared<'py>> {
    let plain = limits.plain.as_ref()?;
    let py = item.py();
    let dict = item.as_ptr();
    let mut body = std::ptr::null_mut();
    let mut queue = std::ptr::null_mut();
    // SAFETY: the GIL is held and `item` holds a reference to `dict` for the whole call;
    // `two_items` is given a dict of two items (checked exactly) and reads borrowed keys
    // and values (not stored past the loop: each taken below as a new reference,
    // `from_borrowed_ptr`), with nothing run between its reads that could change the dict
    // (no Python code, no decref).
    unsafe {
        if ffi::PyDict_CheckExact(dict) == 0 || ffi::PyDict_Size(dict) != 2 {
            return None;
        }
        for (key, value) in two_items(py, dict)? {
            if key == plain.body_key.as_ptr() {
                body = value;
            } else if key == plain.queue_key.as_ptr() {
                queue = value;
            } else {
                return None; // another key, or one not interned: the general way
            }
        }
        if body.is_null()
            || queue.is_null()
            || ffi::PyBytes_CheckExact(body) == 0
            || ffi::PyLong_CheckExact(queue) == 0
        {
            return None;
        }
        let mut overflow = 0;
        let id = ffi::PyLong_AsLongLongAndOverflow(queue, &mut overflow);
        if overflow != 0 || !(0..limits.queue_count).contains(&id) {
            return None; // (-1 with an error set cannot be: an exact int in range)
        }
        let length = ffi::PyBytes_Size(body) as usize;
        if length > limits.max_body || limits.fixed + length > limits.capacity {
            return None;
        }
        let queue = Bound::from_borrowed_ptr(py, queue);
        if plain.any_frozen && limits.frozen.contains(&queue).unwrap_or(true) {
            return None;
        }
        Some(Prepared {
            queue: Some(queue),
            queue_id: id,
            route: None,
            fields: [
                plain.empty.clone(),
                plain.empty.clone(),
                plain.empty.clone(),
                Bound::from_borrowed_ptr(py, body).cast_into_unchecked(),
            ],
            born: None,
            tag_hash: 0, // the empty tag's (tags.tag_hash)
            index_keys: plain.no_keys.clone(),
        })
    }
}

fn prepare_one<'py>(
    py: Python<'py>,
    item: &Bound<'py, PyAny>,
    limits: &Limits<'py>,
) -> Result<Prepared<'py>, Refused> {
    let (body, queue, key, tag, properties, born) = if item.is_exact_instance_of::<PyDict>() {
        let dict = item.cast::<PyDict>().map_err(|_| Refused)?;
        let (mut body, mut queue, mut key, mut tag, mut properties, mut born) =
            (None, None, None, None, None, None);
        for (name, value) in dict.iter() {
            let place = match text(&name)? {
                "body" => &mut body,
                "queue" => &mut queue,
                "key" => &mut key,
                "tag" => &mut tag,
                "properties" => &mut properties,
                "born_time_ms" => &mut born,
                _ => return Err(Refused), // dedup_id, unknown: Python's
            };
            *place = Some(value);
        }
        (body.ok_or(Refused)?, queue, key, tag, properties, born)
    } else if item.is_exact_instance_of::<PyBytes>() || item.is_exact_instance_of::<PyString>() {
        (item.clone(), None, None, None, None, None)
    } else if limits
        .message_type
        .as_ref()
        .is_some_and(|message| item.get_type().is(message))
    {
        // A `Message`: (body, key, tag, queue, properties, born_time_ms, dedup_id).
        let fields = item.cast::<PyTuple>().map_err(|_| Refused)?;
        if fields.len() != MESSAGE_FIELDS || !fields.get_item(6)?.is_none() {
            return Err(Refused); // a dedup id: Python's
        }
        (
            fields.get_item(0)?,
            Some(fields.get_item(3)?),
            Some(fields.get_item(1)?),
            Some(fields.get_item(2)?),
            Some(fields.get_item(4)?),
            Some(fields.get_item(5)?),
        )
    } else {
        return Err(Refused);
    };
    let mut prepared = prepare_fields(py, &body, queue, key, tag, properties, limits)?;
    if let Some(born) = born.filter(|b| !b.is_none()) {
        // `Writer.prepare`: a non-negative int (a bool, or past i64: Python's).
        if !born.is_exact_instance_of::<PyInt>() || born.extract::<i64>()? < 0 {
            return Err(Refused);
        }
        prepared.born = Some(born);
    }
    Ok(prepared)
}

/// One message as `Writer.prepare` prepares it: the fields of its tuple
/// (`into_tuple`), for a caller that writes it without the tuple (the shared batch).
pub(super) struct Prepared<'py> {
    /// The explicit queue (an int in range, not frozen), or None.
    pub queue: Option<Bound<'py, PyAny>>,
    /// The explicit queue's id (0 when there is none).
    pub queue_id: i64,
    /// The first key's bytes (the queue it picks), or None.
    pub route: Option<Bound<'py, PyBytes>>,
    /// Tag, keys, properties (encoded) and body.
    pub fields: [Bound<'py, PyBytes>; 4],
    /// The born time (a non-negative int), or None: the store time.
    pub born: Option<Bound<'py, PyAny>>,
    pub tag_hash: u64,
    /// The keys for the key index.
    pub index_keys: Bound<'py, PyTuple>,
}

impl<'py> Prepared<'py> {
    /// `Writer.prepare`'s tuple: `(queue, route key, tag, keys, properties, body, born
    /// time, tag hash, index keys, None)`.
    pub(super) fn into_tuple(self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let none = py.None().into_bound(py);
        let [tag, keys, properties, body] = self.fields;
        PyTuple::new(
            py,
            [
                self.queue.unwrap_or_else(|| none.clone()),
                self.route.map_or_else(|| none.clone(), Bound::into_any),
                tag.into_any(),
                keys.into_any(),
                properties.into_any(),
                body.into_any(),
                self.born.unwrap_or_else(|| none.clone()),
                self.tag_hash.into_pyobject(py)?.into_any(),
                self.index_keys.into_any(),
                none,
            ],
        )
    }
}

/// One message's fields (`None` or Python's None: not given) as `Writer.prepare`
/// checks and prepares them.
fn prepare_fields<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    queue: Option<Bound<'py, PyAny>>,
    key: Option<Bound<'py, PyAny>>,
    tag: Option<Bound<'py, PyAny>>,
    properties: Option<Bound<'py, PyAny>>,
    limits: &Limits<'py>,
) -> Result<Prepared<'py>, Refused> {
    let body = body_bytes(py, body)?;
    if body.as_bytes().len() > limits.max_body {
        return Err(Refused);
    }
    let (queue, queue_id) = match queue.filter(|q| !q.is_none()) {
        None => (None, 0),
        Some(q) => {
            if !q.is_exact_instance_of::<PyInt>() || q.is_instance_of::<PyBool>() {
                return Err(Refused);
            }
            let id: i64 = q.extract()?;
            if !(0..limits.queue_count).contains(&id) || limits.frozen.contains(&q)? {
                return Err(Refused);
            }
            (Some(q), id)
        }
    };
    // Keys: a str or a list of str, each non-empty without separators.
    let mut keys: Vec<Bound<'py, PyString>> = Vec::new();
    match key.filter(|k| !k.is_none()) {
        None => {}
        Some(k) if k.is_exact_instance_of::<PyString>() => {
            keys.push(k.cast_into::<PyString>().map_err(|_| Refused)?);
        }
        Some(k) if k.is_exact_instance_of::<PyList>() => {
            for one in k.cast::<PyList>().map_err(|_| Refused)?.iter() {
                if !one.is_exact_instance_of::<PyString>() {
                    return Err(Refused);
                }
                keys.push(one.cast_into::<PyString>().map_err(|_| Refused)?);
            }
        }
        Some(_) => return Err(Refused),
    }
    let mut keys_bytes = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let k = k.to_str()?;
        if k.is_empty() || !clean(k) {
            return Err(Refused);
        }
        if i > 0 {
            keys_bytes.push(KEY_SEPARATOR);
        }
        keys_bytes.extend_from_slice(k.as_bytes());
    }
    if keys_bytes.len() > MAX_KEYS_BYTES {
        return Err(Refused);
    }
    let tag_bytes = tag_of(tag.as_ref())?;
    let properties_bytes = properties_of(properties.as_ref())?;
    let length = limits.fixed
        + tag_bytes.len()
        + keys_bytes.len()
        + properties_bytes.len()
        + body.as_bytes().len();
    if length > limits.capacity {
        return Err(Refused);
    }
    let route = match keys.first() {
        Some(first) => Some(PyBytes::new(py, first.to_str()?.as_bytes())),
        None => None,
    };
    Ok(Prepared {
        queue,
        queue_id,
        route,
        fields: [
            PyBytes::new(py, tag_bytes),
            PyBytes::new(py, &keys_bytes),
            PyBytes::new(py, &properties_bytes),
            body,
        ],
        born: None,
        tag_hash: match tag_bytes.is_empty() {
            true => 0, // tags.tag_hash's for no tag
            false => limits.tag_hash(tag_bytes),
        },
        index_keys: PyTuple::new(py, &keys)?,
    })
}

/// A tag (None or Python's None: none) as `record.encode_tag` encodes it.
fn tag_of<'a>(tag: Option<&'a Bound<'_, PyAny>>) -> Result<&'a [u8], Refused> {
    match tag.filter(|t| !t.is_none()) {
        None => Ok(b""),
        Some(t) => {
            let t = text(t)?;
            if t.is_empty() || t.len() > MAX_TAG_BYTES || !clean(t) {
                return Err(Refused);
            }
            Ok(t.as_bytes())
        }
    }
}

/// Properties (None or Python's None: none) as `record.encode_properties` encodes them
/// (the reserved `DEDUP_ID` refused, as `Writer.prepare` refuses it).
fn properties_of(properties: Option<&Bound<'_, PyAny>>) -> Result<Vec<u8>, Refused> {
    let mut properties_bytes = Vec::new();
    match properties.filter(|p| !p.is_none()) {
        None => {}
        Some(p) if p.is_exact_instance_of::<PyDict>() => {
            for (i, (name, value)) in p.cast::<PyDict>().map_err(|_| Refused)?.iter().enumerate() {
                let (name, value) = (text(&name)?, text(&value)?);
                if name.is_empty() || !clean(name) || !clean(value) || name == DEDUP_PROPERTY {
                    return Err(Refused);
                }
                if i > 0 {
                    properties_bytes.push(PROPERTY_SEPARATOR);
                }
                properties_bytes.extend_from_slice(name.as_bytes());
                properties_bytes.push(NAME_VALUE_SEPARATOR);
                properties_bytes.extend_from_slice(value.as_bytes());
            }
        }
        Some(_) => return Err(Refused),
    }
    if properties_bytes.len() > MAX_PROPERTIES_BYTES {
        return Err(Refused);
    }
    Ok(properties_bytes)
}

thread_local! {
    /// The tags of this thread's single appends lately (`TAGS_KEPT`) and their hashes.
    static SINGLE_TAGS: RefCell<Vec<(Vec<u8>, u64)>> = const { RefCell::new(Vec::new()) };
}

/// A single append's tag and properties (None or Python's None: none) as
/// `Writer.prepare` checks and encodes them, and the tag's hash (`tags.tag_hash`); None
/// when it would refuse them (or they are not ones this call encodes).
pub(super) fn tag_and_properties<'a>(
    tag: Option<&'a Bound<'_, PyAny>>,
    properties: Option<&Bound<'_, PyAny>>,
) -> Option<(&'a [u8], Vec<u8>, u64)> {
    let tag = tag_of(tag).ok()?;
    let properties = properties_of(properties).ok()?;
    let hash = if tag.is_empty() {
        0
    } else {
        SINGLE_TAGS.with_borrow_mut(|kept| {
            if let Some((_, hash)) = kept.iter().find(|(bytes, _)| bytes.as_slice() == tag) {
                return *hash;
            }
            let hash = tag_hash(tag);
            if kept.len() >= TAGS_KEPT {
                kept.remove(0);
            }
            kept.push((tag.to_vec(), hash));
            hash
        })
    };
    Some((tag, properties, hash))
}

/// One `append`'s message (its arguments but the dedup id, which this leaves to
/// Python) prepared as `Writer.prepare` prepares it, to a topic of `queue_count` queues
/// (`frozen` of them frozen), `max_body`, `fixed` and `capacity` as `prepare_items`
/// takes them; None when `Writer.prepare` would refuse it or it is not one this call
/// prepares (the caller leaves it to the long way, which raises the typed error).
#[allow(clippy::too_many_arguments)]
pub(super) fn prepare_message<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    queue: Option<&Bound<'py, PyAny>>,
    key: Option<&Bound<'py, PyAny>>,
    tag: Option<&Bound<'py, PyAny>>,
    properties: Option<&Bound<'py, PyAny>>,
    limits: TopicLimits<'py>,
) -> Option<Bound<'py, PyTuple>> {
    let (queue_count, frozen, max_body, fixed, capacity) = limits;
    let limits = Limits {
        queue_count,
        frozen,
        max_body,
        fixed,
        capacity,
        message_type: None,
        tags: RefCell::new(Vec::new()),
        plain: None,
    };
    prepare_fields(
        py,
        body,
        queue.cloned(),
        key.cloned(),
        tag.cloned(),
        properties.cloned(),
        &limits,
    )
    .ok()?
    .into_tuple(py)
    .ok()
}

/// What `Writer.prepare` checks an item against: the topic's `queue_count` queues
/// (`frozen` of them frozen), its `max_body`, `fixed` (`RECORD_OVERHEAD` plus its
/// name's bytes) and a segment's `capacity`.
pub(super) type TopicLimits<'py> = (i64, Bound<'py, PyAny>, usize, usize, usize);

/// `items` (a list of `append_batch`'s items) prepared as `Writer.prepare` prepares
/// each, or None when any item is one this leaves to Python (see the module docs).
/// `message_type`: `results.Message` (an item of exactly that type without a dedup id is
/// prepared by its fields; without it, a `Message` is left to Python).
pub(super) fn prepare_all<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyList>,
    limits: TopicLimits<'py>,
    message_type: Option<Bound<'py, PyType>>,
) -> Option<Vec<Prepared<'py>>> {
    let (queue_count, frozen, max_body, fixed, capacity) = limits;
    let plain = Some(Plain::new(py, &frozen));
    let limits = Limits {
        queue_count,
        frozen,
        max_body,
        fixed,
        capacity,
        message_type,
        tags: RefCell::new(Vec::new()),
        plain,
    };
    let mut prepared = Vec::with_capacity(items.len());
    for item in items.iter() {
        prepared.push(match body_and_queue(&item, &limits) {
            Some(one) => one,
            None => prepare_one(py, &item, &limits).ok()?,
        });
    }
    Some(prepared)
}

/// `items` (a list of `append_batch`'s items) prepared as `Writer.prepare` prepares
/// each: `(queue, route key, tag, keys, properties, body, born time, tag hash, index keys,
/// None)`; None when any item is one this call leaves to Python (see the module docs).
/// `queue_count`, `frozen`: the topic's queues; `max_body`: its body limit; `fixed`:
/// `RECORD_OVERHEAD` plus its name's bytes; `capacity`: a segment's; `message_type`:
/// `results.Message` (an item of exactly that type without a dedup id is prepared by its
/// fields).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn prepare_items<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyList>,
    queue_count: i64,
    frozen: Bound<'py, PyAny>,
    max_body: usize,
    fixed: usize,
    capacity: usize,
    message_type: Bound<'py, PyType>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    let limits = (queue_count, frozen, max_body, fixed, capacity);
    let Some(prepared) = prepare_all(py, items, limits, Some(message_type)) else {
        return Ok(None);
    };
    let tuples = PyList::empty(py);
    for one in prepared {
        tuples.append(one.into_tuple(py)?)?;
    }
    Ok(Some(tuples))
}
