"""What an installed package holds and how it finds its files: the Python packages'
build (setuptools' build_py, what the wheel's Python part is) carries templates/, static/
and py.typed, and the console run from it (not from a checkout) finds its pages and assets
there and keeps var/ in the current folder (issue 21). The sdist carries what its wheel's
build needs (MANIFEST.in): a wheel built from it alone installs and runs (issue 35)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


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


def test_a_wheel_built_from_the_sdist_installs_and_stores_a_message(tmp_path):
    """`python -m build` makes the sdist, then the wheel from that sdist alone (the crate
    compiled by setuptools-rust in an isolated build environment); the wheel is installed
    into a new venv, which borrows the checkout's venv for its dependencies only, and the
    engine is imported from there outside a checkout, appends a message and reads it back.

    The crate is built by cargo in CARGO_TARGET_DIR, or native/target where the editable
    install built it, with the interpreter the install gave PyO3 (PYO3_PYTHON: the
    checkout's venv, not the build environment's new one, which made PyO3 and the crate
    compile again, 40 s of CPU). Cargo judges the sdist's unpacked crate against what it
    built before: every file the compiler read (its dep-info) must be there, unchanged, or
    the crate is compiled again from the sdist's copy; either way the crate cargo names is
    the sdist's (asserted), and a file the sdist lacks fails the build."""
    if shutil.which("cargo") is None:
        pytest.fail("cargo is needed to build the wheel (make install checks for it)")
    # The checkout's files as git sees them (tracked, or new and not ignored), so that what
    # a build left here (an egg-info's SOURCES.txt is read back into the next sdist) or the
    # editable install's compiled module cannot stand in for what the sdist lacks.
    source = tmp_path / "source"
    listed = subprocess.check_output(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT
    )
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_symlink() or (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name, follow_symlinks=False)
    dist = tmp_path / "dist"
    # A PYTHONPATH pointing at a checkout would reach into the isolated build environment.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["CARGO_TARGET_DIR"] = os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "native" / "target")
    env["PYO3_PYTHON"] = os.environ.get("PYO3_PYTHON") or sys.executable
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    # The wheel's crate is the sdist's unpacked copy (fresh against the earlier build, or
    # compiled from it), not a tree here.
    log = (built.stdout + built.stderr).splitlines()
    crate = [line for line in log if re.search(r"(Fresh|Compiling) tidemark_native ", line)]
    assert crate, built.stdout[-4000:]
    for line in crate:
        assert str(source) not in line and str(ROOT) not in line, line
    (sdist,) = dist.glob("tidemark-*.tar.gz")
    (wheel,) = dist.glob("tidemark-*.whl")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps"]
        + ["--no-index", "--quiet", str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    # Django, crc32c and the rest come from this venv's site-packages, after the new venv's
    # own (a plain path: the editable install's import hook there is not loaded).
    own = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    (own / "borrowed.pth").write_text(sysconfig.get_path("purelib") + "\n")

    code = textwrap.dedent(
        """
        import storeadapter.engine as engine
        from storeadapter.engine import MessageStore, StoreConfig
        from storeadapter.engine import _native

        options = StoreConfig(flush_mode="sync", segment_bytes=1 << 20, index_slots=64,
                              index_entries=256)
        with MessageStore.open("store", options) as store:
            store.create_topic("orders", queues=1)
            result = store.append("orders", b"one", key="k")
            print(store.get(result.message_id).body.decode())
            print(len(store.read("orders", result.queue, offset=0)))
        print(engine.__file__)
        print(_native.__file__)
        """
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = subprocess.run(
        [python, "-c", code], cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=120
    )

    assert run.returncode == 0, run.stderr
    body, count, engine_file, native_file = run.stdout.split()
    assert (body, count) == ("one", "1")
    for found in (engine_file, native_file):
        assert found.startswith(str(own)), found
    # The sdist carries the crate and the pages; nothing compiled from the checkout.
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"native/Cargo.toml", "native/Cargo.lock", "native/src/lib.rs"} <= names
    assert "console/site/templates/base.html" in names
    assert not any(name.endswith(".so") for name in names)


def test_the_crate_names_the_projects_license():
    crate = tomllib.loads((ROOT / "native" / "Cargo.toml").read_text())["package"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    assert crate["license"] == project["license"]["text"] == "Apache-2.0"
