"""The cluster tests' driver: the test process's own SparkContext, on the cluster.

A process holds one SparkContext; conftest's ``OneSparkContext`` stops the tests' local
session and starts one on the cluster's master in the same JVM, and starts the local one
again when a later test asks for it. ``driver.run("read_totals", path=...)`` runs a job of
``clusterjobs.py`` and returns its plain result, or raises ``ClusterJobError`` with the
job's error text (a failed Spark task's text includes the Python exception it raised).
"""

from __future__ import annotations

import traceback


class ClusterJobError(Exception):
    """A job failed on the cluster; the text is its exception's."""


class ClusterDriver:
    def __init__(self, session) -> None:
        self.session = session

    def run(self, job: str, **arguments):
        from tests.spark import clusterjobs

        try:
            return getattr(clusterjobs, job)(self.session, **arguments)
        except Exception as error:  # noqa: BLE001 - every failure goes back to the test
            text = f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
            raise ClusterJobError(text) from error
