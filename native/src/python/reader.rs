//! Reads: a batch of consume-queue entries into StoredMessages, and one record by id.

use pyo3::ffi;
use pyo3::prelude::*;
use std::collections::HashMap;

use pyo3::types::{PyBytes, PyDict, PyFrozenSet, PyList, PyString, PyTuple, PyType};

use super::{check_record_type, detach_if, id_prefix, message_id, new_record, Bytes};
use crate::reader::{self, Stop, Wanted};
use crate::record::{self, Header, Parts};

/// Fill `messages` with the StoredMessages (of type `message_type`) of the entries from
/// index `start` of `entries` whose records lie in `segment` (its mapping; its first
/// byte is commit offset `base`), at most `max_messages`. Returns the index the walk
/// stopped at and why: 0 every entry looked at, 1 `max_messages` found, 2 the entry at
/// the index points outside the segment, 3 it must be checked the long way.
#[pyfunction]
#[pyo3(signature = (segment, base, entries, start, topic, topic_name, queue_id,
    first_queue_offset, prefix, wanted_hash, wanted_tag, max_messages, message_type, messages))]
#[allow(clippy::too_many_arguments)]
pub fn read_entries<'py>(
    py: Python<'py>,
    segment: &Bound<'py, PyAny>,
    base: u64,
    entries: &Bound<'py, PyBytes>,
    start: usize,
    topic: &Bound<'py, PyBytes>,
    topic_name: &Bound<'py, PyString>,
    queue_id: u32,
    first_queue_offset: u64,
    prefix: &str,
    wanted_hash: Option<u64>,
    wanted_tag: Option<&Bound<'py, PyBytes>>,
    max_messages: usize,
    message_type: &Bound<'py, PyType>,
    messages: &Bound<'py, PyList>,
) -> PyResult<(usize, u8)> {
    check_record_type(message_type)?;
    let prefix = id_prefix(prefix)?;
    let data = Bytes::of(segment)?;
    let data = data.slice();
    let entries = entries.as_bytes();
    let wanted = Wanted {
        topic: topic.as_bytes(),
        queue_id,
        first_queue_offset,
        tag: match (wanted_hash, wanted_tag) {
            (Some(hash), Some(tag)) => Some((hash, tag.as_bytes())),
            _ => None,
        },
        max_messages,
        asked: 0,
    };
    let mut found = Vec::with_capacity(max_messages.min(entries.len() / 20));
    // Records average at least the overhead; a batch of entries is that much work at least.
    let work = entries.len() / 20 * 64;
    let (next, stop) = detach_if(py, work, || {
        reader::read_entries(data, base, entries, start, &wanted, &mut found)
    });
    let mut shared = Shared::new(
        topic_name.clone().into_any(),
        queue_id.into_pyobject(py)?.into_any(),
        max_messages,
    );
    for item in &found {
        let record = &data[item.pos..item.pos + item.header.length as usize];
        match stored_message(py, message_type, &prefix, &mut shared, record, &item.header) {
            Some(message) => messages.append(message?)?,
            None => return Ok((item.entry, code(Stop::Slow))),
        }
    }
    Ok((next, code(stop)))
}

fn code(stop: Stop) -> u8 {
    match stop {
        Stop::End => 0,
        Stop::Full => 1,
        Stop::Outside => 2,
        Stop::Slow => 3,
    }
}

/// A body is copied past the caches (`stream::copy_past_cache`) when the answer it goes
/// into may hold at least this many bytes of bodies: more than the CPU's second-level
/// cache, so the lines it lands on were last used an answer ago, not a few messages ago.
const PAST_CACHE_BYTES: usize = 4 << 20;
/// Bodies shorter than this are copied as usual: a few lines, mostly partial.
const STREAMED_BODY: usize = 256;

/// What the messages of one read share, made once: the topic, the queue id, and the
/// last store time (a batch's records share one, and born = store unless given); and
/// how many messages the answer may hold (`max_messages`), which decides how bodies are
/// copied.
pub(super) struct Shared<'py> {
    topic: Bound<'py, PyAny>,
    queue: Bound<'py, PyAny>,
    time: Option<(i64, Bound<'py, PyAny>)>,
    held: usize,
    streamed: bool,
    recent: Recent<'py>,
}

/// Once a read's messages are made, before they are handed back (whichever way the read
/// ends): the bodies copied past the caches are ordered before anything this thread
/// stores next (`stream::fence`), so a thread that sees a message sees its body.
impl Drop for Shared<'_> {
    fn drop(&mut self) {
        if self.streamed {
            crate::stream::fence();
        }
    }
}

impl<'py> Shared<'py> {
    pub(super) fn new(
        topic: Bound<'py, PyAny>,
        queue: Bound<'py, PyAny>,
        held: usize,
    ) -> Shared<'py> {
        Shared {
            topic,
            queue,
            time: None,
            held,
            streamed: false,
            recent: Recent::default(),
        }
    }

    /// The bytes object of `body`: copied past the caches when the answer may hold more
    /// bodies of its size than the caches do.
    fn body(&mut self, py: Python<'py>, body: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        if body.len() < STREAMED_BODY || self.held.saturating_mul(body.len()) < PAST_CACHE_BYTES {
            return Ok(super::bytes_of(py, body));
        }
        self.streamed = true;
        // SAFETY: the GIL is held. PyBytes_FromStringAndSize(NULL, n) makes a new bytes
        // object of n bytes not yet written (or NULL with an exception set); nobody else
        // holds it, so its n data bytes (PyBytes_AsString) are ours to write until it is
        // returned, and every one of them is written by the copy.
        unsafe {
            let object =
                ffi::PyBytes_FromStringAndSize(std::ptr::null(), body.len() as ffi::Py_ssize_t);
            if object.is_null() {
                return Err(PyErr::fetch(py));
            }
            let data = ffi::PyBytes_AsString(object).cast::<u8>();
            let object = Bound::from_owned_ptr(py, object);
            if data.is_null() {
                return Err(PyErr::fetch(py));
            }
            crate::stream::copy_past_cache(std::slice::from_raw_parts_mut(data, body.len()), body);
            Ok(object)
        }
    }

    fn time(&mut self, py: Python<'py>, ms: i64) -> PyResult<Bound<'py, PyAny>> {
        match &self.time {
            Some((value, object)) if *value == ms => Ok(object.clone()),
            _ => {
                let object = match u64::try_from(ms) {
                    Ok(ms) => super::int_of(py, ms)?,
                    Err(_) => ms.into_pyobject(py)?.into_any(),
                };
                self.time = Some((ms, object.clone()));
                Ok(object)
            }
        }
    }
}

/// The StoredMessage of an intact record; None when its text is not what a writer
/// writes (not UTF-8, a property without a value), which the long way reports as Python
/// does.
pub(super) fn stored_message<'py>(
    py: Python<'py>,
    message_type: &Bound<'py, PyType>,
    prefix: &[u8; 8],
    shared: &mut Shared<'py>,
    record: &[u8],
    header: &Header,
) -> Option<PyResult<Bound<'py, PyAny>>> {
    let parts = Parts::of(record, header);
    let extras = Extras::with(py, &parts, Some(&mut shared.recent))?;
    let build = || -> PyResult<Bound<'py, PyAny>> {
        let born = shared.time(py, header.born_ms)?;
        // Born is the store time unless the producer gave one: the same int then.
        let store = if header.store_ms == header.born_ms {
            born.clone()
        } else {
            shared.time(py, header.store_ms)?
        };
        new_record(
            py,
            message_type,
            [
                message_id(py, prefix, header.commit_offset).into_any(),
                shared.topic.clone(),
                shared.queue.clone(),
                super::int_of(py, header.queue_offset)?,
                super::int_of(py, header.commit_offset)?,
                born,
                store,
                extras.tag,
                extras.keys,
                extras.properties,
                shared.body(py, parts.body)?,
            ],
        )
    };
    Some(build())
}

pub(super) struct Extras<'py> {
    tag: Bound<'py, PyAny>,
    keys: Bound<'py, PyAny>,
    properties: Bound<'py, PyAny>,
}

impl<'py> Extras<'py> {
    pub(super) fn of(py: Python<'py>, parts: &Parts<'_>) -> Option<Extras<'py>> {
        Extras::with(py, parts, None)
    }

    /// The extras of `parts`, taking the tag and each property's name and value from
    /// `recent` (the texts of the record made before) where the bytes are the same.
    fn with(
        py: Python<'py>,
        parts: &Parts<'_>,
        mut recent: Option<&mut Recent<'py>>,
    ) -> Option<Extras<'py>> {
        let mut text = |slot: usize, bytes: &[u8]| match recent.as_deref_mut() {
            Some(recent) => recent.text(py, slot, bytes),
            None => Some(PyString::new(py, std::str::from_utf8(bytes).ok()?)),
        };
        let tag = if parts.tag.is_empty() {
            py.None().into_bound(py)
        } else {
            text(0, parts.tag)?.into_any()
        };
        let keys = if parts.keys.is_empty() {
            super::empty_list(py) // untracked, uncounted
        } else {
            let keys = text_list(py, std::str::from_utf8(parts.keys).ok()?, '\u{1f}').ok()?;
            super::untrack(&keys); // strings only (the dict of strings is never tracked)
            keys
        };
        let properties = super::new_dict(py); // untracked, uncounted
        if !parts.properties.is_empty() {
            std::str::from_utf8(parts.properties).ok()?;
            for (n, item) in parts.properties.split(|&b| b == 0x02).enumerate() {
                let at = item.iter().position(|&b| b == 0x01)?;
                let name = text(1 + 2 * n, &item[..at])?;
                let value = text(2 + 2 * n, &item[at + 1..])?;
                properties.set_item(name, value).ok()?;
            }
        }
        Some(Extras {
            tag,
            keys: keys.into_any(),
            properties: properties.into_any(),
        })
    }
}

/// How many texts of a record `Recent` keeps: its tag and its first properties' names
/// and values.
const RECENT_TEXTS: usize = 33;

/// The tag and the properties' names and values of the last record a read made, as
/// strings, by their place in the record (0 the tag, 1 and 2 the first property's name
/// and value, ...): a queue's records mostly repeat them, so a message takes the same
/// string objects as the one before instead of new ones (less to make, to hash as a
/// dict key, to hold and to free). Equal bytes are equal text, so what the message
/// holds is the same.
#[derive(Default)]
pub(super) struct Recent<'py> {
    texts: Vec<(Vec<u8>, Option<Bound<'py, PyString>>)>,
}

impl<'py> Recent<'py> {
    /// The string of `bytes` (UTF-8) at place `slot`: the one kept there when its bytes
    /// are the same, else a new one, kept. None when `bytes` is not UTF-8.
    fn text(&mut self, py: Python<'py>, slot: usize, bytes: &[u8]) -> Option<Bound<'py, PyString>> {
        if slot >= RECENT_TEXTS {
            return Some(PyString::new(py, std::str::from_utf8(bytes).ok()?));
        }
        if self.texts.len() <= slot {
            self.texts.resize_with(slot + 1, || (Vec::new(), None));
        }
        let (kept, object) = &mut self.texts[slot];
        if let Some(object) = object.as_ref().filter(|_| kept.as_slice() == bytes) {
            return Some(object.clone());
        }
        let made = PyString::new(py, std::str::from_utf8(bytes).ok()?);
        kept.clear();
        kept.extend_from_slice(bytes);
        *object = Some(made.clone());
        Some(made)
    }
}

/// The list of the parts of `text` split at `separator`, made at its length (a list
/// appended to one by one keeps room for more).
fn text_list<'py>(py: Python<'py>, text: &str, separator: char) -> PyResult<Bound<'py, PyList>> {
    let count = text.matches(separator).count() + 1;
    // SAFETY: the GIL is held. PyList_New(n) makes a list of n empty slots (or NULL with
    // an exception set); each slot is filled exactly once below, in order, with a new
    // reference that PyList_SET_ITEM steals, before the list is used: `split` yields
    // exactly `count` parts (one more than the separators counted).
    unsafe {
        let list = ffi::PyList_New(count as ffi::Py_ssize_t);
        if list.is_null() {
            return Err(PyErr::fetch(py));
        }
        let list = Bound::from_owned_ptr(py, list);
        for (i, part) in text.split(separator).enumerate().take(count) {
            ffi::PyList_SET_ITEM(
                list.as_ptr(),
                i as ffi::Py_ssize_t,
                PyString::new(py, part).into_ptr(),
            );
        }
        Ok(list.cast_into_unchecked())
    }
}

/// The StoredMessage of the intact record at in-segment `pos` of `segment`, which must
/// say it lives at `commit_offset` (and be `expected_length` bytes long, unless 0), with
/// id `message_id`; None for anything else: the long way says what is wrong.
#[pyfunction]
#[pyo3(signature = (segment, pos, commit_offset, message_id, expected_length, message_type))]
pub fn decode_at<'py>(
    py: Python<'py>,
    segment: &Bound<'py, PyAny>,
    pos: usize,
    commit_offset: u64,
    message_id: &Bound<'py, PyString>,
    expected_length: u32,
    message_type: &Bound<'py, PyType>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    check_record_type(message_type)?;
    let data = Bytes::of(segment)?;
    let data = data.slice();
    let header = match record::check(data, pos, commit_offset) {
        Ok(header) if expected_length == 0 || header.length == expected_length => header,
        _ => return Ok(None),
    };
    let record = &data[pos..pos + header.length as usize];
    let parts = Parts::of(record, &header);
    let Ok(topic) = std::str::from_utf8(parts.topic) else {
        return Ok(None);
    };
    let Some(extras) = Extras::of(py, &parts) else {
        return Ok(None);
    };
    let topic = PyString::new(py, topic).into_any();
    let id = message_id.clone().into_any();
    let body = PyBytes::new(py, parts.body).into_any();
    checked_message(py, message_type, id, topic, &header, extras, body).map(Some)
}

/// The `message_type` (a StoredMessage) of a checked record: its id, topic and body (a
/// bytes object) as given, the rest from its header and its extras.
pub(super) fn checked_message<'py>(
    py: Python<'py>,
    message_type: &Bound<'py, PyType>,
    id: Bound<'py, PyAny>,
    topic: Bound<'py, PyAny>,
    header: &Header,
    extras: Extras<'py>,
    body: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    // A message born where it was stored (no born time given: the most common) holds
    // one int for both times, as a read's messages share theirs (`Shared::time`).
    let born = header.born_ms.into_pyobject(py)?.into_any();
    let store = if header.store_ms == header.born_ms {
        born.clone()
    } else {
        header.store_ms.into_pyobject(py)?.into_any()
    };
    new_record(
        py,
        message_type,
        [
            id,
            topic,
            header.queue_id.into_pyobject(py)?.into_any(),
            header.queue_offset.into_pyobject(py)?.into_any(),
            header.commit_offset.into_pyobject(py)?.into_any(),
            born,
            store,
            extras.tag,
            extras.keys,
            extras.properties,
            body,
        ],
    )
}

/// The commit offset of `message_id` when it is one of this store's ids as the store
/// writes them (`prefix`, then 16 upper-case hex digits); None for anything else, which
/// `message_id.parse_message_id` then judges.
#[pyfunction]
pub fn canonical_offset(message_id: &Bound<'_, PyAny>, prefix: &str) -> Option<u64> {
    let text = message_id.cast::<PyString>().ok()?.to_str().ok()?;
    let digits = text.strip_prefix(prefix).filter(|_| prefix.len() == 8)?;
    if digits.len() != 16
        || !digits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
    {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// The check of the record at in-segment `pos` (`record.check_record`): its header as a
/// 13-tuple, or the reason it is not intact (a str).
#[pyfunction]
pub fn check_at<'py>(
    py: Python<'py>,
    segment: &Bound<'py, PyAny>,
    pos: usize,
    commit_offset: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let data = Bytes::of(segment)?;
    match record::check(data.slice(), pos, commit_offset) {
        Ok(header) => Ok(super::scan::header_tuple(py, &header)?.into_any()),
        Err(damage) => Ok(PyString::new(py, &damage.to_string()).into_any()),
    }
}

/// What `read_members` stopped at: `stop` (or the segment's end) reached, `max_messages`
/// found, or a position the caller reads the long way (bad bytes, an end-of-segment
/// marker, a record whose CRC or text fails), which says what is there.
const MEMBERS_END: u8 = 0;
const MEMBERS_FULL: u8 = 1;
const MEMBERS_SLOW: u8 = 2;

/// A topic a read wants, as `read_members` looks it up once per call.
struct WantedTopic<'py> {
    queues: u32,
    starts: Bound<'py, PyTuple>,
    name: Bound<'py, PyAny>,
    /// The name as bytes: the key of the per-queue offset bounds.
    key: Bound<'py, PyAny>,
}

/// Queue-offset bounds of a read: every queue's `[low, high)`, and some queues' own.
struct OffsetBounds<'py> {
    low: Option<u64>,
    high: Option<u64>,
    starts: Bound<'py, PyDict>,
    ends: Bound<'py, PyDict>,
}

impl<'py> OffsetBounds<'py> {
    fn of(offsets: &Bound<'py, PyTuple>) -> PyResult<OffsetBounds<'py>> {
        let (low, high, starts, ends) = offsets.extract()?;
        Ok(OffsetBounds {
            low,
            high,
            starts,
            ends,
        })
    }

    fn keep(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyAny>,
        queue_id: u32,
        queue_offset: u64,
    ) -> PyResult<bool> {
        if self.low.is_some_and(|low| queue_offset < low)
            || self.high.is_some_and(|high| queue_offset >= high)
        {
            return Ok(false);
        }
        if self.starts.is_empty() && self.ends.is_empty() {
            return Ok(true);
        }
        let key = PyTuple::new(py, [topic.clone(), queue_id.into_pyobject(py)?.into_any()])?;
        if let Some(first) = self.starts.get_item(&key)? {
            if queue_offset < first.extract::<u64>()? {
                return Ok(false);
            }
        }
        match self.ends.get_item(&key)? {
            Some(end) => Ok(queue_offset < end.extract::<u64>()?),
            None => Ok(true),
        }
    }
}

/// The Spark reader's walk over a range of a segment (`spark.scanning.scan_range`), for
/// as long as every record is intact: from in-segment `pos` of `segment` (its mapping,
/// commit offset `base` first), records starting before `stop`. A record is a *member*
/// when it is of a topic of `topics` (name → (queue count, per-queue first commit
/// offsets)) and of a queue below that count whose first offset it is not below, and in
/// `queues` when given; a member whose store time is in `[since_ms, until_ms)` and
/// whose queue offset is within `offsets` (when given: the filter's `(min_queue_offset,
/// max_queue_offset, queue_starts, queue_ends)`, as `scanning._offset_kept` reads them)
/// is CRC-checked and appended to `messages` as a `message_type`; other records are
/// passed over by their frame. Returns (position reached, members, records passed over,
/// why it stopped: 0 `stop` reached, 1 `max_messages` found, 2 the record at the
/// position must be read the long way).
#[pyfunction]
#[pyo3(signature = (segment, pos, stop, base, topics, queues, since_ms, until_ms, offsets,
    prefix, max_messages, message_type, messages))]
#[allow(clippy::too_many_arguments)]
pub fn read_members<'py>(
    py: Python<'py>,
    segment: &Bound<'py, PyAny>,
    mut pos: usize,
    stop: usize,
    base: u64,
    topics: &Bound<'py, PyDict>,
    queues: Option<&Bound<'py, PyFrozenSet>>,
    since_ms: Option<i64>,
    until_ms: Option<i64>,
    offsets: Option<&Bound<'py, PyTuple>>,
    prefix: &str,
    max_messages: usize,
    message_type: &Bound<'py, PyType>,
    messages: &Bound<'py, PyList>,
) -> PyResult<(usize, usize, usize, u8)> {
    let bounds = offsets.map(OffsetBounds::of).transpose()?;
    check_record_type(message_type)?;
    let prefix = id_prefix(prefix)?;
    let data = Bytes::of(segment)?;
    let data = data.slice();
    let size = data.len();
    let mut wanted: HashMap<&[u8], Option<WantedTopic<'py>>> = HashMap::new();
    let (mut members, mut passed, mut found) = (0usize, 0usize, 0usize);
    while pos < stop && pos + record::MARKER_SIZE <= size {
        let offset = base + pos as u64;
        let Some(header) = record::framed_at(data, pos, offset) else {
            return Ok((pos, members, passed, MEMBERS_SLOW));
        };
        let end = pos + header.length as usize;
        let name_at = pos + record::HEADER_SIZE;
        let name = &data[name_at..name_at + usize::from(header.topic_len)];
        if !wanted.contains_key(name) {
            let topic = match topics.get_item(PyBytes::new(py, name))? {
                None => None,
                Some(entry) => {
                    let (queues, starts): (u32, Bound<'py, PyTuple>) = entry.extract()?;
                    let Ok(text) = std::str::from_utf8(name) else {
                        return Ok((pos, members, passed, MEMBERS_SLOW));
                    };
                    let key = PyBytes::new(py, name).into_any();
                    let name = PyString::new(py, text).into_any();
                    Some(WantedTopic {
                        queues,
                        starts,
                        name,
                        key,
                    })
                }
            };
            wanted.insert(name, topic);
        }
        let member = match &wanted[name] {
            Some(topic) if header.queue_id < topic.queues => {
                let first: u64 = topic.starts.get_item(header.queue_id as usize)?.extract()?;
                let in_queues = match queues {
                    Some(queues) => queues.contains(header.queue_id)?,
                    None => true,
                };
                (offset >= first && in_queues).then_some(topic)
            }
            _ => None,
        };
        let Some(topic) = member else {
            passed += 1;
            pos = end;
            continue;
        };
        members += 1;
        let offset_kept = match &bounds {
            Some(bounds) => bounds.keep(py, &topic.key, header.queue_id, header.queue_offset)?,
            None => true,
        };
        if since_ms.is_some_and(|since| header.store_ms < since)
            || until_ms.is_some_and(|until| header.store_ms >= until)
            || !offset_kept
        {
            passed += 1;
            pos = end;
            continue;
        }
        let record = &data[pos..end];
        let extras = match record::check(data, pos, offset) {
            Ok(_) => Extras::of(py, &Parts::of(record, &header)),
            Err(_) => None,
        };
        let Some(extras) = extras else {
            return Ok((pos, members - 1, passed, MEMBERS_SLOW));
        };
        let id = message_id(py, &prefix, offset).into_any();
        let body = PyBytes::new(py, Parts::of(record, &header).body).into_any();
        let message = checked_message(
            py,
            message_type,
            id,
            topic.name.clone(),
            &header,
            extras,
            body,
        )?;
        messages.append(message)?;
        found += 1;
        pos = end;
        if found >= max_messages {
            return Ok((pos, members, passed, MEMBERS_FULL));
        }
    }
    Ok((pos, members, passed, MEMBERS_END))
}
