"""Fixtures shared by the Django-side suites (console, api, background, monitoring, alerts):
users for each role and clients logged in as them, a small store, the machine's real Redis
as Celery's broker, and a real worker.

Users: `viewer`, `operator`, `admin` (in the role group of that name) and `nobody` (in no
group). Clients: `as_viewer`, `as_operator`, `as_admin`, `as_nobody` (tests/api overrides
these with token-authenticated API clients). pytest-django's own `admin_user` /
`admin_client` (a superuser) are left as they are.

tests/engine keeps its own `store` fixture (a bare MessageStore); the one here is the
console's store, reached through console.core.store.get_store().
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest
from django.test import Client

from console.accounts.roles import ensure_role_groups


def _test_redis_url() -> str:
    """The machine's Redis, on a database no `make run` uses (flushed before and after):
    15, or 15 − n for pytest-xdist's worker n, so that workers never flush each other's.
    TIDEMARK_TEST_REDIS_URL picks another (two suites running at once must not share one).
    When nothing answers there, the session starts a private redis-server (private_redis)."""
    chosen = os.environ.get("TIDEMARK_TEST_REDIS_URL")
    if chosen:
        return chosen
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return f"redis://127.0.0.1:6379/{15 - int(worker.removeprefix('gw') or 0)}"


TEST_REDIS_URL = _test_redis_url()


def _redis_answers(url: str) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


@pytest.fixture(scope="session", autouse=True)
def private_redis(tmp_path_factory):
    """A redis-server of the session's own on a free loopback port, when none answers at
    TEST_REDIS_URL (a fresh machine), as `make run` does; stopped by its PID at the end."""
    global TEST_REDIS_URL
    if _redis_answers(TEST_REDIS_URL):
        yield TEST_REDIS_URL
        return
    import shutil
    import socket
    import subprocess

    if shutil.which("redis-server") is None:
        pytest.fail(f"no Redis answers at {TEST_REDIS_URL} and redis-server is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home = tmp_path_factory.mktemp("redis")
    server = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", str(home)]
        + ["--save", "", "--appendonly", "no", "--daemonize", "no"],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/15"
    try:
        _wait_for(lambda: _redis_answers(url), timeout=30, what="the private redis-server")
        TEST_REDIS_URL = url
        os.environ["TIDEMARK_TEST_REDIS_URL"] = url
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


#: Where the longest test files are, the longest first. pytest-xdist hands whole files to
#: its workers in collection order: a long file handed out last leaves the other workers
#: idle while one runs it (the Spark cluster's file takes minutes; the deploy files
#: build a wheel, collect static files and start gunicorn).
LONGEST_FIRST = (
    "tests/spark/test_cluster.py",
    "tests/spark/",
    "tests/faults/",
    "tests/console/deploy/",
    "tests/browser/",
    "tests/monitoring/",
)


def _transactional(item: pytest.Item) -> bool:
    """Whether the test runs on a transactional database (flushed after it)."""
    marker = item.get_closest_marker("django_db")
    if marker is not None and marker.kwargs.get("transaction", marker.args[:1] == (True,)):
        return True
    names = getattr(item, "fixturenames", ())
    return "transactional_db" in names or "live_server" in names


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the longest files first (LONGEST_FIRST), each group in its collected order.

    Every transactional test gets a serialized rollback, so that the database's contents
    as the migrations left them are serialized when it is made; pytest_runtest_teardown
    puts them back after each."""
    for item in items:
        names = getattr(item, "fixturenames", None)
        serialized = names is None or "django_db_serialized_rollback" in names
        if not serialized and _transactional(item):
            names.append("django_db_serialized_rollback")

    def rank(item: pytest.Item) -> int:
        return next(
            (n for n, where in enumerate(LONGEST_FIRST) if item.nodeid.startswith(where)),
            len(LONGEST_FIRST),
        )

    items.sort(key=rank)


#: The Spark files in two lanes, each handed whole to one pytest-xdist worker (``--dist
#: loadfile``): a worker that runs a Spark file starts a JVM (~15 s of CPU to start and
#: read once) and keeps it for the session, and handed out file by file the Spark files
#: started one in every worker. The first lane is the standalone cluster's file, whose
#: driver is the worker's own JVM, and the files listed with it; the second, the others.
SPARK_LANES = (
    ("tests/spark/test_cluster.py", "tests/spark/test_stats_", "tests/spark/test_w"),
    ("tests/spark/",),
)


def spark_lane(nodeid: str) -> str | None:
    """The lane of a test in tests/spark (``SPARK_LANES``), or None elsewhere."""
    for number, lane in enumerate(SPARK_LANES, 1):
        if nodeid.startswith(lane):
            return f"tests/spark (lane {number})"
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the Spark files in their lanes (``SPARK_LANES``)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SparkLanes(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return spark_lane(nodeid) or super()._split_scope(nodeid)

    return SparkLanes(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After a transactional test, put back the rows the migrations made (the role
    groups, the content types). Its database is flushed at its end, and a serialized
    rollback only restores them at the start of the next serialized test: the tests after
    it in the process (the files before it are not all before it: LONGEST_FIRST, and
    pytest-xdist hands out whole files) found no role groups (test_roles' migration test
    failed after tests/monitoring's task tests)."""
    try:
        return (yield)
    finally:
        # After the process's last test the test databases are gone (the connection
        # names the configured database again): nothing to put back, nowhere to.
        if nextitem is not None and _transactional(item):
            _put_back_migrated_rows(item.config)


def _put_back_migrated_rows(config: pytest.Config) -> None:
    from django.db import connections
    from pytest_django.plugin import blocking_manager_key

    connection = connections["default"]
    contents = getattr(connection, "_test_serialized_contents", None)
    if contents:
        with config.stash[blocking_manager_key].unblock():
            connection.creation.deserialize_db_from_string(contents)


@pytest.fixture
def store_options() -> dict:
    """StoreConfig overrides for `store`; a test module overrides this fixture."""
    return {}


@pytest.fixture
def no_fsync(monkeypatch):
    """The store's fsyncs as no-ops (storeadapter.engine.fileio, the seam every engine
    fsync goes through; a FaultyFS installed over them still records and fails its own).
    The console's tests are about what the pages, the API and the tasks read and write,
    not what survives a power loss (tests/engine and tests/faults): the writes still
    happen, and every reader in or outside the process sees them. Each fsync is a wait on
    the disk and kernel CPU: a store's open and close took 3.4-4.6 ms of CPU and 35-42 ms
    of wall time with them, 1.4-1.6 ms and 2-3 ms without (tests/security's `world`,
    open + two topics and three appends: 9-11 ms and 140-175 ms, 3 ms and 3-7 ms), at a
    load of 20 on 2 cores."""
    from storeadapter.engine import fileio

    monkeypatch.setattr(fileio, "fdatasync", lambda fd: None)
    monkeypatch.setattr(fileio, "fsync", lambda fd: None)


@pytest.fixture
def store(settings, tmp_path, store_options, no_fsync):
    """A fresh store for the console under test, closed afterwards; its fsyncs are no-ops
    (``no_fsync``)."""
    from console.core.store import get_store
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
        **store_options,
    }
    opened = get_store()
    yield opened
    close_all()


def _wait_for(condition: Callable[[], object], timeout: float = 30.0, what: str = "it") -> object:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def wait_for():
    """``wait_for(condition, timeout=30, what=...)``: poll until truthy, or fail."""
    return _wait_for


def use_broker(celery_app, url: str) -> None:
    """Point the Celery app at another broker; its connection pools start anew."""
    celery_app.conf.broker_url = url
    # Drop the pools (as Celery does after a fork) without closing them: kombu keeps one
    # pool per broker URL, and a closed one would be handed back for that URL later.
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def redis_db(settings):
    """The real Redis (TEST_REDIS_URL) as both the task locks' store and Celery's broker."""
    import redis

    from console.celery import app as celery_app

    client = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"these tests need the machine's Redis at {TEST_REDIS_URL}")
    client.flushdb()
    settings.REDIS_URL = TEST_REDIS_URL
    settings.CELERY_BROKER_URL = TEST_REDIS_URL
    old_broker = celery_app.conf.broker_url
    use_broker(celery_app, TEST_REDIS_URL)
    yield client
    use_broker(celery_app, old_broker)
    client.flushdb()
    client.close()


def _read_uncommitted(sender=None, connection=None, **kwargs) -> None:
    if connection is not None and connection.vendor == "sqlite":
        connection.connection.execute("PRAGMA read_uncommitted = 1")


@pytest.fixture
def lock_free_reads(transactional_db):
    """Let the test's and the worker's SQLite connections read without table locks.

    The test database is SQLite in memory with a shared cache: there a reader and a
    writer on two threads' connections make one of them fail at once with "database
    table is locked" (the busy timeout does not apply). Reads that take no lock leave
    only write against write, which the tests never do at the same time.
    """
    from django.db import connection
    from django.db.backends.signals import connection_created

    connection_created.connect(_read_uncommitted, dispatch_uid="tests-read-uncommitted")
    connection.ensure_connection()
    _read_uncommitted(connection=connection)
    yield
    connection_created.disconnect(dispatch_uid="tests-read-uncommitted")


@pytest.fixture
def worker(redis_db, lock_free_reads):
    """A real Celery worker (solo pool) in a thread of this process, on the test Redis."""
    import celery.contrib.testing.tasks  # noqa: F401 - registers celery.ping
    from celery.contrib.testing.worker import start_worker

    from console.celery import app as celery_app

    with start_worker(
        celery_app, perform_ping_check=False, pool="solo", loglevel="WARNING"
    ) as running:
        yield running


@pytest.fixture
def finished_run(wait_for):
    """``finished_run(task_name, runs=1)``: the TaskRun once the worker has run it."""
    from console.background.models import TaskRun

    def wait(name: str, runs: int = 1):
        return wait_for(
            lambda: TaskRun.objects.filter(name=name, runs__gte=runs).first(),
            timeout=60,
            what=f"the worker to finish {name}",
        )

    return wait


# ------------------------------------------------------------------ role users and clients


@pytest.fixture(autouse=True)
def fast_password_hashing(request):
    """Tests make many users; their passwords need no strength (PBKDF2 costs ~0.1 s each)."""
    if "django_user_model" not in request.fixturenames:
        return
    request.getfixturevalue("settings").PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher"
    ]


PASSWORD = "s3cret-pass-for-tests"


@pytest.fixture
def password() -> str:
    """Every role user's password."""
    return PASSWORD


def role_group(role: str):
    """The role's group: the migration made it; a flushed database (transactional tests)
    gets all three again from ensure_role_groups (one query instead of three)."""
    from django.contrib.auth.models import Group

    group = Group.objects.filter(name=role).first()
    return group if group is not None else ensure_role_groups()[role]


def make_user(django_user_model, username: str, role: str | None):
    user = django_user_model.objects.create_user(username=username, password=PASSWORD)
    if role is not None:
        user.groups.add(role_group(role))
    return user


@pytest.fixture
def viewer(db, django_user_model):
    return make_user(django_user_model, "vera", "viewer")


@pytest.fixture
def operator(db, django_user_model):
    return make_user(django_user_model, "otto", "operator")


@pytest.fixture
def admin(db, django_user_model):
    return make_user(django_user_model, "ada", "admin")


@pytest.fixture
def nobody(db, django_user_model):
    """Logged in but in no role group."""
    return make_user(django_user_model, "nemo", None)


def logged_in(user, client: Client | None = None) -> Client:
    """``client`` (a new Client by default; an APIClient, a client that checks CSRF) with a
    session of ``user``, as ``Client.force_login`` leaves it (the same
    session keys, cookie and last_login), written once: force_login goes through
    django.contrib.auth.login, which saves the session twice (cycle_key, then save) and
    sends user_logged_in, whose django-axes receiver logs an access and resets attempts
    (about a third of a console test's fixed cost). Tests of logging in itself post to the
    login view, which does all of that."""
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import update_last_login

    client = Client() if client is None else client
    backend = client._get_backend()
    user.backend = backend
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = user._meta.pk.value_to_string(user)
    session[BACKEND_SESSION_KEY] = backend
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    update_last_login(None, user)
    cookie = settings.SESSION_COOKIE_NAME
    client.cookies[cookie] = session.session_key
    client.cookies[cookie].update(
        {
            "max-age": None,
            "path": "/",
            "domain": settings.SESSION_COOKIE_DOMAIN,
            "secure": settings.SESSION_COOKIE_SECURE or None,
            "expires": None,
        }
    )
    return client


@pytest.fixture
def as_viewer(viewer) -> Client:
    return logged_in(viewer)


@pytest.fixture
def as_operator(operator) -> Client:
    return logged_in(operator)


@pytest.fixture
def as_admin(admin) -> Client:
    """Logged in as a user in the admin group (not a superuser, not staff)."""
    return logged_in(admin)


@pytest.fixture
def as_nobody(nobody) -> Client:
    return logged_in(nobody)
