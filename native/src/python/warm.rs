//! Warm mappings: the pages of a segment's mapping that hold what was just written,
//! mapped in ahead of its readers (`MADV_POPULATE_READ`), on the flush thread and
//! without the GIL, so that a read does not pay each page's first touch of the mapping
//! (about 80 ns a 1 KiB message here: docs/PERFORMANCE.md, issue 29 part 5).

use pyo3::prelude::*;

use super::Bytes;

/// Map in the pages of `map[start:end]` (a segment's mmap) in this process: the
/// kernel fills the page tables for the bytes already in the page cache, as a read's
/// first touch would. The GIL is released meanwhile. Returns 0, or the `errno` of a
/// populate that stopped (EFAULT: a page past the file's end, a file cut short under
/// its mapping, which a load would have met with SIGBUS; EINVAL: a kernel without
/// `MADV_POPULATE_READ`, before 5.14): nothing is read, so nothing more is done.
#[pyfunction]
pub(crate) fn populate(
    py: Python<'_>,
    map: &Bound<'_, PyAny>,
    start: usize,
    end: usize,
) -> PyResult<i32> {
    let bytes = Bytes::of(map)?;
    let data = bytes.slice();
    let end = end.min(data.len());
    if start >= end {
        return Ok(0);
    }
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096);
    let base = data.as_ptr() as usize;
    if base & (page - 1) != 0 {
        return Ok(libc::EINVAL); // not a mapping's bytes: an mmap's start on a page
    }
    // madvise wants the range's start on a page: `start` rounded down to its page.
    let from = (base + start) & !(page - 1);
    let length = base + end - from;
    Ok(py.detach(move || {
        // SAFETY: [from, from + length) lies within `map`'s mapping (`from` is `base +
        // start` rounded down to its page, `base` starts a page, `end` is within it), which
        // stays mapped while `bytes` holds its export: an mmap refuses to close while
        // exported, and `bytes` outlives this call. MADV_POPULATE_READ only faults the
        // pages in for reading; it changes no byte and raises no signal.
        let done =
            unsafe { libc::madvise(from as *mut libc::c_void, length, libc::MADV_POPULATE_READ) };
        if done == 0 {
            0
        } else {
            std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
        }
    }))
}
