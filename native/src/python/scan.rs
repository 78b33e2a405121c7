//! The recovery and log scans: a segment's events, runs of intact records packed into
//! consume-queue entries per queue.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::block_index::BlockIndex;
use super::Bytes;
use crate::consume_queue::{Entry, ENTRY_SIZE};
use crate::record::Header;
use crate::scan::{self, Event};

/// The events of `segment` (its mapping; its first byte is commit offset `base`) from
/// in-segment `start` on, up to and including the first run: a list of
/// `(kind, offset, length, reason, run)` and where to go on from (None once the scan is
/// over). Kinds are those of `scan.ScanEvent`; a run's is "native_run", with a `Run`.
///
/// Every run is read from the mapping, whatever its records' size: the first touch's
/// faults map up to 16 pages each (the kernel's fault-around) and copy nothing, which
/// cost less CPU than one `pread` of each run into a kept buffer, on a store filled just
/// before and more on an older one whose page cache holds 4 KiB folios (measured, issue
/// 29 part 6 in docs/PERFORMANCE.md).
#[pyfunction]
#[pyo3(signature = (segment, base, start, sealed, durable_end, run_bytes=scan::RUN_BYTES))]
pub fn scan_step<'py>(
    py: Python<'py>,
    segment: &Bound<'py, PyAny>,
    base: u64,
    start: usize,
    sealed: bool,
    durable_end: u64,
    run_bytes: usize,
) -> PyResult<(Bound<'py, PyList>, Option<usize>)> {
    let data = Bytes::of(segment)?;
    let data = data.slice();
    let (events, next) =
        py.detach(|| scan::scan_step(data, base, start, sealed, durable_end, run_bytes));
    let out = PyList::empty(py);
    for event in events {
        let item = match event {
            Event::Run(run) => {
                let (offset, length) = (run.offset, run.length);
                let run = Bound::new(py, Run { run })?;
                (
                    "native_run",
                    offset,
                    length,
                    String::new(),
                    Some(run.into_any()),
                )
            }
            Event::Corrupt {
                offset,
                length,
                reason,
            } => ("corrupt", offset, length, reason, None),
            Event::EndOfSegment { offset, length } => {
                ("end_of_segment", offset, length, String::new(), None)
            }
            Event::Tail { offset } => ("tail", offset, 0, String::new(), None),
            Event::GarbageTail {
                offset,
                length,
                reason,
            } => ("garbage_tail", offset, length, reason, None),
        };
        out.append(item)?;
    }
    Ok((out, next))
}

/// Consecutive intact records of a segment, as a scan found them.
#[pyclass(frozen, module = "storeadapter.engine._native")]
pub struct Run {
    run: scan::Run,
}

pub(crate) fn header_tuple<'py>(py: Python<'py>, h: &Header) -> PyResult<Bound<'py, PyTuple>> {
    let items: [Bound<'py, PyAny>; 13] = [
        h.length.into_pyobject(py)?.into_any(),
        h.magic.into_pyobject(py)?.into_any(),
        h.commit_offset.into_pyobject(py)?.into_any(),
        h.queue_offset.into_pyobject(py)?.into_any(),
        h.born_ms.into_pyobject(py)?.into_any(),
        h.store_ms.into_pyobject(py)?.into_any(),
        h.queue_id.into_pyobject(py)?.into_any(),
        h.body_len.into_pyobject(py)?.into_any(),
        h.flags.into_pyobject(py)?.into_any(),
        h.topic_len.into_pyobject(py)?.into_any(),
        h.tag_len.into_pyobject(py)?.into_any(),
        h.keys_len.into_pyobject(py)?.into_any(),
        h.props_len.into_pyobject(py)?.into_any(),
    ];
    PyTuple::new(py, items)
}

#[pymethods]
impl Run {
    /// How many records.
    #[getter]
    fn count(&self) -> usize {
        self.run.headers.len()
    }

    /// The records' header tuples (as `record.HEADER` unpacks them), in log order.
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for header in &self.run.headers {
            out.append(header_tuple(py, header)?)?;
        }
        Ok(out)
    }

    /// The events among the records of `topics` (a list of topic names' bytes), in log
    /// order: `(commit offset, position of its topic in topics, queue id, stream id,
    /// version, command id or None, stream hash, command hash or 0)` of each record whose
    /// properties make it an event (`eventrecords.event_of`, done natively over the
    /// properties the scan kept; the hashes as `eventindex` stores them).
    fn events<'py>(&self, py: Python<'py>, topics: Vec<Vec<u8>>) -> PyResult<Bound<'py, PyList>> {
        let wanted: Vec<Option<usize>> = self
            .run
            .topics
            .iter()
            .map(|topic| topics.iter().position(|t| t == topic))
            .collect();
        let out = PyList::empty(py);
        for (record, _keys, properties) in &self.run.extras {
            let Some(position) = wanted[self.run.topic_of[*record] as usize] else {
                continue;
            };
            let Some(event) = crate::events::event_fields(properties) else {
                continue;
            };
            let header = &self.run.headers[*record];
            let (command, command_hash) = match event.command_id {
                Some(command) => (
                    PyString::new(py, text(command)?).into_any(),
                    crate::events::command_hash(event.stream_id, command),
                ),
                None => (py.None().into_bound(py), 0),
            };
            out.append((
                header.commit_offset,
                position,
                header.queue_id,
                PyString::new(py, text(event.stream_id)?),
                event.version,
                command,
                crate::events::stream_hash(event.stream_id),
                command_hash,
            ))?;
        }
        Ok(out)
    }

    /// How many queues the records went to (the length of `queues()`).
    #[getter]
    fn group_count(&self) -> usize {
        self.run.groups.len()
    }

    /// The (topic bytes, queue id) of each queue the records went to, in the order met;
    /// of those at `groups` only (positions in that order) when given.
    #[pyo3(signature = (groups=None))]
    fn queues<'py>(
        &self,
        py: Python<'py>,
        groups: Option<Vec<usize>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for group in self.chosen(groups.as_deref())? {
            let topic = PyBytes::new(py, &self.run.topics[group.topic as usize]);
            out.append((topic, group.queue_id))?;
        }
        Ok(out)
    }

    /// Per queue of `queues()`, given the commit offset from which its records count
    /// (None: the queue is not dispatched to): None, or `(first queue offset, the queue
    /// offsets when they do not follow on, packed entries, time marks, newest store time)`
    /// with a mark `(queue offset, store ms)` for each queue offset that is a multiple of
    /// `interval`. Also the key-index items `(topic, key, commit offset, store ms)` of the
    /// dispatched records at or past `index_from` (none when it is None), in log order:
    /// each key, and `dedup_prefix + value` for a `dedup_property` property. With
    /// `groups`, of the queues at those positions only (as `queues(groups)`).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (sinces, interval, index_from, dedup_property, dedup_prefix, groups=None))]
    fn pack<'py>(
        &self,
        py: Python<'py>,
        sinces: Vec<Option<u64>>,
        interval: u64,
        index_from: Option<u64>,
        dedup_property: &str,
        dedup_prefix: &str,
        groups: Option<Vec<usize>>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        let groups = self.chosen(groups.as_deref())?;
        if sinces.len() != groups.len() || interval == 0 {
            return Err(PyValueError::new_err(
                "one since offset per queue, and an interval",
            ));
        }
        let out = PyList::empty(py);
        // Only records with keys or properties give key-index items: a run without any
        // (the common case) gathers and sorts nothing.
        let index_from = index_from.filter(|_| !self.run.extras.is_empty());
        let mut indexed: Vec<usize> = Vec::new();
        for (group, since) in groups.into_iter().zip(sinces) {
            let packed = since.and_then(|since| self.run.pack(&group.records, since, interval));
            let Some(packed) = packed else {
                out.append(py.None())?;
                continue;
            };
            if index_from.is_some() {
                indexed.extend(packed.records.iter().copied());
            }
            out.append((
                packed.first_queue_offset,
                packed.offsets,
                PyBytes::new(py, &packed.entries),
                marks(py, &packed.marks, interval)?,
                packed.max_store_ms,
            ))?;
        }
        let items = PyList::empty(py);
        if let Some(index_from) = index_from {
            indexed.sort_unstable();
            let mut extras = self.run.extras.iter().peekable();
            for record in indexed {
                while extras.next_if(|e| e.0 < record).is_some() {}
                let Some((_, keys, properties)) = extras.next_if(|e| e.0 == record) else {
                    continue;
                };
                let header = &self.run.headers[record];
                if header.commit_offset < index_from {
                    continue;
                }
                let topic = text(&self.run.topics[self.run.topic_of[record] as usize])?;
                let topic = PyString::new(py, topic);
                let at = (header.commit_offset, header.store_ms);
                if !keys.is_empty() {
                    for key in text(keys)?.split('\u{1f}') {
                        items.append((&topic, key, at.0, at.1))?;
                    }
                }
                if !properties.is_empty() {
                    for item in text(properties)?.split('\u{2}') {
                        let (name, value) = item.split_once('\u{1}').unwrap_or((item, ""));
                        if name == dedup_property {
                            items.append((&topic, format!("{dedup_prefix}{value}"), at.0, at.1))?;
                        }
                    }
                }
            }
        }
        Ok((out, items))
    }

    /// Recovery's replay of a shared topic's queues (recovery.py `_Gatherer`): the
    /// groups (positions in `queues()`) of the records of `topic` (a shared topic of
    /// `queues` queues, created at commit offset `created`; a queue's records count from
    /// `max(created, queue_since[queue])`, `TopicInfo.since`) whose entries are all in
    /// place already in the topic's block files (`index`, its `BlockIndex`; `files`,
    /// `(first block, descriptor)` of each block file) are taken here, read and compared,
    /// nothing written; any other is left to the long way (`pack`, then
    /// `QueueDispatch`), which writes and allocates. Entries below the queue's first block
    /// (below its minimum offset) are passed over, as `QueueDispatch._replay` does.
    ///
    /// A group is left when: its queue is in `pending` (entries gathered for the long way
    /// already: its writes keep their order) or past `queues`; a record of it has keys or
    /// properties (key-index items); its queue has no blocks; an entry's block is not
    /// known; an entry differs from what the file holds (a power loss, a torn or a dead
    /// writer's block); a read fails or is short.
    ///
    /// Returns the groups taken, how many records they hold, their newest store time
    /// (i64::MIN when none) and the first blocks of the files read (whose pages the next
    /// flush must fsync: a writer killed before its flush left them in the page cache).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (topic, queues, created, queue_since, pending, index, files, per_block, per_file, block_bytes))]
    fn replay_blocks(
        &self,
        topic: &[u8],
        queues: u32,
        created: u64,
        queue_since: Vec<u64>,
        pending: Vec<u32>,
        index: &Bound<'_, BlockIndex>,
        files: Vec<(u64, i32)>,
        per_block: u64,
        per_file: u64,
        block_bytes: u64,
    ) -> PyResult<(Vec<usize>, usize, i64, Vec<u64>)> {
        if per_block == 0
            || per_file == 0
            || block_bytes != BLOCK_HEADER as u64 + per_block * ENTRY_SIZE as u64
        {
            return Err(PyValueError::new_err("a block store's shape"));
        }
        let Some(topic) = self.run.topics.iter().position(|t| t == topic) else {
            return Ok((Vec::new(), 0, i64::MIN, Vec::new()));
        };
        let pending: std::collections::HashSet<u32> = pending.into_iter().collect();
        let (groups, sinces): (Vec<usize>, Vec<u64>) = self
            .run
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| {
                g.topic as usize == topic && g.queue_id < queues && !pending.contains(&g.queue_id)
            })
            .map(|(at, g)| {
                let since = queue_since
                    .get(g.queue_id as usize)
                    .map_or(created, |&s| s.max(created));
                (at, since)
            })
            .unzip();
        let run = &self.run;
        let index = index.get().lock();
        let mut taken = Vec::with_capacity(groups.len());
        let mut records = 0usize;
        let mut newest = i64::MIN;
        let mut touched: Vec<u64> = Vec::new();
        let mut want: Vec<u8> = Vec::new();
        let mut found: Vec<u8> = Vec::new();
        let mut kept: Vec<usize> = Vec::new();
        'groups: for (&g, &since) in groups.iter().zip(&sinces) {
            let Some(group) = run.groups.get(g) else {
                return Err(PyValueError::new_err("no such group"));
            };
            kept.clear();
            kept.extend(
                group
                    .records
                    .iter()
                    .copied()
                    .filter(|&i| run.headers[i].commit_offset >= since),
            );
            if kept.is_empty() {
                taken.push(g); // nothing of it counts: the long way packs nothing either
                continue;
            }
            if kept
                .iter()
                .any(|i| run.extras.binary_search_by_key(i, |e| e.0).is_ok())
            {
                continue;
            }
            let queue = group.queue_id;
            let Some((first_seq, _)) = index.seq_range(queue) else {
                continue;
            };
            let min_offset = first_seq * per_block;
            want.clear();
            for &i in &kept {
                let header = &run.headers[i];
                Entry {
                    commit_offset: header.commit_offset,
                    size: header.length,
                    tag_hash: run.tag_hashes[i],
                }
                .pack_unchecked_into(&mut want);
            }
            crate::crc::seal_checks(&mut want, ENTRY_SIZE);
            let mut files_read: Vec<u64> = Vec::new();
            let mut j = 0;
            while j < kept.len() {
                let queue_offset = run.headers[kept[j]].queue_offset;
                if queue_offset < min_offset {
                    j += 1;
                    continue;
                }
                let (seq, slot) = (queue_offset / per_block, queue_offset % per_block);
                let Some(block) = index.get(queue, seq) else {
                    continue 'groups;
                };
                // The records of this block whose queue offsets follow on: one read.
                let mut n = 1;
                while j + n < kept.len()
                    && slot + (n as u64) < per_block
                    && run.headers[kept[j + n]].queue_offset == queue_offset + n as u64
                {
                    n += 1;
                }
                let first = block - block % per_file;
                let Some(&(_, fd)) = files.iter().find(|f| f.0 == first) else {
                    continue 'groups;
                };
                let at =
                    (block - first) * block_bytes + BLOCK_HEADER as u64 + slot * ENTRY_SIZE as u64;
                let length = n * ENTRY_SIZE;
                found.resize(length, 0);
                if !read_exactly(fd, &mut found, at)
                    || found[..] != want[j * ENTRY_SIZE..(j + n) * ENTRY_SIZE]
                {
                    continue 'groups;
                }
                if !files_read.contains(&first) {
                    files_read.push(first);
                }
                j += n;
            }
            taken.push(g);
            records += kept.len();
            for &i in &kept {
                newest = newest.max(run.headers[i].store_ms);
            }
            for first in files_read {
                if !touched.contains(&first) {
                    touched.push(first);
                }
            }
        }
        Ok((taken, records, newest, touched))
    }
}

/// blockqueue.BLOCK_HEADER_SIZE: queue u32, seq u64, crc32c u32.
const BLOCK_HEADER: usize = 16;

/// `buf.len()` bytes of `fd` from `at`; false when a read fails or the file ends first.
pub(super) fn read_exactly(fd: i32, buf: &mut [u8], at: u64) -> bool {
    let mut done = 0;
    while done < buf.len() {
        let Ok(position) = libc::off_t::try_from(at + done as u64) else {
            return false;
        };
        // SAFETY: `buf[done..]` is valid for writes of its length; `fd` is a descriptor
        // the caller holds open (a `BlockFile`'s) for the call's duration.
        let got = unsafe {
            libc::pread(
                fd,
                buf[done..].as_mut_ptr().cast(),
                buf.len() - done,
                position,
            )
        };
        if got <= 0 {
            if got < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            }
            return false;
        }
        done += got as usize;
    }
    true
}

impl Run {
    /// The groups at `positions` (all when None), in that order.
    fn chosen(&self, positions: Option<&[usize]>) -> PyResult<Vec<&scan::Group>> {
        match positions {
            None => Ok(self.run.groups.iter().collect()),
            Some(positions) => positions
                .iter()
                .map(|&at| {
                    self.run
                        .groups
                        .get(at)
                        .ok_or_else(|| PyValueError::new_err("no such group"))
                })
                .collect(),
        }
    }
}

/// Time marks as `(first queue offset, the marks packed as in the time index file)` when
/// they fill consecutive slots (a queue's run of offsets), else a list of
/// `(queue offset, store ms)`.
fn marks<'py>(py: Python<'py>, marks: &[(u64, i64)], interval: u64) -> PyResult<Bound<'py, PyAny>> {
    let consecutive = marks
        .windows(2)
        .all(|pair| pair[1].0 == pair[0].0 + interval);
    if marks.is_empty() || !consecutive {
        return Ok(marks.into_pyobject(py)?.into_any());
    }
    let mut packed = Vec::with_capacity(marks.len() * 16);
    for &(queue_offset, store_ms) in marks {
        packed.extend_from_slice(&(queue_offset + 1).to_le_bytes());
        packed.extend_from_slice(&store_ms.to_le_bytes());
    }
    Ok((marks[0].0, PyBytes::new(py, &packed))
        .into_pyobject(py)?
        .into_any())
}

fn text(data: &[u8]) -> PyResult<&str> {
    std::str::from_utf8(data).map_err(|error| PyValueError::new_err(error.to_string()))
}

/// A queue's records met by `follow_spans`: its lowest and highest queue offset, and
/// the commit offset of its first record.
struct Span {
    low: u64,
    high: u64,
    first: u64,
}

/// The follow's walk (follow.py `follow_log`) over one segment: from in-segment `start`
/// up to `limit` (the published tail, or the segment's end, less its base `base`),
/// every record's header read for its topic, queue id, queue offset and store time.
/// Returns where it stopped (`limit`, or a record it does not pass: an end-of-segment
/// marker, anything but a whole record's header, a record running past `limit`; the
/// caller's walk takes that one itself), the highest store time met (None: no record),
/// and per (topic, queue id), in the order first met, `(topic, queue id, lowest queue
/// offset, highest queue offset, commit offset of its first record)`.
#[pyfunction]
pub fn follow_spans<'py>(
    py: Python<'py>,
    segment: &Bound<'py, PyAny>,
    base: u64,
    start: usize,
    limit: usize,
) -> PyResult<(usize, Option<i64>, Bound<'py, PyList>)> {
    use crate::record::{HEADER_SIZE, RECORD_MAGIC};
    let data = Bytes::of(segment)?;
    let data = data.slice();
    let limit = limit.min(data.len());
    let mut at = start;
    let mut store_ms: Option<i64> = None;
    let mut order: Vec<(&[u8], u32)> = Vec::new();
    let mut spans: std::collections::HashMap<(&[u8], u32), Span> = std::collections::HashMap::new();
    while at < limit {
        let Some(head) = data.get(at..at + HEADER_SIZE) else {
            break;
        };
        let header = Header::parse(head);
        let length = header.length as usize;
        let topic_at = at + HEADER_SIZE;
        if header.magic != RECORD_MAGIC
            || length < HEADER_SIZE + header.topic_len as usize
            || at + length > limit
        {
            break;
        }
        let topic = &data[topic_at..topic_at + header.topic_len as usize];
        store_ms = Some(store_ms.map_or(header.store_ms, |ms| ms.max(header.store_ms)));
        let offset = header.queue_offset;
        spans
            .entry((topic, header.queue_id))
            .and_modify(|span| {
                span.low = span.low.min(offset);
                span.high = span.high.max(offset);
            })
            .or_insert_with(|| {
                order.push((topic, header.queue_id));
                Span {
                    low: offset,
                    high: offset,
                    first: base + at as u64,
                }
            });
        at += length;
    }
    let out = PyList::empty(py);
    for key in order {
        let span = &spans[&key];
        out.append((
            PyBytes::new(py, key.0),
            key.1,
            span.low,
            span.high,
            span.first,
        ))?;
    }
    Ok((at, store_ms, out))
}
