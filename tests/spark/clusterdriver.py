"""A Spark driver for a standalone cluster, in a process of its own.

A process holds one SparkContext, and the tests' local session (conftest's ``spark``)
lives in the test process; so the cluster's driver runs in a child process and runs the
jobs of ``clusterjobs.py`` there, one call at a time: ``driver.run("read_totals",
path=...)`` returns the job's plain result, or raises ``ClusterJobError`` with the job's
error text (a failed Spark task's text includes the Python exception it raised).
"""

from __future__ import annotations

import multiprocessing
import traceback

JOB_TIMEOUT_S = 300


class ClusterJobError(Exception):
    """A job failed on the cluster; the text is its exception's."""


def serve(connection, master_url: str, config: dict[str, str]) -> None:
    from storeadapter.spark import spark_session
    from tests.spark import clusterjobs

    spark = spark_session("tidemark-cluster-tests", master=master_url, config=config)
    spark.sparkContext.setLogLevel("ERROR")
    connection.send(("ready", None))
    try:
        while True:
            request = connection.recv()
            if request is None:
                break
            name, arguments = request
            try:
                result = getattr(clusterjobs, name)(spark, **arguments)
            except Exception as error:  # noqa: BLE001 - every failure goes back to the test
                text = f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
                connection.send(("error", text))
            else:
                connection.send(("ok", result))
    finally:
        spark.stop()


class ClusterDriver:
    def __init__(self, master_url: str, config: dict[str, str]) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(
            target=serve, args=(child, master_url, config), name="tidemark-cluster-driver"
        )
        self.process.start()
        self._receive()

    def _receive(self):
        if not self.connection.poll(JOB_TIMEOUT_S):
            raise ClusterJobError(f"no answer from the cluster's driver in {JOB_TIMEOUT_S} s")
        status, value = self.connection.recv()
        if status == "error":
            raise ClusterJobError(value)
        return value

    def run(self, job: str, **arguments):
        self.connection.send((job, arguments))
        return self._receive()

    def close(self) -> None:
        if self.process.is_alive():
            self.connection.send(None)
            self.process.join(60)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(10)
