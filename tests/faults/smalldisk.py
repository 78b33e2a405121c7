"""A real full disk for the fault tests: a small tmpfs, filled with a ballast file.

``small_disk(tmp_path)`` mounts a 4 MiB tmpfs (the machine must let this process mount:
root) and yields a ``SmallDisk``; it is unmounted in a ``finally``. ``fill()`` writes the
ballast until the file system answers ENOSPC; ``free()`` removes it. Where mounting is
not allowed, the tests that need a real full disk are skipped; each has a twin on the
fault filesystem (``faultyfs.py``) that runs everywhere.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

SIZE = "4m"


class SmallDisk:
    def __init__(self, mount_point: Path) -> None:
        self.path = mount_point
        self.ballast = mount_point / "ballast"

    def fill(self, leave: int = 0) -> None:
        """Take every free byte but ``leave`` (rounded down to pages)."""
        chunk = b"\xb5" * 4096
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            while True:
                stats = os.statvfs(self.path)
                if stats.f_bavail * stats.f_frsize <= leave:
                    return
                try:
                    os.write(fd, chunk)
                except OSError as error:
                    if error.errno != errno.ENOSPC:
                        raise
                    return
        finally:
            os.close(fd)

    def free(self) -> None:
        self.ballast.unlink(missing_ok=True)

    def free_bytes(self) -> int:
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize


def can_mount() -> bool:
    return os.geteuid() == 0


@contextlib.contextmanager
def small_disk(tmp_path: Path, size: str = SIZE) -> Iterator[SmallDisk]:
    """Mount a ``size`` tmpfs under ``tmp_path`` for the test; skip where not allowed."""
    if not can_mount():
        pytest.skip("mounting a small tmpfs needs root; the faultyfs twin covers this case")
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()})")
    try:
        yield SmallDisk(mount_point)
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
