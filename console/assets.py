"""Front-end files that come from Python packages rather than static/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_FILE = "plotly.min.js"


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
