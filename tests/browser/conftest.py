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


# --------------------------------------------------------------- one browser profile
#
# The console's pages with a chart load plotly.min.js (4.8 MB). A fresh browser context
# per test (the plugin's `context`) has an empty cache: chromium downloaded it from the
# live server and compiled it again in every test, ~3-4 s of CPU each time, most of what
# the browser tests cost. One profile for the session keeps the HTTP cache and V8's code
# cache; each test still gets a page of its own, and its cookies, storage and permissions
# are wiped at the end (`context` below), so a test sees no state of another.

STORAGE_TYPES = "local_storage,session_storage,indexeddb,websql,service_workers,cache_storage"


@pytest.fixture(scope="session")
def _browser_profile(
    browser_type, browser_type_launch_args, browser_context_args, tmp_path_factory
):
    profile = browser_type.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-profile")),
        **browser_type_launch_args,
        **browser_context_args,
    )
    yield profile
    profile.close()


@pytest.fixture
def context(_browser_profile, live_server):
    """The session's profile (replaces the plugin's fresh context per test); everything a
    test left in it but the cache is wiped after the test."""
    yield _browser_profile
    blank = _browser_profile.pages[0]
    for page in _browser_profile.pages[1:]:
        page.close()
    _browser_profile.clear_cookies()
    _browser_profile.clear_permissions()
    cdp = _browser_profile.new_cdp_session(blank)
    cdp.send(
        "Storage.clearDataForOrigin",
        {"origin": live_server.url, "storageTypes": STORAGE_TYPES},
    )
    cdp.detach()


@pytest.fixture
def page(context, request):
    """A new page of the profile; `@pytest.mark.browser_context_args(color_scheme=...)`
    still sets the system's colour preference (as the plugin's context option did)."""
    page = context.new_page()
    marker = next(request.node.iter_markers("browser_context_args"), None)
    options = dict(marker.kwargs) if marker else {}
    if "color_scheme" in options:
        page.emulate_media(color_scheme=options.pop("color_scheme"))
    if options:
        pytest.fail(f"browser_context_args {sorted(options)}: not supported by tests/browser")
    return page


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
