"""Browser tests: Debian's chromium, driven by pytest-playwright, against `live_server`.

Each test gets a fresh small store in `tmp_path` (like `store` in tests/console/conftest.py),
real users in the role groups, and ends with a full-page screenshot saved to
``tests/browser/screenshots/<test name>.png`` (also when it fails: the teardown takes it).

Playwright's sync API runs an event loop in the test thread, so Django's ORM would raise
SynchronousOnlyOperation in fixtures without DJANGO_ALLOW_ASYNC_UNSAFE.
"""

import os
import re
from pathlib import Path

import pytest

from tests.worlds import billing_on_orders

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCREENSHOTS = Path(__file__).parent / "screenshots"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """Debian's chromium, headless; never Playwright's downloaded browsers."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is not installed: run `make browser` (make test does it)")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "headless": True,
        "args": CHROMIUM_ARGS,
    }


@pytest.fixture(scope="session")
def base_url(live_server):
    """Pages resolve relative URLs against the live server (replaces the plugin's fixture)."""
    return live_server.url


@pytest.fixture(autouse=True)
def _screenshot_at_end(request, page):
    """Save a full-page screenshot of where the test left the page."""
    yield
    SCREENSHOTS.mkdir(exist_ok=True)
    name = request.node.originalname
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None:  # parametrized: add the ids but the browser's
        ids = [
            part
            for part in callspec.id.split("-")
            if part != request.node.funcargs.get("browser_name")
        ]
        name = "-".join([name, *ids])
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


# ------------------------------------------------------------------------- users


@pytest.fixture
def log_in(page, live_server):
    """`log_in(user)`: give the page a session for `user` without going through the form."""
    from django.conf import settings
    from django.test import Client

    def log_in(user):
        client = Client()
        client.force_login(user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME]
        page.context.add_cookies(
            [{"name": cookie.key, "value": cookie.value, "url": live_server.url}]
        )
        return user

    return log_in


@pytest.fixture
def url(live_server):
    """`url("/topics/")`: the live server's absolute URL for a path."""
    return lambda path: f"{live_server.url}{path}"


# ------------------------------------------------------------------------- store


@pytest.fixture
def store(settings, tmp_path, live_server):
    """A fresh small store for the console under test (the live server shares settings)."""
    from storeadapter.access import close_all

    settings.TIDEMARK_STORE_DIR = tmp_path / "store"
    # Small files: a default segment reserves 1 GiB of disk, the key index 420 MB.
    settings.TIDEMARK_STORE_OPTIONS = {
        "segment_bytes": 4 << 20,
        "index_slots": 1024,
        "index_entries": 8192,
        "disk_warn_ratio": 1.0,
        "disk_force_ratio": 1.0,
        "disk_reject_ratio": 1.0,
    }
    from console.core.store import get_store

    opened = get_store()
    yield opened
    close_all()


@pytest.fixture
def billing(store):
    """Group `billing` on topic `orders` (2 queues of 5 messages): committed 3 and 4."""
    return billing_on_orders(store)


@pytest.fixture(autouse=True)
def _restore_migrated_rows(django_db_serialized_rollback):
    """live_server's transactional database is flushed after each test; this puts back
    what the migrations made (the role groups), so tests after these still find them."""
