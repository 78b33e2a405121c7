"""One real local Spark session for the whole test session, and small stores built with
the engine in each test's tmp_path."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, StoreConfig, clock
from tests.engine.storetools import small_config
from tests.spark.sparktools import SHORT_LIVED_JVM

TIMESTAMP_COLUMNS = ("born_time", "store_time")


@pytest.fixture(scope="session")
def worker_python(tmp_path_factory) -> str:
    """The Python of Spark's Python workers: this interpreter, importing pyspark from the
    installed package (``storeadapter/spark/workerpython.py``)."""
    from storeadapter.spark.workerpython import worker_python

    return worker_python(tmp_path_factory.mktemp("python"))


#: The tests' local session: ``local[2]``, two shuffle partitions, no UI, UTC.
LOCAL_MASTER = "local[2]"
LOCAL_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
}
#: What the JVM is started with: it is started once, by whichever session comes first.
JVM_CONFIG = {"spark.driver.memory": "1g", "spark.driver.extraJavaOptions": SHORT_LIVED_JVM}


class OneSparkContext:
    """The one SparkContext of this test process (one JVM): the tests' local session, or
    the driver of test_cluster.py's standalone cluster while that module runs. A switch
    stops one context and starts the other in the same JVM, which keeps its loaded classes
    and compiled code: a driver process of its own cost a Python, a JVM and the JVM's first
    query again (~15 s of CPU here)."""

    def __init__(self, python: str) -> None:
        self.python = python
        self.session = None
        self.master: str | None = None

    def local(self):
        return self.use(LOCAL_MASTER, LOCAL_CONFIG)

    def use(self, master: str, config: dict[str, str]):
        """The session on ``master`` with ``config`` (started when it is not the current
        one); the tidemark format registered."""
        if self.session is not None and self.master == master:
            return self.session
        self.stop()
        os.environ["PYSPARK_PYTHON"] = self.python
        from pyspark.sql import SparkSession

        from storeadapter.spark import register

        builder = SparkSession.builder.master(master).appName("tidemark-tests")
        for key, value in {**JVM_CONFIG, **config}.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        register(session)
        self.session, self.master = session, master
        return session

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()
            self.session = self.master = None


@pytest.fixture(scope="session")
def spark_context(worker_python) -> Iterator[OneSparkContext]:
    context = OneSparkContext(worker_python)
    yield context
    context.stop()


@pytest.fixture
def spark(spark_context):
    """The local session (``LOCAL_CONFIG``), started once for the test process."""
    return spark_context.local()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def open_store(store_path: Path) -> Iterator[Callable[..., MessageStore]]:
    """Open a store (default: ``store_path``, the engine tests' small config); every
    store opened is closed at teardown."""
    opened: list[MessageStore] = []

    def _open(path: Path | None = None, config: StoreConfig | None = None) -> MessageStore:
        store = MessageStore.open(path or store_path, config or small_config())
        opened.append(store)
        return store

    yield _open
    for store in reversed(opened):
        store.close()


class FakeClock:
    """Store times the test chooses: ``clock.now_ms`` returns ``ms`` (set it, or
    ``advance``)."""

    def __init__(self, start: int) -> None:
        self.ms = start

    def __call__(self) -> int:
        return self.ms

    def advance(self, ms: int) -> int:
        self.ms += ms
        return self.ms


@pytest.fixture
def fake_clock(monkeypatch) -> FakeClock:
    fake = FakeClock(1_800_000_000_000)
    monkeypatch.setattr(clock, "now_ms", fake)
    return fake
