"""A known placeholder SECRET_KEY is refused with DEBUG off (issue 32, case 6): the example
deployment's `change-me-...` passed `check --deploy`."""

from __future__ import annotations

import sys

import pytest

from console.core.checks import secret_key_placeholder
from tests.security.test_metrics_gate import env_file
from tests.security.test_production_settings import run, strong_key

EXAMPLE_KEY = env_file("docs/deploy/tidemark.env")["SECRET_KEY"]


def test_check_deploy_refuses_the_example_deployments_placeholder_key():
    result = run(
        [sys.executable, "manage.py", "check", "--deploy"], DEBUG="false", SECRET_KEY=EXAMPLE_KEY
    )

    assert result.returncode != 0
    assert "tidemark.E001" in result.stderr + result.stdout


@pytest.mark.parametrize(
    "key",
    [
        EXAMPLE_KEY,
        "django-insecure-tidemark-development-key-do-not-use-in-production",
        "django-insecure-" + "x" * 50,
        "replace-with-a-generated-secret-key-" + "y" * 20,
    ],
)
def test_a_known_placeholder_key_is_an_error_with_debug_off(settings, key):
    settings.DEBUG = False
    settings.SECRET_KEY = key

    assert [error.id for error in secret_key_placeholder(None)] == ["tidemark.E001"]


def test_a_generated_key_passes(settings):
    settings.DEBUG = False
    settings.SECRET_KEY = strong_key()

    assert secret_key_placeholder(None) == []
