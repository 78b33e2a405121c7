"""A fork server: one Python process that imports the engine once and forks a child per
request, so that a test can start (and SIGKILL) hundreds of store processes in seconds.

The server reads JSON requests, one per line, on stdin and answers on stdout:

* ``{"op": "spawn", "target": "module:function", "kwargs": {...}, "stderr": PATH}``
  forks a child that runs ``function(**kwargs)`` with its stderr in PATH and exits 0
  (1 with a traceback if it raised); the answer is ``{"pid": PID}``.
* ``{"op": "wait", "pid": PID}`` waits for that child; the answer is
  ``{"pid": PID, "status": STATUS}`` (the raw ``waitpid`` status).
* ``{"op": "poll", "pid": PID}``: the same without waiting (status null if it runs).

A test kills a child itself (``os.kill(pid, SIGKILL)``): the child stays a zombie, so
its pid cannot be reused, until the test asks the server to wait for it.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import signal
import subprocess
import sys
import traceback
from pathlib import Path
from typing import IO

import storeadapter.engine  # noqa: F401 - imported once here, inherited by every child

REPO = Path(__file__).resolve().parents[2]


def _run_child(request: dict, server_in: IO, server_out: IO) -> None:
    """In the forked child: detach from the server's pipes, run the target, exit."""
    code = 1
    try:
        server_in.close()
        server_out.close()
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(err, 2)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        random.seed()
        module_name, function_name = request["target"].split(":")
        function = getattr(importlib.import_module(module_name), function_name)
        function(**request.get("kwargs", {}))
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    """The server's loop: answer requests until stdin closes."""
    server_in, server_out = sys.stdin, sys.stdout
    live: set[int] = set()
    for line in server_in:
        request = json.loads(line)
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                _run_child(request, server_in, server_out)
            live.add(pid)
            answer = {"pid": pid}
        elif request["op"] in ("wait", "poll"):
            flags = os.WNOHANG if request["op"] == "poll" else 0
            pid, status = os.waitpid(request["pid"], flags)
            if pid:
                live.discard(pid)
            answer = {"pid": request["pid"], "status": status if pid else None}
        else:
            answer = {"error": f"unknown op {request['op']!r}"}
        server_out.write(json.dumps(answer) + "\n")
        server_out.flush()
    for pid in live:  # the test went away without waiting for them
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


class Outcome:
    """How a child ended."""

    def __init__(self, status: int, stderr: str) -> None:
        self.status = status
        self.stderr = stderr

    @property
    def killed(self) -> bool:
        return os.WIFSIGNALED(self.status) and os.WTERMSIG(self.status) == signal.SIGKILL

    @property
    def exit_code(self) -> int | None:
        return os.WEXITSTATUS(self.status) if os.WIFEXITED(self.status) else None

    def __repr__(self) -> str:
        if os.WIFSIGNALED(self.status):
            how = f"killed by signal {os.WTERMSIG(self.status)}"
        else:
            how = f"exit code {self.exit_code}"
        return f"<child {how}; stderr: {self.stderr[-3000:]!r}>"


class Child:
    """A process forked by the server."""

    def __init__(self, server: ForkServer, pid: int, stderr: Path) -> None:
        self.server = server
        self.pid = pid
        self.stderr = stderr
        self.outcome: Outcome | None = None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.outcome is None:
            os.kill(self.pid, sig)

    def wait(self) -> Outcome:
        if self.outcome is None:
            self._ended(self.server.ask({"op": "wait", "pid": self.pid})["status"])
        assert self.outcome is not None
        return self.outcome

    def poll(self) -> Outcome | None:
        """How the child ended, or None while it runs."""
        if self.outcome is None:
            status = self.server.ask({"op": "poll", "pid": self.pid})["status"]
            if status is not None:
                self._ended(status)
        return self.outcome

    def _ended(self, status: int) -> None:
        stderr = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        self.outcome = Outcome(status, stderr)


class ForkServer:
    """The test's handle on a fork server process (a context manager)."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", "from tests.faults.forkserver import serve; serve()"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._children: list[Child] = []

    def ask(self, request: dict) -> dict:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server died (exit code {self._process.poll()})")
        return json.loads(line)

    def spawn(self, target: str, stderr: Path, **kwargs: object) -> Child:
        """Fork a child running ``target`` ("module:function") with ``kwargs``."""
        answer = self.ask(
            {"op": "spawn", "target": target, "kwargs": kwargs, "stderr": str(stderr)}
        )
        child = Child(self, answer["pid"], stderr)
        self._children.append(child)
        return child

    def run(self, target: str, stderr: Path, **kwargs: object) -> Outcome:
        """Fork a child running ``target`` and wait for it to end."""
        return self.spawn(target, stderr, **kwargs).wait()

    def close(self) -> None:
        """Kill the children nobody waited for (a test that failed half-way), then stop."""
        assert self._process.stdin is not None
        for child in self._children:
            if child.outcome is None:
                child.kill()
                child.wait()
        self._process.stdin.close()
        self._process.wait(timeout=30)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
