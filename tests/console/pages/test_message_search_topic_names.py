"""/messages/'s topic-name suggestions (the ``<datalist>``): every topic the user may see,
written by the view as one string (a template look-up a topic was a measurable
part of the page's CPU with hundreds of topics)."""

from __future__ import annotations

import pytest
from django.template import base as template_base

pytestmark = pytest.mark.django_db

URL = "/messages/?mode=range&topic=orders&queue=0"


def _lookups(client, monkeypatch) -> tuple[int, str]:
    calls = [0]
    resolve = template_base.Variable._resolve_lookup

    def counted(self, context):
        calls[0] += 1
        return resolve(self, context)

    monkeypatch.setattr(template_base.Variable, "_resolve_lookup", counted)
    try:
        response = client.get(URL)
    finally:
        monkeypatch.setattr(template_base.Variable, "_resolve_lookup", resolve)
    assert response.status_code == 200
    return calls[0], response.content.decode()


def test_datalist_offers_every_topic(as_viewer, store, monkeypatch):
    for name in ("orders", "a.b", "x_y-1"):
        store.create_topic(name, 1)

    _, content = _lookups(as_viewer, monkeypatch)

    assert (
        '<datalist id="tm-topic-names">\n  '
        '<option value="a.b"><option value="orders"><option value="x_y-1">\n'
        "</datalist>"
    ) in content


def test_datalist_costs_no_lookup_a_topic(as_viewer, store, monkeypatch):
    store.create_topic("orders", 1)
    one, _ = _lookups(as_viewer, monkeypatch)
    for i in range(40):
        store.create_topic(f"t-{i:03d}", 1)
    many, _ = _lookups(as_viewer, monkeypatch)

    assert many - one <= 1, many - one
