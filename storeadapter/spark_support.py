"""Whether the Spark side can run: PySpark and pyarrow are the ``spark`` extra
(``pip install 'tidemark[spark]'``); the console and the engine run without them."""

from __future__ import annotations

import importlib.util
from functools import lru_cache

SPARK_MODULES = ("pyspark", "pyarrow")
INSTALL_HINT = "pip install 'tidemark[spark]'"


class SparkMissingError(ImportError):
    """A Spark job was asked for where PySpark or pyarrow is not installed."""


@lru_cache(maxsize=1)
def spark_missing() -> str:
    """A sentence saying what is missing, or "" when Spark can run."""
    missing = [name for name in SPARK_MODULES if importlib.util.find_spec(name) is None]
    if not missing:
        return ""
    verb = "is" if len(missing) == 1 else "are"
    return (
        f"{' and '.join(missing)} {verb} not installed here: the Spark statistics, archive "
        f"and replay jobs need the spark extra ({INSTALL_HINT})."
    )


def require_spark() -> None:
    """Raise SparkMissingError with that sentence unless Spark can run."""
    missing = spark_missing()
    if missing:
        raise SparkMissingError(missing)
