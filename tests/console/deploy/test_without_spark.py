"""The console runs without the spark extra (PySpark, pyarrow) and says so on the pages
that show Spark's work; a Spark job then fails with that sentence (issue 21)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["pyspark"] = None  # import pyspark now raises ImportError
    sys.modules["pyarrow"] = None
    import django
    django.setup()
    from django.conf import settings
    settings.TIDEMARK_STORE_OPTIONS = {
        "segment_bytes": 1 << 20, "index_slots": 1024, "index_entries": 8192
    }
    from django.core.management import call_command
    call_command("migrate", "--noinput", verbosity=0)
    from django.contrib.auth import get_user_model
    from django.test import Client
    from console.accounts.roles import ensure_role_groups
    from console.core.store import get_store
    from console.monitoring.topicstats import run_topic_statistics
    from storeadapter.spark_support import SparkMissingError

    user = get_user_model().objects.create_user("vera", password="x")
    user.groups.add(ensure_role_groups()["viewer"])
    get_store().create_topic("orders", queues=1)
    client = Client()
    client.force_login(user)
    for path in ("/", "/topics/orders/", "/tasks/"):
        page = client.get(path)
        assert page.status_code == 200, (path, page.status_code)
        print(path, "spark-missing" in page.content.decode())
    try:
        run_topic_statistics()
    except SparkMissingError as error:
        print("job:", error)
    assert "pyspark" not in [m for m, v in sys.modules.items() if v is not None]
    """
)


def test_pages_work_and_say_spark_is_missing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        TIDEMARK_STORE_DIR=str(tmp_path / "store"),
    )

    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "/topics/orders/ True" in lines
    assert "/tasks/ True" in lines
    assert any(
        line.startswith("job: pyspark and pyarrow are not installed") and "tidemark[spark]" in line
        for line in lines
    ), lines
