"""A person cannot create a topic named like a group's retry or dead-letter topic (issue
30, case 5: `%DLQ%billing` was created from the topics page, and billing's DLQ page then
misread it), on the page, through the API or with the CLI; and a name too long is refused
with a sentence instead of being cut by the browser (case 8). One rule owns both:
storeadapter.engine.names.check_new_topic_name."""

from __future__ import annotations

import html
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.audit.models import AuditEntry
from storeadapter.engine import InvalidNameError
from storeadapter.engine.names import check_new_topic_name

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]
RESERVED = ["%DLQ%billing", "%RETRY%billing"]


@pytest.mark.parametrize("name", RESERVED)
def test_the_rule_refuses_a_groups_retry_and_dlq_names_with_a_sentence(name):
    with pytest.raises(InvalidNameError, match="is reserved for a consumer group's"):
        check_new_topic_name(name)


@pytest.mark.parametrize("name", RESERVED)
def test_the_topics_page_refuses_reserved_names(as_admin, store, name):
    response = as_admin.post("/topics/", {"name": name, "queues": "2"})

    assert response.status_code == 200
    assert "is reserved for a consumer group's" in response.context["form"].errors["name"][0]
    assert store.topics() == []
    assert not AuditEntry.objects.filter(action="topic.create").exists()


@pytest.mark.parametrize("name", RESERVED)
def test_the_api_refuses_reserved_names(as_admin, store, name):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(as_admin_user(as_admin))
    response = client.post("/api/v1/topics/", {"name": name, "queues": 1}, format="json")

    assert response.status_code == 400
    assert "is reserved for a consumer group's" in str(response.json())
    assert store.topics() == []


def as_admin_user(client):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(pk=client.session["_auth_user_id"])


@pytest.mark.parametrize("name", RESERVED)
def test_the_cli_refuses_reserved_names(tmp_path, name):
    result = subprocess.run(
        [sys.executable, "-m", "storeadapter.engine", "--dir", str(tmp_path / "s")]
        + ["create-topic", name, "--queues", "1"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )

    assert result.returncode == 3
    assert b"is reserved for a consumer group's" in result.stderr
    assert b"Traceback" not in result.stderr


def test_a_300_character_name_is_refused_with_a_sentence_not_cut(as_admin, store):
    response = as_admin.post("/topics/", {"name": "x" * 300, "queues": "2"})

    assert response.status_code == 200
    [error] = response.context["form"].errors["name"]
    assert "127" in error and "300" in error
    assert store.topics() == []


def test_the_name_field_has_no_maxlength_that_would_cut_a_paste(as_admin, store):
    content = html.unescape(as_admin.get("/topics/").content.decode())

    field = content[content.index('name="name"') - 200 : content.index('name="name"') + 200]
    assert "maxlength" not in field
