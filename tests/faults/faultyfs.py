"""A fault-injection layer under the engine's file access (storeadapter/engine/fileio.py).

``FaultyFS(root)`` replaces the functions of ``fileio`` while installed (``with fs:``).
The real calls still happen (fsyncs are skipped unless ``real_sync``), and the layer
keeps a model of what a power loss would leave of the files under ``root``:

* per file (by inode): its bytes as of its last fsync/fdatasync, and the writes,
  truncations and preallocations made since, in order;
* per directory: its entries as of its last ``fsync_dir`` (creations, renames and
  removals since are not durable). A directory never fsynced is empty after a power
  loss, except ``root`` itself, which always exists.

``capture()`` freezes that model into a ``PowerLossImage`` (cheap: it shares bytes);
``PowerLossImage.materialize(dest, ...)`` writes the directory a machine would find
after losing power at that moment: every file that is reachable through durable
directory entries, holding its last fsynced bytes (a file never fsynced is empty).
Options: ``torn`` keeps a random prefix of each file's unsynced writes, the last one
cut at a random sector boundary (a write inside one 512-byte sector is all or nothing);
``pages`` keeps any subset of the unsynced pages (disks and the page cache write pages
back in no set order, ALICE's and CrashMonkey's model): each 4 KiB page that unsynced
writes changed holds its new bytes unless ``pages(path, page_number)`` says it was lost
(``path`` relative to the store), a ``random.Random`` loses each with probability 1/2;
``live_entries`` keeps the directory entries as they are now (as if every directory
change had reached the disk), with the same file contents.

The shared ``state`` file is mapped and never fsynced (the kernel may write back any
of it): an image holds it empty, or, with ``live_state``, as it is now.

Faults: ``fail(op, errno, ...)`` makes the next matching call raise ``OSError`` (opens
and reads of existing files too: ``open_file``, ``pread``), and ``disk_usage`` reports
``fake_usage`` when set.

The layer is also installed under the store core's file calls
(native/src/python/io_seam.rs: ``dataplane.set_io``): each call at a named site is
checked against the rules as that site *and* as the function it stands in for, then
recorded in the model in order with the Python side's calls: writes (``log.record``,
``queue.entry``, ``block.entry``, ``timeindex.mark``: as ``pwrite_all``), a queue
window's reservation (``queue.reserve``: as ``preallocate``) and the group commit's
fdatasync of the log (``log.sync``, on its own thread: as ``fdatasync``).
The Python side's calls are named by the same sites, from the file they touch
(``_site``: a ``pwrite_all`` into a segment is ``log.record``, an ``fdatasync`` of one
``log.sync``, of a queue file ``queue.sync``, a ``preallocate`` of a segment
``log.reserve``, ...), so ``kill_at(site, nth, when, where)`` ends the process with
SIGKILL before or after the ``nth`` call at a site (of those ``where(path, offset)``
holds) whichever path makes it, and ``fail(site, ...)`` fails either. The native append
keeps running under the layer, in sync mode too, so a plan tests the path production
takes. ``native=False`` leaves the core's calls out: the core then declines every
append, and the plan tests the Python long way alone. ``on_op`` is called after every
modelled call (under the layer's lock), so a test can capture images mid-operation.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import random
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from storeadapter.engine import dataplane, fileio

_LIVE_NAMES = frozenset({"state"})
SECTOR = 512
PAGE = 4096
LostPages = Callable[[str, int], bool]
# What a native site's call stands in for, by the kind of call (the rules apply to it
# under both names).
_AS = {bytes: "pwrite_all", int: "preallocate", type(None): "fdatasync"}
_STOOD_IN = ("pwrite_all", "fdatasync")
# The site of a Python-side call, by the kind of file (``_kind``) and the call.
_SITES = {
    ("log", "pwrite_all"): "log.record",
    ("log", "fdatasync"): "log.sync",
    ("log", "preallocate"): "log.reserve",
    ("queue", "pwrite_all"): "queue.entry",
    ("queue", "fdatasync"): "queue.sync",
    ("block", "pwrite_all"): "block.entry",
    ("block", "fdatasync"): "block.sync",
    ("timeindex", "pwrite_all"): "timeindex.mark",
    ("timeindex", "fdatasync"): "timeindex.sync",
}


def _kind(relative: tuple[str, ...]) -> str | None:
    """The kind of a store file by its path under the store (docs/FORMAT.md's layout)."""
    if len(relative) == 2 and relative[0] == "commitlog" and relative[1].isdigit():
        return "log"
    if len(relative) == 4 and relative[0] == "consumequeue":
        if relative[2] == "blocks":
            return "block" if relative[3].isdigit() else None
        if relative[3] == "timeindex":
            return "timeindex"
        return "queue" if relative[3].isdigit() else None
    return None


@dataclass
class _File:
    durable: bytes | None = None  # None: never fsynced (empty after a power loss)
    # Changes since: ("w", at, data), ("t", size) truncate, ("g", size) preallocate.
    pending: list[tuple] = field(default_factory=list)


@dataclass
class _Dir:
    durable: dict[str, _File | _Dir] | None = None


@dataclass(frozen=True)
class _FileState:
    durable: bytes | None
    pending: tuple
    live: bytes | None = None


@dataclass
class _Rule:
    ops: frozenset[str]
    errno: int
    path_part: str | None
    skip: int
    times: int | None


def _apply(content: bytearray, op: tuple, rng: random.Random | None, torn: bool) -> None:
    kind = op[0]
    if kind == "w":
        _, at, data = op
        if torn and rng is not None:
            # Disks write whole sectors: a torn write keeps the sectors before a random one.
            first, last = at // SECTOR + 1, (at + len(data) - 1) // SECTOR
            data = data[: rng.randint(first, last) * SECTOR - at] if first <= last else b""
        end = at + len(data)
        if len(content) < end:
            content.extend(bytes(end - len(content)))
        content[at:end] = data
    elif kind == "t":
        size = op[1]
        if size < len(content):
            del content[size:]
        else:
            content.extend(bytes(size - len(content)))
    elif kind == "g" and op[1] > len(content):
        content.extend(bytes(op[1] - len(content)))


def _some_pages(durable: bytearray, pending: tuple, lost: Callable[[int], bool]) -> bytearray:
    """The file after its unsynced writes, but for the changed pages ``lost`` names."""
    live = bytearray(durable)
    for op in pending:
        _apply(live, op, None, False)
    old = durable + bytes(max(0, len(live) - len(durable)))
    for page in range(-(-len(live) // PAGE)):
        at = page * PAGE
        if live[at : at + PAGE] != old[at : at + PAGE] and lost(page):
            live[at : at + PAGE] = old[at : at + PAGE][: len(live) - at]
    return live


@dataclass(frozen=True)
class PowerLossImage:
    """The durable state of a store directory at one moment (see the module docstring)."""

    durable_tree: dict
    live_tree: dict
    label: str = ""
    meta: object = None

    def materialize(
        self,
        dest: Path,
        *,
        torn: random.Random | None = None,
        pages: random.Random | LostPages | None = None,
        live_entries: bool = False,
        live_state: bool = False,
    ) -> Path:
        """Write the image under ``dest`` (created) and return it."""
        dest.mkdir(parents=True)
        if isinstance(pages, random.Random):
            rng = pages
            pages = lambda _path, _page: rng.random() < 0.5  # noqa: E731
        tree = self.live_tree if live_entries else self.durable_tree
        self._write(tree, dest, "", torn, pages, live_state)
        return dest

    def _write(
        self, tree: dict, dest: Path, prefix: str, torn, pages: LostPages | None, live_state: bool
    ) -> None:
        for name, node in sorted(tree.items()):
            if isinstance(node, dict):
                (dest / name).mkdir()
                self._write(node, dest / name, f"{prefix}{name}/", torn, pages, live_state)
                continue
            if live_state and node.live is not None:
                (dest / name).write_bytes(node.live)
                continue
            content = bytearray(node.durable or b"")
            if pages is not None and node.pending:
                path = prefix + name
                content = _some_pages(content, node.pending, lambda page, at=path: pages(at, page))
            elif torn is not None and node.pending:
                keep = torn.randint(0, len(node.pending))
                for op in node.pending[:keep]:
                    _apply(content, op, None, False)
                if keep < len(node.pending):
                    _apply(content, node.pending[keep], torn, True)
            (dest / name).write_bytes(content)


class FaultyFS:
    """Install with ``with FaultyFS(root) as fs:``; see the module docstring."""

    def __init__(self, root: Path, *, real_sync: bool = False, native: bool = True) -> None:
        self.root = Path(root).resolve()
        self.real_sync = real_sync
        self.native = native
        # (site, nth, when, before_death, where) of kill_at, and how many calls matched
        # each; the count of the core's calls at each site, and of all calls (either side).
        self._kills: list[list] = []
        self.native_calls: dict[str, int] = {}
        self.site_calls: dict[str, int] = {}
        self.fake_usage: tuple[int, int] | None = None
        self.on_op: Callable[[str], None] | None = None
        self.calls: dict[str, int] = {}
        self.failures: list[OSError] = []
        self._lock = threading.RLock()
        self._files: dict[int, _File] = {}
        self._dirs: dict[int, _Dir] = {}
        self._rules: list[_Rule] = []
        self._saved: dict[str, Callable] = {}

    # ----------------------------------------------------------------- install

    def install(self) -> None:
        for name in (
            "pwrite_all",
            "fdatasync",
            "fsync",
            "fsync_dir",
            "preallocate",
            "zero_range",
            "write_atomic",
            "create_file",
            "ftruncate",
            "truncate",
            "rename",
            "unlink",
            "touch",
            "make_dir",
            "remove_tree",
            "disk_usage",
            "open_file",
            "pread",
        ):
            self._saved[name] = getattr(fileio, name)
            setattr(fileio, name, getattr(self, name))
        if self.native:
            dataplane.set_io(self._native_call, [(vars(fileio), name) for name in _STOOD_IN])

    def uninstall(self) -> None:
        if self.native:
            dataplane.set_io(None)
        for name, original in self._saved.items():
            setattr(fileio, name, original)
        self._saved.clear()

    # ------------------------------------------------------ the native sites

    def kill_at(
        self,
        site: str,
        nth: int = 1,
        when: str = "before",
        before_death: Callable[[], None] | None = None,
        where: Callable[[str, int], bool] | None = None,
    ) -> None:
        """SIGKILL this process at the ``nth`` call at ``site`` (by the core or the
        Python side; of those whose ``where(path, offset)`` holds), ``before`` it is made
        or ``after`` (in a child process only)."""
        with self._lock:
            # The last item: the thread making the nth call, once it began (its "after"
            # is that call's: another thread's call at the site may begin meanwhile).
            self._kills.append([site, nth, when, before_death, where, 0, None])

    def _site(self, op: str, path: str) -> str | None:
        """The site of a Python-side call ``op`` on the file at ``path`` (None: none)."""
        if not self._mine(path):
            return None
        kind = _kind(Path(os.path.relpath(path, self.root)).parts)
        return _SITES.get((kind, op)) if kind else None

    def _at_site(self, site: str, path: str, offset: int, phase: str) -> None:
        """A call at ``site``: before it, counted and checked against the rules; the
        kill points either side. Called with the lock held."""
        if phase == "before":
            self.site_calls[site] = self.site_calls.get(site, 0) + 1
            self._check(site, path)
        for kill in self._kills:
            if kill[0] != site or (kill[4] is not None and not kill[4](path, offset)):
                continue
            if phase == "before":
                kill[5] += 1
                if kill[5] == kill[1]:
                    kill[6] = threading.get_ident()
            # A native call's two phases take the lock apart (its system call between
            # them): the nth call's "after" is found by its thread, not by the count.
            if kill[6] == threading.get_ident() and kill[2] == phase:
                if kill[3] is not None:
                    kill[3]()
                os.kill(os.getpid(), signal.SIGKILL)

    def _native_call(self, site: str, fd: int, offset: int, what, phase: str) -> None:
        """The hook of the native sites (io_seam.rs): before a call, the rules; after
        it, the model (``what``: a write's bytes, a reservation's length, None for an
        fdatasync); a kill point either side."""
        with self._lock:
            path = self._fd_path(fd)
            if phase == "before":
                self.native_calls[site] = self.native_calls.get(site, 0) + 1
                self._check(_AS[type(what)], path)
            elif what is None:
                self._sync_file(fd)
            elif isinstance(what, int):
                self._record_op(fd, ("g", offset + what))
            else:
                self._record_op(fd, ("w", offset, bytes(what)))
            self._at_site(site, path, offset, phase)
        if phase == "after":
            self._done(site)

    def __enter__(self) -> FaultyFS:
        self.install()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()

    # ------------------------------------------------------------------ faults

    def fail(
        self,
        ops: str | tuple[str, ...],
        errno: int,
        *,
        path_part: str | None = None,
        after: int = 0,
        times: int | None = 1,
    ) -> None:
        """Make matching calls raise OSError(errno): skip ``after`` matches first, then
        fail ``times`` of them (None: every one from then on)."""
        names = frozenset((ops,) if isinstance(ops, str) else ops)
        with self._lock:
            self._rules.append(_Rule(names, errno, path_part, after, times))

    def clear_faults(self) -> None:
        with self._lock:
            self._rules.clear()

    def _check(self, op: str, path: str) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1
        for rule in self._rules:
            if op not in rule.ops or (rule.path_part and rule.path_part not in path):
                continue
            if rule.skip:
                rule.skip -= 1
                continue
            if rule.times == 0:
                continue
            if rule.times is not None:
                rule.times -= 1
            error = OSError(rule.errno, os.strerror(rule.errno), path)
            self.failures.append(error)
            raise error

    def _done(self, op: str) -> None:
        if self.on_op is not None:
            self.on_op(op)

    # ------------------------------------------------------------------- model

    def _mine(self, path: str) -> bool:
        return path == str(self.root) or path.startswith(str(self.root) + os.sep)

    @staticmethod
    def _fd_path(fd: int) -> str:
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return ""

    def _file(self, inode: int) -> _File:
        record = self._files.get(inode)
        if record is None:
            record = self._files[inode] = _File()
        return record

    def _dir(self, inode: int) -> _Dir:
        record = self._dirs.get(inode)
        if record is None:
            record = self._dirs[inode] = _Dir()
        return record

    def _record_op(self, fd: int, op: tuple) -> None:
        if self._mine(self._fd_path(fd)):
            self._file(os.fstat(fd).st_ino).pending.append(op)

    def _forget(self, path: Path) -> None:
        """``path`` is about to go: a new file may get its inode number."""
        try:
            info = os.lstat(path)
        except OSError:
            return
        if stat.S_ISDIR(info.st_mode):
            for child in os.scandir(path):
                self._forget(Path(child.path))
            self._dirs.pop(info.st_ino, None)
        else:
            self._files.pop(info.st_ino, None)

    def _sync_file(self, fd: int) -> None:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode) or not self._mine(self._fd_path(fd)):
            return
        record = self._file(info.st_ino)
        record.durable = os.pread(fd, info.st_size, 0) if info.st_size else b""
        record.pending = []

    def _sync_dir(self, path: Path) -> None:
        if not self._mine(str(Path(path).resolve())):
            return
        entries: dict[str, _File | _Dir] = {}
        with os.scandir(path) as listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    entries[entry.name] = self._dir(entry.inode())
                else:
                    entries[entry.name] = self._file(entry.inode())
        self._dir(os.stat(path).st_ino).durable = entries

    def adopt(self) -> None:
        """Take everything under ``root`` now as durable (a store made before the layer
        was installed, such as a power-loss image about to be recovered)."""
        with self._lock:
            for directory, _subdirectories, names in os.walk(self.root):
                for name in names:
                    fd = os.open(os.path.join(directory, name), os.O_RDONLY)
                    try:
                        self._sync_file(fd)
                    finally:
                        os.close(fd)
                self._sync_dir(Path(directory))

    def save_model(self, path: Path) -> None:
        """Write the model (what is durable, what is pending) to ``path``, for another
        process to go on from with ``load_model``: a child about to be SIGKILLed hands
        its page cache's durability to the test, which opens the store after it."""
        with self._lock:
            Path(path).write_bytes(pickle.dumps((self._files, self._dirs)))

    def save_model_and_die(self, path: Path) -> None:
        """``save_model``, then SIGKILL this process with the lock still held: no other
        thread (a store's flusher) changes a file after the model is written. Saved and
        killed apart, a flush that ran in between left the files ahead of the model the
        test goes on from (a checkpoint vouching for log pages the model held unsynced:
        the test's open trusted it and synced nothing, and its power-loss images lost
        acknowledged messages that were durable)."""
        with self._lock:
            self.save_model(path)
            os.kill(os.getpid(), signal.SIGKILL)

    def load_model(self, path: Path) -> None:
        """Go on from a model another process saved (``save_model``) over the same files."""
        with self._lock:
            self._files, self._dirs = pickle.loads(Path(path).read_bytes())  # noqa: S301

    def capture(self, label: str = "", meta: object = None) -> PowerLossImage:
        """What a power loss now would leave (see the module docstring)."""
        with self._lock:
            root = self._dirs.get(os.stat(self.root).st_ino) if self.root.exists() else None
            return PowerLossImage(self._freeze(root, set()), self._live(self.root), label, meta)

    def _freeze(self, directory: _Dir | None, seen: set[int]) -> dict:
        if directory is None or directory.durable is None or id(directory) in seen:
            return {}
        seen = seen | {id(directory)}
        tree = {}
        for name, node in directory.durable.items():
            if isinstance(node, _Dir):
                tree[name] = self._freeze(node, seen)
            else:
                tree[name] = _FileState(node.durable, tuple(node.pending))
        return tree

    def _live(self, path: Path) -> dict:
        tree: dict = {}
        try:
            listing = list(os.scandir(path))
        except FileNotFoundError:
            return tree
        for entry in listing:
            try:
                if entry.is_dir(follow_symlinks=False):
                    tree[entry.name] = self._live(Path(entry.path))
                    continue
                node = self._files.get(entry.inode()) or _File()
                live = None
                if entry.name in _LIVE_NAMES and Path(path) == self.root:
                    live = Path(entry.path).read_bytes()
                tree[entry.name] = _FileState(node.durable, tuple(node.pending), live)
            except FileNotFoundError:
                continue
        return tree

    # ------------------------------------------------------- fileio replacements

    def pwrite_all(self, fd: int, data, offset: int) -> None:
        with self._lock:
            path = self._fd_path(fd)
            site = self._site("pwrite_all", path)
            self._check("pwrite_all", path)
            if site:
                self._at_site(site, path, offset, "before")
            self._saved["pwrite_all"](fd, data, offset)
            self._record_op(fd, ("w", offset, bytes(data)))
            if site:
                self._at_site(site, path, offset, "after")
        self._done("pwrite_all")

    def fdatasync(self, fd: int) -> None:
        self._sync("fdatasync", fd, os.fdatasync)

    def fsync(self, fd: int) -> None:
        self._sync("fsync", fd, os.fsync)

    def _sync(self, op: str, fd: int, sync: Callable[[int], None]) -> None:
        with self._lock:
            path = self._fd_path(fd)
            site = self._site(op, path)
            self._check(op, path)
            if site:
                self._at_site(site, path, 0, "before")
            if self.real_sync:
                sync(fd)
            self._sync_file(fd)
            if site:
                self._at_site(site, path, 0, "after")
        self._done(op)

    def fsync_dir(self, path: Path) -> None:
        with self._lock:
            self._check("fsync_dir", str(path))
            if self.real_sync:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self._sync_dir(Path(path))
        self._done("fsync_dir")

    def preallocate(self, fd: int, size: int) -> None:
        with self._lock:
            path = self._fd_path(fd)
            site = self._site("preallocate", path)
            self._check("preallocate", path)
            if site:
                self._at_site(site, path, 0, "before")
            self._saved["preallocate"](fd, size)
            self._record_op(fd, ("g", size))
            if site:
                self._at_site(site, path, 0, "after")
        self._done("preallocate")

    def zero_range(self, fd: int, offset: int, length: int) -> None:
        # The model keeps bytes, not extents: clearing a range is a write of zeros (torn
        # like any write by a power loss before the fsync that follows it).
        with self._lock:
            self._check("zero_range", self._fd_path(fd))
            self._saved["zero_range"](fd, offset, length)
            if length > 0:
                self._record_op(fd, ("w", offset, bytes(length)))
        self._done("zero_range")

    def write_atomic(self, path: Path, data: bytes) -> None:
        with self._lock:
            self._check("write_atomic", str(path))
            self._saved["write_atomic"](path, data)  # made of the replaced functions
        self._done("write_atomic")

    def create_file(self, path, *, exclusive: bool = False, truncate: bool = False) -> int:
        with self._lock:
            self._check("create_file", str(path))
            existed = os.path.exists(path)
            fd = self._saved["create_file"](path, exclusive=exclusive, truncate=truncate)
            if self._mine(self._fd_path(fd)):
                inode = os.fstat(fd).st_ino
                if not existed:
                    self._files[inode] = _File()
                elif truncate:
                    self._file(inode).pending.append(("t", 0))
        self._done("create_file")
        return fd

    def ftruncate(self, fd: int, size: int) -> None:
        with self._lock:
            self._check("ftruncate", self._fd_path(fd))
            self._saved["ftruncate"](fd, size)
            self._record_op(fd, ("t", size))
        self._done("ftruncate")

    def truncate(self, path, size: int) -> None:
        with self._lock:
            self._check("truncate", str(path))
            self._saved["truncate"](path, size)
            if self._mine(str(Path(path).resolve())):
                self._file(os.stat(path).st_ino).pending.append(("t", size))
        self._done("truncate")

    def rename(self, source: Path, target: Path) -> None:
        with self._lock:
            self._check("rename", str(target))
            self._forget(Path(target))
            self._saved["rename"](source, target)
        self._done("rename")

    def unlink(self, path: Path, missing_ok: bool = True) -> None:
        with self._lock:
            self._check("unlink", str(path))
            self._forget(Path(path))
            self._saved["unlink"](path, missing_ok)
        self._done("unlink")

    def touch(self, path: Path) -> None:
        with self._lock:
            self._check("touch", str(path))
            existed = os.path.exists(path)
            self._saved["touch"](path)
            if not existed:
                self._files[os.stat(path).st_ino] = _File()
        self._done("touch")

    def make_dir(self, path, parents: bool = False, exist_ok: bool = False) -> None:
        with self._lock:
            self._check("make_dir", str(path))
            existed = os.path.isdir(path)
            self._saved["make_dir"](path, parents, exist_ok)
            if not existed:
                self._dirs[os.stat(path).st_ino] = _Dir()
        self._done("make_dir")

    def remove_tree(self, path: Path) -> None:
        with self._lock:
            self._check("remove_tree", str(path))
            self._forget(Path(path))
            self._saved["remove_tree"](path)
        self._done("remove_tree")

    def open_file(self, path) -> int:
        with self._lock:
            self._check("open_file", str(path))
        return self._saved["open_file"](path)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        if self._rules:  # reads change nothing: only checked when a fault may match
            with self._lock:
                self._check("pread", self._fd_path(fd))
        return self._saved["pread"](fd, size, offset)

    def disk_usage(self, path: Path) -> tuple[int, int]:
        if self.fake_usage is not None:
            return self.fake_usage
        return self._saved["disk_usage"](path)


@contextlib.contextmanager
def skip_syncs() -> Iterator[None]:
    """Make fileio's fsyncs no-ops for a while (checking images needs no durability)."""
    saved = (fileio.fdatasync, fileio.fsync, fileio.fsync_dir)
    fileio.fdatasync = fileio.fsync = fileio.fsync_dir = lambda _target: None
    try:
        yield
    finally:
        fileio.fdatasync, fileio.fsync, fileio.fsync_dir = saved
