"""The machine's limits, measured in the same run as the figures they bound.

    .venv/bin/python bench/limits.py [--mib N] [--syncs N] [--dir PATH]

After one untimed warm-up write (the first file written in a fresh process pays for
page allocation), every figure is taken in ``--dir`` (default: a temporary directory on
the file system the benchmarks write to), with files deleted afterwards:

* ``write_buffered``: 1 MiB ``os.write`` calls into a new file, no sync (page cache);
* ``write_fsync_end``: the same, then one ``fdatasync`` inside the timed region:
  what a writer that flushes in the background can sustain;
* ``write_fsync_every_1mib`` and ``write_fsync_every_8mib``: an ``fdatasync`` after
  every 1 MiB or 8 MiB written: a group-committing writer of large batches;
* ``fdatasync_prealloc``: 1 KiB ``pwrite`` at increasing offsets of a file filled
  with zeroes beforehand, each followed by ``fdatasync`` (no size change, data only);
* ``fdatasync_fallocated``: the same in a file reserved with ``posix_fallocate`` (as
  Tidemark's segments are): the first write to a reserved block also changes the
  file system's extent map, which the ``fdatasync`` then has to commit;
* ``fdatasync_append``: 1 KiB appended to a growing file, each followed by
  ``fdatasync`` (the file size changes, so the inode is written too);
* ``read_page_cache``: a file just written (so it is in the page cache) read back
  with 1 MiB ``readinto`` into one reused buffer: the most any reader in Python can
  get out of the page cache.

MB means 1e6 bytes. Prints one JSON line, then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

MIB = 1 << 20
DEFAULT_MIB = 512
DEFAULT_SYNCS = 2_000
SMALL = 1024


def _write(path: Path, total_mib: int, sync_every_mib: int | None, sync_end: bool) -> float:
    """Seconds to write ``total_mib`` MiB in 1 MiB writes, with the given syncs."""
    block = os.urandom(MIB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        for i in range(1, total_mib + 1):
            os.write(fd, block)
            if sync_every_mib and i % sync_every_mib == 0:
                os.fdatasync(fd)
        if sync_end:
            os.fdatasync(fd)
        return time.perf_counter() - started
    finally:
        os.close(fd)


def _bandwidth(path: Path, total_mib: int, **sync) -> dict:
    seconds = _write(path, total_mib, **sync)
    path.unlink()
    return {"mb_per_s": round(total_mib * MIB / seconds / 1e6, 1), "mib": total_mib}


def _fdatasync_rate(path: Path, syncs: int, preallocated: str | None) -> dict:
    body = os.urandom(SMALL)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if preallocated == "zeroes":
            os.write(fd, bytes(syncs * SMALL))
        elif preallocated == "fallocate":
            os.posix_fallocate(fd, 0, syncs * SMALL)
        os.fsync(fd)
        started = time.perf_counter()
        for i in range(syncs):
            if preallocated:
                os.pwrite(fd, body, i * SMALL)
            else:
                os.write(fd, body)
            os.fdatasync(fd)
        seconds = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink()
    return {
        "per_s": round(syncs / seconds),
        "mean_ms": round(seconds / syncs * 1000, 3),
        "syncs": syncs,
    }


def _read_page_cache(path: Path, total_mib: int) -> dict:
    _write(path, total_mib, None, False)
    buffer = bytearray(MIB)
    view = memoryview(buffer)
    best = 0.0
    try:
        with open(path, "rb", buffering=0) as file:
            for _ in range(3):  # the first pass may still fault pages in; keep the best
                file.seek(0)
                started = time.perf_counter()
                read = 0
                while True:
                    got = file.readinto(view)
                    if not got:
                        break
                    read += got
                best = max(best, read / (time.perf_counter() - started))
    finally:
        path.unlink()
    return {"mb_per_s": round(best / 1e6, 1), "mib": total_mib}


def measure(workdir: Path, total_mib: int = DEFAULT_MIB, syncs: int = DEFAULT_SYNCS) -> dict:
    """Every limit, measured in ``workdir``; a dict keyed by limit name."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "limits.tmp"
    _bandwidth(path, total_mib, sync_every_mib=None, sync_end=True)  # warm-up, not reported
    return {
        "write_buffered": _bandwidth(path, total_mib, sync_every_mib=None, sync_end=False),
        "write_fsync_end": _bandwidth(path, total_mib, sync_every_mib=None, sync_end=True),
        "write_fsync_every_1mib": _bandwidth(path, total_mib, sync_every_mib=1, sync_end=True),
        "write_fsync_every_8mib": _bandwidth(path, total_mib, sync_every_mib=8, sync_end=True),
        "fdatasync_prealloc": _fdatasync_rate(path, syncs, preallocated="zeroes"),
        "fdatasync_fallocated": _fdatasync_rate(path, syncs, preallocated="fallocate"),
        "fdatasync_append": _fdatasync_rate(path, syncs, preallocated=None),
        "read_page_cache": _read_page_cache(path, total_mib),
    }


def format_table(limits: dict) -> str:
    lines = [f"{'machine limit':<26} {'value':>12}  unit", "-" * 50]
    for name, figure in limits.items():
        if "mb_per_s" in figure:
            lines.append(f"{name:<26} {figure['mb_per_s']:>12,.1f}  MB/s")
        else:
            lines.append(
                f"{name:<26} {figure['per_s']:>12,}  fdatasync/s ({figure['mean_ms']} ms each)"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=DEFAULT_MIB, help="MiB per bandwidth figure")
    parser.add_argument("--syncs", type=int, default=DEFAULT_SYNCS, help="fdatasyncs per rate")
    parser.add_argument("--dir", help="where to write (default: a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as temp:
        limits = measure(Path(temp), args.mib, args.syncs)
    print(json.dumps({"limits": limits, "cpus": os.cpu_count()}))
    print(format_table(limits))


if __name__ == "__main__":
    main()
