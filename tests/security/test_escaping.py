"""HTML and script in anything a user controls are shown escaped, never as markup.

Message bodies (as text and as JSON), keys, tags and properties; audit rows; alert rules,
events and silences; token names; task messages; search queries, `next` and names in
paths reflected back; flash messages. Each page must show the value (escaped), so a page
that simply dropped it would not pass.
"""

from __future__ import annotations

import html
from datetime import timedelta
from urllib.parse import quote, urlencode

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('tm-xss')</script>"
ATTRIBUTE = '"><img src=x onerror=alert(1)>'
#: For paths: no "/" (a path segment cannot hold one).
IN_PATH = "<svg onload=alert(1)>"
RAW = (
    IN_PATH,
    SCRIPT,
    "<script>alert",
    ATTRIBUTE,
    "<img src=x",
)  # the pages' own <script> tags are fine


@pytest.fixture
def hostile(world, store, admin):
    """Markup in every user-controlled field the pages show."""
    from console.accounts.models import ApiToken
    from console.alerts.models import AlertEvent, AlertRule, Silence
    from console.audit.log import record
    from console.background.models import TaskRun

    text = store.append(
        "orders",
        f"hello {SCRIPT} {ATTRIBUTE}".encode(),
        key=f"k{SCRIPT}",
        tag=SCRIPT,
        queue=1,
        properties={"note": ATTRIBUTE, f"p{SCRIPT}": "v"},
    )
    as_json = store.append("orders", f'{{"x": "{SCRIPT}", "y": {ATTRIBUTE!r}}}'.encode(), queue=1)
    record(
        admin, "test.markup", SCRIPT, before={"v": ATTRIBUTE}, after={"v": SCRIPT}, detail=SCRIPT
    )
    rule = AlertRule.objects.create(
        name=SCRIPT,
        kind=AlertRule.LAG_MESSAGES,
        threshold=1,
        scope=AlertRule.SCOPE_MATCH,
        group_pattern=ATTRIBUTE,
        recipients=f"ops@example.com {SCRIPT}",
    )
    now = timezone.now()
    AlertEvent.objects.create(
        rule=rule,
        rule_name=SCRIPT,
        kind=AlertRule.LAG_MESSAGES,
        subject=SCRIPT,
        state="firing",
        since=now,
        started_at=now,
        details={"note": ATTRIBUTE},
    )
    Silence.objects.create(
        reason=SCRIPT, subject_pattern=ATTRIBUTE, ends_at=now + timedelta(hours=1)
    )
    ApiToken.issue(admin, SCRIPT)
    TaskRun.objects.create(
        name="flush_store",
        every_s=5,
        last_started_at=now,
        last_finished_at=now,
        last_outcome=TaskRun.FAILED,
        last_message=SCRIPT,
        runs=1,
        failures=1,
    )
    return {"text_id": text.message_id, "json_id": as_json.message_id, "rule_id": rule.pk}


PAGES = {
    "message as text": "/messages/{text_id}/?view=text",
    "message as JSON": "/messages/{json_id}/?view=json",
    "message as hex": "/messages/{text_id}/?view=hex",
    "search by key": "/messages/?"
    + urlencode({"mode": "key", "topic": "orders", "key": f"k{SCRIPT}"}),
    "search by range": "/messages/?mode=range&topic=orders&queue=1&from=0&to=10",
    "topic page": "/topics/orders/",
    "audit log": "/audit/",
    "alerts": "/alerts/",
    "alert rule form": "/alerts/rules/{rule_id}/",
    "tokens": "/accounts/tokens/",
    "tasks": "/tasks/",
    "topic search reflected": "/topics/?" + urlencode({"q": SCRIPT}),
    "message search reflected": "/messages/?" + urlencode({"mode": "id", "id": SCRIPT}),
    "login next reflected": "/accounts/login/?" + urlencode({"next": f"/{ATTRIBUTE}"}),
    "unknown topic in path": "/topics/" + quote(IN_PATH, safe="") + "/",
    "unknown group in path": "/groups/" + quote(IN_PATH, safe="") + "/",
    "unknown message in path": "/messages/" + quote(IN_PATH, safe="") + "/",
}

#: Pages that show the value only in a form of their own (hex digits), not as text.
NOT_SHOWN_AS_TEXT = {"message as hex"}


def raw_markup(content: str) -> list[str]:
    return [fragment for fragment in RAW if fragment in content]


@pytest.mark.parametrize("page", list(PAGES))
def test_user_controlled_text_is_escaped(page, hostile, as_admin, client):
    viewer = client if page == "login next reflected" else as_admin
    response = viewer.get(PAGES[page].format(**hostile))
    content = response.content.decode()

    assert response.status_code < 500
    assert not raw_markup(content), raw_markup(content)
    if page not in NOT_SHOWN_AS_TEXT:
        shown = ("&lt;script&gt;", html.escape(ATTRIBUTE), "&lt;svg onload")
        assert any(escaped in content for escaped in shown), content[:2000]


def test_a_flash_message_with_a_name_in_it_is_escaped(hostile, as_admin):
    response = as_admin.post("/groups/billing/reset/again/", {"token": SCRIPT}, follow=True)
    content = response.content.decode()

    assert not raw_markup(content)
    assert "&lt;script&gt;" in content


def test_the_message_body_download_is_an_attachment_not_a_page(hostile, as_viewer):
    response = as_viewer.get(f"/messages/{hostile['text_id']}/body")

    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["X-Content-Type-Options"] == "nosniff"


def test_a_chart_is_json_not_html(hostile, as_viewer):
    response = as_viewer.get("/monitoring/charts/topic/?" + urlencode({"topic": SCRIPT}))

    assert response["Content-Type"].startswith("application/json")
