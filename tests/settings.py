"""The console's settings for the test suite: a workstation's (DEBUG on, as `make run` sets
it; pytest-django turns DEBUG off again while tests run), before any other import reads them.
Subprocesses the tests start inherit both variables. A developer's .env is not read: the
tests set what they need themselves.

Static files are served from their folders (no collectstatic, no manifest of hashed names);
tests/console/deploy/test_serving.py runs gunicorn with the production storage.
"""

import os

os.environ.setdefault("DEBUG", "true")
os.environ.setdefault("TIDEMARK_ENV_FILE", os.devnull)

from console.settings import *  # noqa: E402, F403

STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Whitenoise serves STATIC_ROOT once collectstatic wrote it; the tests never run that here,
# so it looks files up when asked (and does not warn at start that STATIC_ROOT is missing).
WHITENOISE_AUTOREFRESH = True
# The API's rate is counted in each test process's memory, as before Redis held it (the
# tests' Redis databases are each worker's own and flushed): tests/security/
# test_rate_across_processes.py runs the console's own settings against the test Redis.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# A name's first login pause lasts minutes here, not the 2 s a workstation gets: a test that
# pauses a name and then logs in must find it paused however slowly the machine ran between
# (a loaded machine let 2 s pass: a flake). Tests that need a pause over move the failures
# back in time (tests/security/test_login_delay.py, let_the_pause_pass).
TIDEMARK_LOGIN_DELAY_BASE_SECONDS = 60
