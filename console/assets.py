"""Front-end files that come from Python packages rather than static/."""

from pathlib import Path

import plotly


def plotly_static_dir() -> Path:
    """The folder holding plotly.min.js in the installed plotly package."""
    return Path(plotly.__file__).resolve().parent / "package_data"
