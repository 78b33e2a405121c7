"""A Python for Spark's Python workers that imports pyspark from the installed package.

Spark starts every Python worker (the tasks' workers, the daemons that fork them, the
planner of a Python data source, a stream's source runner) with
``$SPARK_HOME/python/lib/pyspark.zip`` and ``py4j-*-src.zip`` first on its PYTHONPATH
(``PythonUtils.sparkPythonPath``). With pyspark installed by pip, ``$SPARK_HOME`` is the
installed package itself and the zips hold the same source files, without bytecode: every
worker compiles the pyspark modules it imports again, 1.2 s of CPU where importing them
from the package's ``__pycache__`` takes 0.4 s. A stream's source runner must connect back
to the JVM within 10 s of its start (``PythonWorkerFactory.createSimpleWorker``, a
constant): on two busy cores the compiling alone took longer, and the query failed with
"Python worker failed to connect back".

``worker_python()`` writes a small shell script that drops exactly those two entries from
PYTHONPATH when ``$SPARK_HOME`` is the pyspark package this interpreter imports (anything
else passes through untouched) and runs this interpreter; pass its path as
``PYSPARK_PYTHON`` / ``spark.pyspark.python`` (same machine only: the path is local).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
import tempfile
from pathlib import Path

SCRIPT = """#!/bin/sh
# Spark's Python workers: pyspark from the installed package, not from $SPARK_HOME's zips
# (storeadapter/spark/workerpython.py).
if [ "$SPARK_HOME" = {home} ]; then
    set -f
    kept=
    IFS=:
    for entry in $PYTHONPATH; do
        case "$entry" in
            {home}/python/lib/pyspark.zip | {home}/python/lib/py4j-*-src.zip) ;;
            *) kept="${{kept:+$kept:}}$entry" ;;
        esac
    done
    unset IFS
    PYTHONPATH=$kept
    export PYTHONPATH
fi
exec {python} "$@"
"""


def pyspark_home() -> Path:
    """The installed pyspark package (what ``SPARK_HOME`` is for a pip-installed pyspark)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def worker_python(directory: str | os.PathLike | None = None) -> str:
    """The path of the launcher for this interpreter (written once into ``directory``,
    by default a directory of this user's in the system's temporary directory)."""
    home, python = str(pyspark_home()), sys.executable
    text = SCRIPT.format(home=shlex.quote(home), python=shlex.quote(python))
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    where = Path(directory or Path(tempfile.gettempdir()) / f"tidemark-spark-{os.getuid()}")
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"python-{digest}"
    if not path.exists():
        partial = where / f".{path.name}.{os.getpid()}"
        partial.write_text(text)
        partial.chmod(0o755)
        partial.replace(path)
    return str(path)


__all__ = ["pyspark_home", "worker_python"]
