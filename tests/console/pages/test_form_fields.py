"""``{% form_fields form %}`` (console/core/templatetags/form_tags.py) renders what
``{% for field in form %}{% include "topics/_field.html" %}{% endfor %}`` renders; the
unbound markup of a form whose class says it is fixed is rendered once per template."""

from __future__ import annotations

import pytest
from django import forms
from django.forms import BoundField
from django.template import engines
from django.test import RequestFactory

from console.core.forms import FixedUnboundMarkup
from console.topics.forms import TopicCreateForm

INCLUDED = '{% for field in form %}{% include "topics/_field.html" %}{% endfor %}'
TAG = "{% load form_tags %}{% form_fields form %}"


def render(source: str, form) -> str:
    template = engines["django"].from_string(source)
    return template.render({"form": form}, RequestFactory().get("/"))


class Fixed(FixedUnboundMarkup, forms.Form):
    name = forms.CharField(help_text="A name.")
    count = forms.IntegerField(initial=4)


@pytest.fixture
def widget_renders(monkeypatch):
    """How many fields' widgets were rendered."""
    calls = []
    original = BoundField.as_widget

    def counted(self, *args, **kwargs):
        calls.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BoundField, "as_widget", counted)
    return calls


@pytest.mark.parametrize(
    "data",
    [None, {}, {"name": "bad name!", "queues": "0"}, {"name": "orders", "queues": "4"}],
    ids=["unbound", "empty", "refused", "valid"],
)
def test_form_fields_renders_what_the_included_field_template_renders(data):
    assert render(TAG, TopicCreateForm(data)) == render(INCLUDED, TopicCreateForm(data))


def test_a_fixed_forms_unbound_markup_is_rendered_once(widget_renders):
    included = render(INCLUDED, Fixed())
    first = render(TAG, Fixed())
    widget_renders.clear()

    again = render(TAG, Fixed())

    assert again == first == included
    assert widget_renders == []


def test_a_bound_fixed_form_shows_its_own_input_and_errors_after_an_unbound_one():
    render(TAG, Fixed())

    shown = render(TAG, Fixed({"name": "typed", "count": "x"}))

    assert shown == render(INCLUDED, Fixed({"name": "typed", "count": "x"}))
    assert 'value="typed"' in shown and "tm-error" in shown


def test_a_fixed_form_given_its_own_initial_or_prefix_is_rendered_for_itself():
    render(TAG, Fixed())

    assert 'value="7"' in render(TAG, Fixed(initial={"count": 7}))
    assert 'id="id_p-name"' in render(TAG, Fixed(prefix="p"))


def test_a_form_not_marked_fixed_is_rendered_every_time(widget_renders):
    render(TAG, forms.Form())
    plain = type("Plain", (forms.Form,), {"name": forms.CharField()})
    render(TAG, plain())
    widget_renders.clear()

    render(TAG, plain())

    assert widget_renders == ["name"]


def test_a_reloaded_field_template_is_rendered_again(widget_renders):
    render(TAG, Fixed())
    engine = engines["django"].engine
    for loader in engine.template_loaders:
        loader.reset()  # what Django's autoreload does when a template file changes
    widget_renders.clear()

    render(TAG, Fixed())

    assert widget_renders == ["name", "count"]
