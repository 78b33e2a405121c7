"""The audit log links a row to its page only for users who may open it (issue 30, case 9:
viewers followed a reset's "Related page" link, the undo preview, to a 403)."""

from __future__ import annotations

import pytest

from console.audit.log import record

pytestmark = pytest.mark.django_db

UNDO = "/groups/billing/resets/1/undo/"


@pytest.fixture
def reset_row(operator):
    return record(operator, "offset.reset", "group billing topic orders", link=UNDO)


def test_a_viewer_sees_no_link_to_an_operators_page(as_viewer, reset_row):
    content = as_viewer.get("/audit/").content.decode()

    assert f'href="{UNDO}"' not in content
    assert "Related page" not in content


def test_an_operator_sees_the_link(as_operator, reset_row):
    assert f'href="{UNDO}"' in as_operator.get("/audit/").content.decode()


def test_a_link_to_a_viewers_page_is_shown_to_a_viewer(as_viewer, operator):
    record(operator, "topic.create", "topic orders", link="/topics/orders/")

    assert 'href="/topics/orders/"' in as_viewer.get("/audit/").content.decode()
