"""The archive's files, through the file system the Spark cluster itself writes with.

The archive is written by Spark's Parquet writer, so its directory may be any URI the
cluster can write (``file:``, ``hdfs:``, ``s3a:``… by the cluster's own Hadoop
configuration). Moving, listing, deleting and the small verification records go through
the same Hadoop ``FileSystem``, from the driver, so they see what the writer made, not
what the driver's local disk happens to hold. A plain path is a ``file:`` path.

Local (``file:``) paths also get what Hadoop's local file system does not do: files and
directories are fsynced before a segment is recorded as verified.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class FileInfo:
    path: str  # a fully qualified URI
    size: int


class ArchiveFS:
    """Operations on the archive at ``root`` (a URI or a local path)."""

    def __init__(self, spark: SparkSession, root: str | os.PathLike) -> None:
        self.spark = spark
        self._jvm = spark._jvm
        text = str(root)
        if "://" not in text and not text.startswith("file:"):
            text = Path(text).absolute().as_uri()
        self._conf = spark._jsc.hadoopConfiguration()
        self._root = self._jvm.org.apache.hadoop.fs.Path(text)
        self._fs = self._root.getFileSystem(self._conf)
        self.root = self._fs.makeQualified(self._root).toString().rstrip("/")

    @property
    def local_root(self) -> Path | None:
        """The archive's directory on this machine when it is a ``file:`` URI."""
        uri = self._fs.makeQualified(self._root).toUri()
        return Path(uri.getPath()) if uri.getScheme() == "file" else None

    def uri(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def _path(self, uri: str):
        return self._jvm.org.apache.hadoop.fs.Path(uri)

    def exists(self, uri: str) -> bool:
        return bool(self._fs.exists(self._path(uri)))

    def is_file(self, uri: str) -> bool:
        path = self._path(uri)
        return bool(self._fs.exists(path)) and bool(self._fs.getFileStatus(path).isFile())

    def mkdirs(self, uri: str) -> None:
        self._fs.mkdirs(self._path(uri))

    def delete(self, uri: str) -> None:
        self._fs.delete(self._path(uri), True)

    def rename(self, source: str, target: str) -> None:
        if not self._fs.rename(self._path(source), self._path(target)):
            raise OSError(f"the archive's file system did not rename {source} to {target}")

    def files(self, uri: str) -> list[FileInfo]:
        """Every file under ``uri`` (recursively), sorted by path; [] when it is absent."""
        path = self._path(uri)
        if not self._fs.exists(path):
            return []
        found = []
        listing = self._fs.listFiles(path, True)
        while listing.hasNext():
            status = listing.next()
            found.append(FileInfo(status.getPath().toString(), int(status.getLen())))
        return sorted(found, key=lambda f: f.path)

    def glob(self, pattern: str) -> list[FileInfo]:
        statuses = self._fs.globStatus(self._path(pattern)) or []
        return sorted(
            (FileInfo(s.getPath().toString(), int(s.getLen())) for s in statuses if s.isFile()),
            key=lambda f: f.path,
        )

    def read_bytes(self, uri: str) -> bytes:
        stream = self._fs.open(self._path(uri))
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write_bytes(self, uri: str, data: bytes) -> None:
        """Write a new file (replacing one of that name): on a local path through a
        temporary file, fsynced and renamed, elsewhere by the file system's create."""
        local = self.local_path(uri)
        if local is not None:
            local.parent.mkdir(parents=True, exist_ok=True)
            temporary = local.with_name(f".{local.name}.tmp")
            temporary.write_bytes(data)
            fsync(temporary)
            os.replace(temporary, local)
            fsync(local.parent)
            return
        stream = self._fs.create(self._path(uri), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def read_json(self, uri: str) -> dict | None:
        """A small JSON record; None when it is absent or unreadable (half written)."""
        try:
            return json.loads(self.read_bytes(uri))
        except Exception:  # noqa: BLE001 - absent, torn or not JSON: not a record
            return None

    def local_path(self, uri: str) -> Path | None:
        qualified = self._fs.makeQualified(self._path(uri)).toUri()
        return Path(qualified.getPath()) if qualified.getScheme() == "file" else None

    def make_durable(self, uris: list[str]) -> None:
        """fsync local files and their directories (other file systems are durable once
        a written file is closed)."""
        directories: set[Path] = set()
        for uri in uris:
            local = self.local_path(uri)
            if local is None:
                continue
            fsync(local)
            directories.update((local.parent, local.parent.parent))
        if directories and self.local_root is not None:
            directories.add(self.local_root)
        for directory in sorted(directories, key=lambda d: len(d.parts), reverse=True):
            fsync(directory)


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["ArchiveFS", "FileInfo", "fsync"]
