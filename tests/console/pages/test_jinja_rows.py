"""``{% render_rows %}`` (console/core/templatetags/jinja_rows.py): the list pages' rows
rendered by Jinja2 give the markup Django's template gave, hostile names escaped."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from django.template import engines
from django.test import RequestFactory

#: The rows as Django templates wrote them before they moved to Jinja2 (held equal here).
BEFORE = Path(__file__).parent / "rows_before_jinja"

#: The topics page's row as list.html wrote it in Django's language before the rows moved
#: to topics/_rows.jinja (the reference the Jinja rows are held equal to).
DJANGO_TOPIC_ROWS = (BEFORE / "topics.html").read_text()

JINJA_TOPIC_ROWS = (
    '{% load jinja_rows %}{% render_rows "topics/_rows.jinja" page manageable=manageable %}'
)

HOSTILE = "<img src=x onerror='alert(1)'>&\"q\""


def _topic(name: str, **figures) -> SimpleNamespace:
    row = {
        "name": name,
        "kind": "plain",
        "kind_label": "Plain",
        "queues": 4,
        "frozen_queues": 0,
        "messages": 1234567,
        "sampled_ms": None,
        "produce_rate": None,
        "size_bytes": None,
        "size_state": "unsampled",
        "last_write_ms": None,
    }
    row.update(figures)
    return SimpleNamespace(**row)


ROWS = [
    _topic("orders"),
    _topic(
        "%RETRY%billing",
        kind="retry",
        kind_label="Retry <of a group>",
        frozen_queues=2,
        sampled_ms=1_764_000_000_123,
        produce_rate=1234.56,
        size_bytes=5_000_000,
        last_write_ms=1_764_000_000_000,
    ),
    _topic("%DLQ%billing", kind="dlq", sampled_ms=0, produce_rate=0.04, size_state="counting"),
    _topic(HOSTILE, produce_rate=3.0, size_bytes=0, last_write_ms=0),
]


def _render(source: str, rows, manageable) -> str:
    template = engines["django"].from_string(source)
    return template.render({"page": rows, "manageable": manageable}, RequestFactory().get("/"))


@pytest.mark.parametrize("manageable", [set(), {"orders", HOSTILE}], ids=["viewer", "manager"])
def test_topic_rows_from_jinja_are_the_django_rows(manageable):
    assert _render(JINJA_TOPIC_ROWS, ROWS, manageable) == _render(
        DJANGO_TOPIC_ROWS, ROWS, manageable
    )


def test_hostile_topic_name_is_escaped_in_the_jinja_rows():
    html = _render(JINJA_TOPIC_ROWS, [_topic(HOSTILE)], {HOSTILE})

    assert "<img" not in html
    assert "&lt;img src=x onerror=&#x27;alert(1)&#x27;&gt;&amp;&quot;q&quot;" in html
    assert 'value="&lt;img src=x' in html


#: The groups page's row and the dashboard's "furthest behind" row as Django templates
#: before they moved to groups/_rows.jinja and _behind_rows.jinja.
DJANGO_GROUP_ROWS = (BEFORE / "groups.html").read_text()
DJANGO_BEHIND_ROWS = (BEFORE / "behind.html").read_text()

JINJA_GROUP_ROWS = (
    '{% load jinja_rows %}{% render_rows "groups/_rows.jinja" rows resettable=resettable %}'
)
JINJA_BEHIND_ROWS = '{% load jinja_rows %}{% render_rows "_behind_rows.jinja" rows %}'


def _group(name: str, **figures) -> SimpleNamespace:
    row = {
        "group": name,
        "status": None,
        "lag": 0,
        "sampled_ms": None,
        "lag_seconds": None,
        "consume_rate": None,
        "queues_behind": 0,
        "topics": 2,
        "members": 0,
        "lag_messages": 0,
    }
    row.update(figures)
    return SimpleNamespace(**row)


GROUPS = [
    _group("billing"),
    _group(
        "ledger",
        status="WARN",
        lag=12345,
        sampled_ms=1_764_000_000_123,
        lag_seconds=3725.2,
        consume_rate=0.06,
        queues_behind=3,
        members=2,
    ),
    _group("stalled", status="STALL", sampled_ms=0, lag_seconds=0, consume_rate=0.0),
    _group(HOSTILE, status="OK", lag=1, consume_rate=12.5),
]


@pytest.mark.parametrize("resettable", [set(), {"ledger", HOSTILE}], ids=["viewer", "operator"])
def test_group_rows_from_jinja_are_the_django_rows(resettable):
    def render(source):
        template = engines["django"].from_string(source)
        context = {"rows": GROUPS, "resettable": resettable}
        return template.render(context, RequestFactory().get("/"))

    assert render(JINJA_GROUP_ROWS) == render(DJANGO_GROUP_ROWS)


def test_behind_rows_from_jinja_are_the_django_rows():
    behind = [
        (SimpleNamespace(group="billing", topics=["orders", HOSTILE], lag=5), None),
        (
            SimpleNamespace(group=HOSTILE, topics=["a"], lag=12345),
            SimpleNamespace(status="ERR", lag_seconds=None, consume_rate=3.0),
        ),
        (
            SimpleNamespace(group="ledger", topics=[], lag=0),
            SimpleNamespace(status="OK", lag_seconds=65, consume_rate=0.25),
        ),
    ]

    def render(source):
        template = engines["django"].from_string(source)
        return template.render({"rows": behind, "behind": behind}, RequestFactory().get("/"))

    assert render(JINJA_BEHIND_ROWS) == render(DJANGO_BEHIND_ROWS)


#: The badge as monitoring/_status.html gave it (Django's inclusion template).
OLD_BADGE = (BEFORE / "status.html").read_text()


@pytest.mark.parametrize("status", [None, "", "OK", "WARN", "ERR", "STALL", "STOP", "REWIND"])
def test_status_badge_is_the_inclusion_templates_markup(status):
    from console.topics.templatetags.topic_tags import STATUS_MEANINGS

    new = engines["django"].from_string("{% load topic_tags %}{% status_badge s %}")
    old = engines["django"].from_string(OLD_BADGE)
    meaning = STATUS_MEANINGS.get(status or "", "")

    assert new.render({"s": status}) == old.render({"S": status, "M": meaning})


def test_a_changed_jinja_template_is_compiled_again_without_a_restart():
    from django.utils.autoreload import file_changed

    from console.core.jinja import environment
    from console.topics.templatetags.topic_tags import _badge, status_badge

    status_badge("OK")
    environment().get_template("topics/_rows.jinja")
    answers = file_changed.send(sender=None, file_path=Path("templates/topics/_rows.jinja"))

    assert any(answer is True for _, answer in answers)  # no restart
    assert len(environment().cache) == 0
    assert _badge.cache_info().currsize == 0


def test_a_changed_python_file_is_not_taken_for_a_jinja_template():
    from django.utils.autoreload import file_changed

    from console.core.jinja import environment

    environment().get_template("topics/_rows.jinja")
    file_changed.send(sender=None, file_path=Path("console/core/jinja.py"))

    assert len(environment().cache) > 0


#: The topic page's queue rows (each with its form) as detail.html wrote them before.
DJANGO_QUEUE_ROWS = (BEFORE / "queues.html").read_text()
JINJA_QUEUE_ROWS = (
    '{% load jinja_rows %}{% render_rows "topics/_queue_rows.jinja" rows topic=topic '
    "wanted_queue=wanted_queue can_operate=can_operate can_admin=can_admin "
    "removable_queue=removable_queue %}"
)


@pytest.mark.parametrize(
    ("can_operate", "can_admin"), [(False, False), (True, False), (True, True)]
)
def test_queue_rows_from_jinja_are_the_django_rows(can_operate, can_admin):
    rows = [
        SimpleNamespace(
            queue=q,
            min_offset=q * 1000,
            max_offset=q * 5000,
            messages=q * 4000,
            frozen=q % 2 == 1,
            last_write_ms=None if q == 0 else 1_764_000_000_000 + q,
        )
        for q in (0, 1, 2, 1234)
    ]
    context = {
        "rows": rows,
        "topic": SimpleNamespace(name=HOSTILE),
        "wanted_queue": 2,
        "can_operate": can_operate,
        "can_admin": can_admin,
        "removable_queue": 1234,
        "csrf_token": "a-token&<",
    }

    def render(source):
        return engines["django"].from_string(source).render(context, RequestFactory().get("/"))

    assert render(JINJA_QUEUE_ROWS) == render(DJANGO_QUEUE_ROWS)


#: base.html's navigation items as Django wrote them before they moved to _nav.jinja.
DJANGO_NAV = (BEFORE / "nav.html").read_text()
JINJA_NAV = '{% load jinja_rows %}{% render_rows "_nav.jinja" nav_items %}'


@pytest.mark.parametrize("current", [None, "/", "/topics/"])
def test_the_navigation_from_jinja_is_the_django_navigation(current):
    from console.accounts.context_processors import NAV_ITEMS

    items = [
        {"label": label, "url": url, "current": url == current} for label, url, _ in NAV_ITEMS
    ] + [{"label": HOSTILE, "url": HOSTILE, "current": False}]
    template = engines["django"].from_string
    request = RequestFactory().get("/")

    assert template(JINJA_NAV).render({"nav_items": items}, request) == template(DJANGO_NAV).render(
        {"nav_items": items}, request
    )
