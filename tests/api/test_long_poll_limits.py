"""Long polls are capped per token and per process (issue 32, case 2): 20 concurrent
``wait`` pulls from one viewer token against a real server (gunicorn, one process of 4
threads) get one slot, the others a 429 with Retry-After at once, and /healthz answers
while the poll waits. The waiting poll is then woken by a message (an operator's token
sends it): it answers 200 without waiting out its ``wait``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed

import pytest
import requests

from console.api.long_polls import TooManyLongPolls, long_poll_slot, waiting
from tests.console.deploy.test_serving import PROJECT_ROOT, TIDEMARK, production_env, serving

POLLS = 20
#: Long enough that the held poll is still waiting when its waking message comes.
WAIT_S = 30

SETUP = """
from console.accounts.models import ApiToken
from console.accounts.roles import ensure_role_groups
from console.core.store import get_store
from django.contrib.auth import get_user_model
user = get_user_model().objects.create_user(username="watcher", password=None)
user.groups.add(ensure_role_groups()["viewer"])
sender = get_user_model().objects.create_user(username="sender", password=None)
sender.groups.add(ensure_role_groups()["operator"])
get_store().create_topic("orders", queues=1)
print(ApiToken.issue(sender, "sends")[1], ApiToken.issue(user, "polls")[1])
"""


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [str(TIDEMARK), "manage", *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, str, str]]:
    home = tmp_path_factory.mktemp("polls")
    env = production_env(home)
    # This checkout's code, whichever checkout the `tidemark` script was installed from.
    env.update(
        PYTHONPATH=str(PROJECT_ROOT), TIDEMARK_LONG_POLLS="2", TIDEMARK_LONG_POLLS_PER_TOKEN="1"
    )
    manage(env, "migrate", "--noinput", "-v", "0")
    sender, key = manage(env, "shell", "-c", SETUP).strip().splitlines()[-1].split()
    with serving(env, home, "--threads", "4") as base:
        yield base, key, sender


@pytest.mark.own_database
def test_one_tokens_long_polls_leave_threads_for_health_checks(server):
    base, key, sender = server
    url = f"{base}/api/v1/topics/orders/queues/0/messages/?offset=0&wait={WAIT_S}"
    headers = {"Authorization": f"Token {key}"}
    with ThreadPoolExecutor(POLLS) as pool:
        polls = [
            pool.submit(requests.get, url, headers=headers, timeout=WAIT_S + 30)
            for _ in range(POLLS)
        ]
        # The refusals come at once; the poll holding the slot waits for a message.
        answered = as_completed(polls, timeout=WAIT_S + 30)
        early = [next(answered).result() for _ in range(POLLS - 1)]
        health = requests.get(base + "/healthz", timeout=WAIT_S / 3)
        waiting_polls = [poll for poll in polls if not poll.done()]
        sent = requests.post(
            f"{base}/api/v1/topics/orders/messages/",
            json={"body": "wake up", "queue": 0},
            headers={"Authorization": f"Token {sender}"},
            timeout=WAIT_S,
        )
        answers = [poll.result() for poll in polls]

    assert health.status_code == 200
    assert sent.status_code == 201, sent.text
    assert all(a.status_code == 429 for a in early)
    assert len(waiting_polls) == 1
    assert "wake up" in waiting_polls[0].result().text
    refused = [a for a in answers if a.status_code == 429]
    assert len(refused) == POLLS - 1
    assert all(int(a.headers["Retry-After"]) == WAIT_S for a in refused)
    assert "This token has 1 long polls waiting already" in refused[0].json()["error"]["message"]
    assert [a.status_code for a in answers].count(200) == 1


def test_the_process_cap_refuses_a_poll_from_another_token(settings):
    settings.TIDEMARK_LONG_POLLS = 2
    settings.TIDEMARK_LONG_POLLS_PER_TOKEN = 1
    with (
        long_poll_slot("token:1", 5),
        long_poll_slot("token:2", 5),
        pytest.raises(TooManyLongPolls, match="The server has 2 long polls waiting"),
        long_poll_slot("token:3", 5),
    ):
        pass
    assert waiting() == 0
