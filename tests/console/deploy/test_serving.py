"""Production serving, as the deploy steps in docs/OPERATIONS.md do it: collectstatic with
the production storage, migrate, then ``tidemark serve`` (gunicorn, gthread) with
DEBUG=false on a free loopback port. A logged-in page, its CSS and Plotly come back 200,
compressed, and hashed files with a year-long immutable cache (issue 21: with DEBUG off
nothing served static files). collectstatic's output is kept between runs by a digest of
its inputs (collected_static)."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
import requests

PROJECT_ROOT = Path(__file__).resolve().parents[3]
TIDEMARK = Path(sys.executable).parent / "tidemark"
PASSWORD = "serve-test-passphrase-1"
#: A year or more, and immutable: what whitenoise gives files with a hash in their name.
LONG_CACHE = re.compile(r"max-age=(\d+)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def production_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DEBUG")}
    env.update(
        DEBUG="false",
        SECRET_KEY="serve-test-" + "k" * 50,
        ALLOWED_HOSTS="127.0.0.1",
        TIDEMARK_ENV_FILE=os.devnull,
        # Plain HTTP on loopback: no TLS proxy in front here.
        SECURE_SSL_REDIRECT="false",
        SESSION_COOKIE_SECURE="false",
        CSRF_COOKIE_SECURE="false",
        DATABASE_URL=f"sqlite:///{home / 'db.sqlite3'}",
        TIDEMARK_STORE_DIR=str(home / "store"),
        TIDEMARK_SEGMENT_BYTES=str(1 << 20),
        TIDEMARK_STATIC_ROOT=str(home / "static"),
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    )
    return env


@contextlib.contextmanager
def serving(env: dict[str, str], home: Path, *options: str) -> Iterator[str]:
    """``tidemark serve`` (gunicorn, one worker, then ``options``) on a free loopback
    port, its base URL once /healthz answers; stopped by SIGTERM on leaving."""
    port = free_port()
    log = (home / "gunicorn.log").open("w")
    process = subprocess.Popen(
        [str(TIDEMARK), "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1", *options],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=home,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if requests.get(base + "/healthz", timeout=10).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("gunicorn did not start: " + (home / "gunicorn.log").read_text())
            time.sleep(0.2)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def run(env: dict[str, str], *args: str) -> None:
    result = subprocess.run(
        [str(TIDEMARK), *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr


#: Brotli's quality for the collected files here (whitenoise's is brotli's best, 11). At 11
#: plotly.min.js alone took 8.7 s of CPU (4.8 MB to 1.11 MB) on a machine with a 10M-addition
#: loop of 0.65 s, and a fresh clone or machine (CI) has no kept output (collected_static);
#: at 5, 0.11 s (1.29 MB, still under gzip's 1.47 MB). What is served from the files (their
#: hashed names, the encodings, the cache headers) does not depend on it.
BROTLI_QUALITY = 5

#: ``tidemark manage collectstatic``, with brotli at BROTLI_QUALITY.
COLLECTSTATIC = f"""
import sys
import brotli
from whitenoise.compress import Compressor
quality = {BROTLI_QUALITY}
Compressor.compress_brotli = staticmethod(lambda data: brotli.compress(data, quality=quality))
from console.cli import main
sys.exit(main(["manage", "collectstatic", "--noinput", "-v", "0"]))
"""


def static_inputs() -> str:
    """A digest of what collectstatic's output is made of: every file the static finders
    list (its name and bytes), the storage and settings code that hash and compress them,
    and the versions of Python, Django, whitenoise and brotli."""
    from django.contrib.staticfiles import finders

    digest = hashlib.sha256()
    for version in (sys.version, *(metadata.version(p) for p in ("django", "whitenoise"))):
        digest.update(version.encode() + b"\0")
    digest.update(metadata.version("Brotli").encode() + b"\0" + COLLECTSTATIC.encode())
    for code in ("console/assets.py", "console/settings.py", "console/env.py"):
        digest.update((PROJECT_ROOT / code).read_bytes())
    found = {}
    for finder in finders.get_finders():
        for name, storage in finder.list([]):
            found.setdefault(name, storage.path(name))
    for name in sorted(found):
        digest.update(name.encode() + b"\0" + Path(found[name]).read_bytes())
    return digest.hexdigest()[:16]


def collected_static(tmp_path_factory, env: dict[str, str]) -> Path:
    """``tidemark manage collectstatic`` with the production storage, its output kept under
    the pytest runs' temporary root by a digest of its inputs (static_inputs): the same
    inputs make the same files (brotli at its best quality took 17 of the step's 22 s of
    CPU: BROTLI_QUALITY). Written to a folder of its own, renamed into place once whole."""
    base = tmp_path_factory.getbasetemp()
    root = next((p for p in base.parents if p.name.startswith("pytest-of-")), base)
    kept = root / f"tidemark-static-{static_inputs()}"
    for old in root.glob("tidemark-static-*"):  # other inputs' (47 MB each), a day unused
        if old != kept and time.time() - old.stat().st_mtime > 24 * 3600:
            shutil.rmtree(old, ignore_errors=True)
    if (kept / "staticfiles.json").is_file():
        os.utime(kept)
        return kept
    building = tmp_path_factory.mktemp("static")
    collect = {**env, "TIDEMARK_STATIC_ROOT": str(building)}
    result = subprocess.run(
        [sys.executable, "-c", COLLECTSTATIC],
        env=collect,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    with contextlib.suppress(OSError):  # another run put the same files there first
        building.rename(kept)
    return kept if (kept / "staticfiles.json").is_file() else building


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("serve")
    env = production_env(home)
    env["TIDEMARK_STATIC_ROOT"] = str(collected_static(tmp_path_factory, env))
    run(env, "manage", "migrate", "--noinput", "-v", "0")
    run(env, "manage", "createsuperuser", "--noinput", "--username", "ops", "--email", "o@x.io")
    with serving(env, home) as base:
        yield base


@pytest.fixture(scope="module")
def session(server) -> requests.Session:
    browser = requests.Session()
    browser.get(server + "/accounts/login/", timeout=10)
    response = browser.post(
        server + "/accounts/login/",
        data={
            "username": "ops",
            "password": PASSWORD,
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
        headers={"Referer": server + "/accounts/login/"},
        timeout=10,
    )
    assert response.status_code == 200 and response.url == server + "/", response.text[:500]
    return browser


def fetch(browser: requests.Session, url: str, encoding: str) -> requests.Response:
    """GET without decoding the body, so its compressed size can be measured."""
    response = browser.get(url, headers={"Accept-Encoding": encoding}, stream=True, timeout=30)
    response.raw_bytes = response.raw.read(decode_content=False)
    return response


def test_the_dashboard_its_css_and_plotly_are_served_hashed_and_compressed(server, session):
    page = session.get(server + "/", timeout=30)
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    css = re.search(r'href="(/static/css/tidemark\.[0-9a-f]{12}\.css)"', page.text)
    plotly = re.search(r'data-plotly-src="(/static/plotly\.min\.[0-9a-f]{12}\.js)"', page.text)
    assert css and plotly, page.text[:2000]

    for url in (css.group(1), plotly.group(1)):
        answer = fetch(session, server + url, "br, gzip")
        assert answer.status_code == 200, url
        assert answer.headers["Content-Encoding"] in ("br", "gzip"), url
        age = LONG_CACHE.search(answer.headers["Cache-Control"])
        assert age and int(age.group(1)) >= 365 * 24 * 3600, answer.headers["Cache-Control"]
        assert "immutable" in answer.headers["Cache-Control"]


def test_plotly_goes_out_at_under_a_third_of_its_size(server, session):
    page = session.get(server + "/", timeout=30).text
    url = re.search(r'data-plotly-src="([^"]+)"', page).group(1)
    plain = fetch(session, server + url, "identity")
    gzipped = fetch(session, server + url, "gzip")
    brotli = fetch(session, server + url, "br")

    assert "Content-Encoding" not in plain.headers
    assert gzip.decompress(gzipped.raw_bytes) == plain.raw_bytes
    assert brotli.headers["Content-Encoding"] == "br"
    sizes = {
        "identity": len(plain.raw_bytes),
        "gzip": len(gzipped.raw_bytes),
        "br": len(brotli.raw_bytes),
    }
    print("plotly.min.js bytes sent:", json.dumps(sizes))
    assert sizes["identity"] > 4_000_000
    assert sizes["gzip"] < sizes["identity"] / 3
    assert sizes["br"] < sizes["gzip"]


def test_unhashed_names_are_served_with_a_short_cache(server, session):
    answer = fetch(session, server + "/static/css/tidemark.css", "gzip")

    assert answer.status_code == 200
    age = LONG_CACHE.search(answer.headers["Cache-Control"])
    assert age and int(age.group(1)) < 24 * 3600


def test_health_checks_and_metrics_answer_in_production(server):
    assert requests.get(server + "/readyz", timeout=10).status_code == 200
    metrics = requests.get(server + "/metrics", timeout=10)
    assert metrics.status_code == 200
    assert "tidemark_store_up 1.0" in metrics.text


def test_a_missing_page_is_the_consoles_404_not_a_debug_page(server, session):
    answer = session.get(server + "/no/such/page/", timeout=10)

    assert answer.status_code == 404
    assert "URLconf" not in answer.text
    assert "tidemark" in answer.text.lower()
