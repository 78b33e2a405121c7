"""/api/schema/ is made once per process (and again after a setting changes), not on every
request: making it costs 0.2–0.6 s of CPU."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator

pytestmark = pytest.mark.django_db


@pytest.fixture
def made(monkeypatch):
    calls = []
    original = SchemaGenerator.get_schema

    def counting(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SchemaGenerator, "get_schema", counting)
    return calls


def test_asking_for_the_schema_again_does_not_make_it_again(as_viewer, made, settings):
    settings.SPECTACULAR_SETTINGS = {**settings.SPECTACULAR_SETTINGS}  # starts from none made
    first = as_viewer.get("/api/schema/?format=json")
    second = as_viewer.get("/api/schema/?format=json")

    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert len(made) == 1


def test_a_changed_setting_makes_the_schema_again(as_viewer, made, settings):
    settings.SPECTACULAR_SETTINGS = {**settings.SPECTACULAR_SETTINGS}  # starts from none made
    as_viewer.get("/api/schema/?format=json")
    settings.TIDEMARK_SCHEMA_TEST_SETTING = 1

    assert as_viewer.get("/api/schema/?format=json").status_code == 200
    assert len(made) == 2
