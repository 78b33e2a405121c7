"""`make bench` runs to its end and prints its table: bench/compare.py on tiny counts, every
section but Spark's (a JVM start; bench/spark_scan.py is the same code at any size) and
the peers that need their own server (tests/bench/test_peers.py runs those).

Behaviour only, never timings: the run exits 0, prints its JSON line and its tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = "tidemark,sqlite,lookups,processes,latency,filter,console,alerts,monitoring"


def test_the_bench_runs_every_section_to_its_end_and_prints_its_table(tmp_path):
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "TIDEMARK_STORE_DIR")
    }
    # compare.main() run from -c, not the script: its spawned producer and latency
    # children then import only bench/engine_two.py (0.4 s), not bench/compare.py as
    # their __main__ again (pyspark, the peers, the console: 3 to 6 s each, 8 children).
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, 'bench'); import compare; compare.main()",
            "--tiny",
            "--only",
            SECTIONS,
            "--sizes",
            "50",
            "--dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert result.returncode == 0, result.stderr[-3000:]
    line, table = result.stdout.split("\n", 1)
    report = json.loads(line)
    assert {"tidemark", "peers", "engine_two", "filter", "console", "monitoring"} <= set(report)
    assert [case["records"] for case in report["filter"]["cases"]] == [400, 400, 400]
    assert "Filter expressions over 400 messages" in table and "filter property and key" in table
    assert report["console"]["alerts"]["evaluations"]
    assert "alert evaluation, steady (s)" in table
    assert "status evaluation" in table and "sample, every queue lagging" in table
    assert "Targets" in table
