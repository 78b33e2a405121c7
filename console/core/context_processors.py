"""Template context every page may use."""

from __future__ import annotations

from django.http import HttpRequest

from storeadapter.spark_support import spark_missing


def spark(request: HttpRequest) -> dict[str, str]:
    """``spark_missing``: a sentence when PySpark or pyarrow is not installed, else ""."""
    return {"spark_missing": spark_missing()}
