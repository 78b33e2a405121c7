"""What an installed package holds and how it finds its files: the Python packages'
build (setuptools' build_py, what the wheel's Python part is) carries templates/, static/
and py.typed, and the console run from it (not from a checkout) finds its pages and assets
there and keeps var/ in the current folder (issue 21)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    lib = tmp_path_factory.mktemp("lib")
    result = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py"]
        + ["--build-lib", str(lib)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    # The wheel's compiled part (build_ext, the crate built by cargo) is the one the
    # editable install already built: copied, not built again.
    for native in (ROOT / "storeadapter" / "engine").glob("_native*.so"):
        shutil.copy2(native, lib / "storeadapter" / "engine" / native.name)
    return lib


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_the_build_carries_every_template_and_static_file_and_py_typed(built):
    assert files_under(ROOT / "templates") == files_under(built / "console/site/templates")
    assert files_under(ROOT / "static") == files_under(built / "console/site/static")
    assert (built / "console/py.typed").is_file()
    assert (built / "storeadapter/py.typed").is_file()


def test_the_console_runs_from_the_build_outside_a_checkout(built, tmp_path):
    code = textwrap.dedent(
        """
        import django
        django.setup()
        import console
        from django.conf import settings
        from django.contrib.staticfiles import finders
        from django.template.loader import get_template
        print(console.__file__)
        print(get_template("base.html").origin.name)
        print(finders.find("css/tidemark.css"))
        print(bool(finders.find("plotly.min.js")))
        print(settings.VAR_DIR)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(built), "DJANGO_SETTINGS_MODULE": "console.settings"}
    env.update(DEBUG="true", TIDEMARK_ENV_FILE=os.devnull)
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"

    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    package, template, css, plotly, var = result.stdout.split()
    for found in (package, template, css):
        assert found.startswith(str(built)), found
    assert plotly == "True"
    assert var == str(tmp_path / "var")


def test_the_project_metadata_names_the_license_the_command_and_the_spark_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    assert project["license"] == {"text": "Apache-2.0"}
    assert project["scripts"]["tidemark"] == "console.cli:main"
    spark = project["optional-dependencies"]["spark"]
    assert any(d.startswith("pyspark") for d in spark)
    assert any(d.startswith("pyarrow") for d in spark)
    assert not any(d.startswith(("pyspark", "pyarrow")) for d in project["dependencies"])
