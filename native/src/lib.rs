//! Tidemark's native data plane: the engine's per-record work over buffers.
//!
//! The modules mirror the engine's (`storeadapter/engine/`): `record` (the layout, the
//! check, encoding), `scan` (walking a segment), `consume_queue` (entries), `reader`
//! (a batch of entries checked against their records), `appending` (a batch encoded at
//! the tail), `events` (appends to event streams, event records read back), `key_index`
//! and `tags` (hashes). None of them does I/O: the engine's Python reads and writes the
//! files (through `fileio`, which the fault tests replace) and hands the bytes here.
//! `python` (feature "python") is the PyO3 module `storeadapter.engine._native`, with
//! the same module names. `group_commit` (sync mode's flusher thread and its waiters) and
//! `pen` (the write mutex) do their own system calls.

pub mod appending;
pub mod consume_queue;
pub mod crc;
pub mod events;
pub mod filter;
pub mod group_commit;
pub mod key_index;
pub mod message_id;
pub mod pen;
pub mod prefetch;
pub mod reader;
pub mod record;
pub mod scan;
pub mod stream;
pub mod tags;

#[cfg(test)]
mod properties;

#[cfg(feature = "python")]
mod python;
