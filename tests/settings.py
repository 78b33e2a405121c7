"""The console's settings for the test suite: a workstation's (DEBUG on, as `make run` sets
it; pytest-django turns DEBUG off again while tests run), before any other import reads them.
Subprocesses the tests start inherit both variables."""

import os

os.environ.setdefault("DEBUG", "true")

from console.settings import *  # noqa: E402, F403
