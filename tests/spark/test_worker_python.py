"""Spark's Python workers import pyspark from the installed package, with its bytecode, not
from the source-only zips Spark puts first on their PYTHONPATH (compiled again in every
worker: a stream's source runner then missed Spark's 10 s to connect back on busy cores).
"""

from __future__ import annotations

import os
import subprocess

from storeadapter.spark.workerpython import pyspark_home, worker_python


def where_source(out_dir: str):
    """A data source whose stream reader (built in the stream's source runner), batch
    planner and read task (in a task's worker) each write where pyspark came from."""
    from pathlib import Path

    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
    )

    def note(role: str) -> None:
        import pyspark

        Path(out_dir, role).write_text(pyspark.__file__)

    class Reader(DataSourceReader):
        def partitions(self):
            note("planner")
            return [InputPartition(0)]

        def read(self, partition):
            note("task")
            yield ("x",)

    class StreamReader(DataSourceStreamReader):
        def initialOffset(self):
            return {"n": 0}

        def latestOffset(self):
            return {"n": 0}

        def partitions(self, start, end):
            return []

        def read(self, partition):
            return iter(())

    class Where(DataSource):
        @classmethod
        def name(cls):
            return "tidemark_where"

        def schema(self):
            return "x string"

        def reader(self, schema):
            return Reader()

        def streamReader(self, schema):
            note("stream")
            return StreamReader()

    return Where


def test_every_kind_of_python_worker_imports_the_installed_pyspark(spark, tmp_path):
    spark.dataSource.register(where_source(str(tmp_path)))
    assert spark.read.format("tidemark_where").load().collect()[0].x == "x"
    query = (
        spark.readStream.format("tidemark_where")
        .load()
        .writeStream.format("memory")
        .queryName("tidemark_where")
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    expected = str(pyspark_home() / "__init__.py")
    found = {role: (tmp_path / role).read_text() for role in ("planner", "task", "stream")}
    assert found == dict.fromkeys(found, expected)


def test_the_launcher_drops_only_the_zips_of_this_pyspark(tmp_path):
    launcher = worker_python(tmp_path)
    home = pyspark_home()
    zips = [str(home / "python" / "lib" / "pyspark.zip")]
    zips += [str(p) for p in (home / "python" / "lib").glob("py4j-*-src.zip")]
    assert all(os.path.exists(z) for z in zips)
    show = "import os, pyspark; print(pyspark.__file__); print(os.environ['PYTHONPATH'])"

    def run(spark_home: str) -> list[str]:
        env = {**os.environ, "SPARK_HOME": spark_home}
        env["PYTHONPATH"] = ":".join([*zips, "/elsewhere/a.jar", "/x y"])
        done = subprocess.run(
            [launcher, "-c", show], env=env, capture_output=True, text=True, check=True
        )
        return done.stdout.splitlines()

    assert run(str(home)) == [str(home / "__init__.py"), "/elsewhere/a.jar:/x y"]
    # Another Spark's zips are that Spark's pyspark: they stay first.
    imported, path = run("/opt/spark")
    assert imported.startswith(zips[0]) and path == ":".join([*zips, "/elsewhere/a.jar", "/x y"])
