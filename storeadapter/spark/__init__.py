"""Spark over a Tidemark store: the ``tidemark`` PySpark data source (never imports Django).

    from storeadapter.spark import register, spark_session

    spark = spark_session()  # local[*], or SPARK_MASTER; PYSPARK_PYTHON set
    messages = spark.read.format("tidemark").load("var/store")
    messages.where("corrupt IS NULL").groupBy("topic").count().show()

``register(spark)`` adds the format to a session you built yourself. What the source
reads and writes: ``source.py``; its options: ``options.py``, and what offsets mean in a
store: ``offsets.py``. What it may read while writers run: ``logview.py``. How it cuts
and prunes a read: ``planning.py``, counting records in the consume queues
(``queueindex.py``); how a task reads a range exactly, or fails saying why
(``errors.py``): ``scanning.py``. A standalone cluster on one machine, for tests and
benchmarks: ``standalone.py``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

FORMAT_NAME = "tidemark"
DEFAULT_MASTER = "local[*]"
#: Python data sources that push filters down need this on (Spark 4.1+).
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: SparkSession) -> None:
    """Register the ``tidemark`` format on ``spark`` (and enable filter pushdown for
    Python data sources, which the format's batch reader uses)."""
    from .source import TidemarkDataSource

    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(TidemarkDataSource)


def spark_session(
    app_name: str = "tidemark",
    master: str | None = None,
    config: dict[str, str] | None = None,
) -> SparkSession:
    """A Spark session with the format registered.

    ``master`` defaults to ``$SPARK_MASTER``, else ``local[*]``. ``PYSPARK_PYTHON`` is
    set to this interpreter unless it is set already: Python workers must run the same
    Python, with pyarrow and this package importable (on a cluster, on every executor).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(
        master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER
    )
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


__all__ = ["DEFAULT_MASTER", "FORMAT_NAME", "register", "spark_session"]
