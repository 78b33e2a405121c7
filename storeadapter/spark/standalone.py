"""A Spark standalone cluster on this machine, from the pyspark package: one master and a
few small workers on 127.0.0.1, on free ports, stopped by PID. The tests and
``bench/spark_scan.py`` run the ``tidemark`` format on it as they would on a real cluster:
executors are separate JVMs with their own Python workers, and the driver plans.

    with StandaloneCluster(workers=2) as cluster:
        spark = spark_session(master=cluster.master_url, config=cluster.driver_config())

A worker can be *blind* to some directories: it runs in its own mount namespace
(``unshare -m``) with an empty tmpfs mounted over each, so its executors see those paths
empty while the driver and the other workers see the real files (root only).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 90


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` different ports free on 127.0.0.1 now (probed together: one at a time, a
    port probed and closed could be handed out again before the JVM given it binds it)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def can_blind() -> bool:
    """Whether this process may start a worker in its own mount namespace."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=10, check=False)
    return probe.returncode == 0


class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, whose
    executors have ``executor_cores`` cores each (default: one executor per worker, of all
    its cores; fewer: a worker runs that many executors, each a JVM of its own);
    ``blind`` lists, per worker, directories it sees as empty; ``java_options`` go to every
    JVM of the cluster (master, workers, and through ``driver_config`` the driver and the
    executors); ``python`` is the executors' Python (default: this interpreter; see
    ``workerpython.py``)."""

    def __init__(
        self,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        executor_cores: int | None = None,
        blind: list[list[str]] | None = None,
        workdir: str | os.PathLike | None = None,
        java_options: str = "",
        python: str | None = None,
    ) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.executor_cores = executor_cores or cores
        self.blind = blind or [[] for _ in range(workers)]
        self.java_options = java_options
        self.python = python or sys.executable
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="tidemark-cluster-"))
        self.port, self.ui_port, *self.worker_ports = free_ports(2 + 2 * workers)
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []

    def _env(self) -> dict[str, str]:
        home = spark_home()
        return {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.workdir / "logs"),
            "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": self.python,
            "SPARK_DAEMON_MEMORY": "256m",
            **({"SPARK_DAEMON_JAVA_OPTS": self.java_options} if self.java_options else {}),
        }

    def _launch(self, name: str, command: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - the process keeps it
        process = subprocess.Popen(
            command,
            env=self._env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped with its executors
        )
        log.close()
        self.processes.append(process)

    def start(self) -> StandaloneCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        spark_class = str(spark_home() / "bin" / "spark-class")
        self._launch(
            "master",
            [spark_class, MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port),
             "--webui-port", str(self.ui_port)],
        )  # fmt: skip
        for number in range(self.workers):
            work = self.workdir / f"worker-{number}"
            work.mkdir(exist_ok=True)
            command = [
                spark_class, WORKER_CLASS, self.master_url, "--host", "127.0.0.1",
                "--port", str(self.worker_ports[2 * number]),
                "--webui-port", str(self.worker_ports[2 * number + 1]),
                "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
            ]  # fmt: skip
            hidden = self.blind[number] if number < len(self.blind) else []
            if hidden:  # its own mount namespace, an empty tmpfs over each hidden path
                mounts = " && ".join(f"mount -t tmpfs tmpfs '{path}'" for path in hidden)
                command = ["unshare", "-m", "sh", "-c", f'{mounts} && exec "$@"', "sh", *command]
            self._launch(f"worker-{number}", command)
        try:
            self._wait_for_workers()
        except BaseException:
            self.stop()
            raise
        return self

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
                state = json.load(r)
        except (OSError, ValueError):  # not answering yet, or not the JSON page yet
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def _wait_for_workers(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.alive_workers() < self.workers:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"a Spark process of the cluster exited with {process.returncode}; "
                        f"see the logs in {self.workdir}"
                    )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the cluster at {self.master_url} has {self.alive_workers()} of "
                    f"{self.workers} workers after {START_TIMEOUT_S} s; see {self.workdir}"
                )
            time.sleep(0.5)

    def driver_config(self, cores: int | None = None) -> dict[str, str]:
        """Settings for a driver on this machine using the cluster's executors."""
        total = cores or self.workers * self.cores
        driver_port, block_manager_port = free_ports(2)
        java = (
            {"spark.driver.extraJavaOptions": self.java_options,
             "spark.executor.extraJavaOptions": self.java_options}
            if self.java_options
            else {}
        )  # fmt: skip
        return {
            **java,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.port": str(driver_port),
            "spark.blockManager.port": str(block_manager_port),
            "spark.ui.enabled": "false",
            "spark.executor.cores": str(self.executor_cores),
            "spark.executor.memory": "512m",
            "spark.cores.max": str(total),
            "spark.default.parallelism": str(total),
            "spark.sql.shuffle.partitions": str(total),
            "spark.pyspark.python": self.python,
        }

    def stop(self) -> None:
        """Stop every process this cluster started (each group: a worker takes its
        executors with it), by PID."""
        for process in reversed(self.processes):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for process in reversed(self.processes):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self.processes.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


__all__ = ["StandaloneCluster", "can_blind", "free_port", "free_ports", "spark_home"]
