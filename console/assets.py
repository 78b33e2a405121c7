"""Front-end files that come from Python packages rather than static/."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

import plotly
from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage
from whitenoise.compress import Compressor
from whitenoise.storage import CompressedManifestStaticFilesStorage

PLOTLY_FILE = "plotly.min.js"

#: How many static URLs StaticStorage keeps made (the templates name a few dozen files).
KEPT_URLS = 1024


def plotly_static_dir() -> Path:
    """The folder holding plotly.min.js in the installed plotly package."""
    return Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    """Finds plotly.min.js alone in the plotly package (its folder holds 5 MB more that
    the console does not serve)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(plotly_static_dir()))

    def check(self, **kwargs) -> list:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs) -> str | list[str]:
        if path != PLOTLY_FILE:
            return [] if find_all else ""
        found = str(plotly_static_dir() / PLOTLY_FILE)
        return [found] if find_all else found

    def list(self, ignore_patterns) -> Iterator[tuple[str, FileSystemStorage]]:
        yield PLOTLY_FILE, self.storage


class CompressOnce(Compressor):
    """Whitenoise's compressor, compressing each distinct content once per run.

    collectstatic keeps every file under its own name and under its hashed name, with the
    same bytes: brotli at its best quality took 17 s of CPU for plotly.min.js alone, twice.
    The copies are compressed on parallel threads, so the second waits for the first."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._results: dict[tuple[str, bytes], Future[bytes]] = {}

    def _once(self, encoding: str, data: bytes, compress: Callable[[bytes], bytes]) -> bytes:
        key = (encoding, hashlib.sha256(data).digest())
        with self._lock:
            result = self._results.get(key)
            first = result is None
            if first:
                result = self._results[key] = Future()
        if first:
            try:
                result.set_result(compress(data))
            except BaseException as error:
                result.set_exception(error)
        return result.result()

    def compress_brotli(self, data: bytes) -> bytes:
        return self._once("br", data, Compressor.compress_brotli)

    def compress_gzip(self, data: bytes) -> bytes:
        return self._once("gzip", data, Compressor.compress_gzip)


class StaticStorage(CompressedManifestStaticFilesStorage):
    """Hashed names cached for a year, with gzip and brotli copies, each content compressed
    once (CompressOnce)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._urls: dict[tuple, str] = {}

    def create_compressor(self, **kwargs) -> Compressor:
        return CompressOnce(**kwargs)

    def url(self, name: str | None, force: bool = False) -> str:
        """``{% static %}``'s answer, kept once made: every page asks for the same five
        files (base.html), and the manifest does not change under a running process
        (collectstatic hashes through ``_url``, not here). DEBUG is part of the key, as it
        chooses between the plain and the hashed name."""
        key = (name, force, settings.DEBUG)
        url = self._urls.get(key)
        if url is None:
            url = super().url(name, force)
            if len(self._urls) < KEPT_URLS:
                self._urls[key] = url
        return url
