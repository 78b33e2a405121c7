"""/metrics behind the documented same-host TLS proxy (issue 32, case 3): every client
arrives from 127.0.0.1, so with a token set the token is required whatever the address;
the example env ships a token and no loopback allow-list; a start-up check warns when a
proxied deployment leaves /metrics to the loopback allow-list alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.checks import metrics_exposure

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-scrape-token"


def env_file(name: str) -> dict[str, str]:
    values = {}
    for line in (PROJECT_ROOT / name).read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key] = value
    return values


def test_with_a_token_set_a_loopback_request_without_it_is_refused(client, settings, db):
    settings.TIDEMARK_METRICS_ALLOW = ["127.0.0.1", "::1"]
    settings.TIDEMARK_METRICS_TOKEN = TOKEN

    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_with_a_token_set_the_token_opens_it(client, settings, store, db):
    settings.TIDEMARK_METRICS_ALLOW = ["127.0.0.1"]
    settings.TIDEMARK_METRICS_TOKEN = TOKEN

    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})

    assert response.status_code == 200


@pytest.mark.parametrize("name", ["docs/deploy/tidemark.env", ".env.example"])
def test_the_example_envs_ship_a_token_and_no_loopback_allow_list(name):
    values = env_file(name)

    assert values["TIDEMARK_METRICS_TOKEN"]
    allowed = values.get("TIDEMARK_METRICS_ALLOW", "").split(",")
    assert not {"127.0.0.1", "::1", "127.0.0.0/8"} & set(allowed)


def test_behind_a_proxy_with_no_token_and_loopback_allowed_a_check_warns(settings):
    settings.TIDEMARK_BEHIND_TLS_PROXY = True
    settings.TIDEMARK_METRICS_TOKEN = ""
    settings.TIDEMARK_METRICS_ALLOW = ["127.0.0.1", "::1"]

    warnings = metrics_exposure(None)

    assert [w.id for w in warnings] == ["tidemark.W001"]
    assert "every client arrives from the proxy" in warnings[0].msg


def test_behind_a_proxy_with_a_token_no_check_warns(settings):
    settings.TIDEMARK_BEHIND_TLS_PROXY = True
    settings.TIDEMARK_METRICS_TOKEN = TOKEN
    settings.TIDEMARK_METRICS_ALLOW = ["127.0.0.1", "::1"]

    assert metrics_exposure(None) == []
