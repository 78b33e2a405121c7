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


@pytest.fixture(scope="session")
def spark(worker_python):
    """``local[2]``, two shuffle partitions, no UI, UTC; the tidemark format registered."""
    os.environ["PYSPARK_PYTHON"] = worker_python
    from pyspark.sql import SparkSession

    from storeadapter.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tidemark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.extraJavaOptions", SHORT_LIVED_JVM)
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


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
