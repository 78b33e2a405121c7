"""Fields that bring a refused form's first error into view.

``topics/_field.html`` renders every console form field with ``{{ field|with_error_focus }}``:
the first field (in the form's order) that has an error gets ``autofocus``, so the browser
scrolls the re-rendered page to it and puts the cursor there; every field with an error
gets ``aria-invalid``. A form whose only errors are not a field's focuses its error box
(``topics/_form_errors.html``, ``form|errors_only_general``).

``{% form_fields form %}`` is ``{% for field in form %}{% include "topics/_field.html" %}
{% endfor %}``, except that a form marked ``FixedUnboundMarkup`` (console/core/forms.py)
and made without data, initial values or prefix is rendered once per process: its markup
is kept with the field template it came from, so a template reloaded by runserver (a new
template object) renders it anew.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from django import template
from django.forms import BoundField
from django.utils import translation
from django.utils.safestring import SafeString, mark_safe

from console.core.forms import FixedUnboundMarkup

register = template.Library()

FIELD_TEMPLATE = "topics/_field.html"
#: Field template -> {(form class, auto_id, label suffix, required attribute, language):
#: the fields' markup}.
_KEPT: WeakKeyDictionary = WeakKeyDictionary()


def _first_invalid(form) -> str | None:
    return next((name for name in form.fields if name in form.errors), None)


@register.filter
def with_error_focus(field: BoundField) -> SafeString:
    """The field's widget; with ``autofocus`` when it is its form's first error."""
    if not field.errors:
        return field.as_widget()
    attrs = {"aria-invalid": "true"}
    if _first_invalid(field.form) == field.name:
        attrs["autofocus"] = ""
    return field.as_widget(attrs=attrs)


@register.filter
def errors_only_general(form) -> bool:
    """Whether the form's errors are all general ones (none is a field's)."""
    return bool(form.errors) and _first_invalid(form) is None


def _fixed_key(form) -> tuple | None:
    """What a kept markup of ``form`` is kept under, or None when it is not fixed."""
    if not isinstance(form, FixedUnboundMarkup) or form.is_bound or form.initial or form.prefix:
        return None
    return (
        type(form),
        form.auto_id,
        form.label_suffix,
        form.use_required_attribute,
        translation.get_language(),
    )


@register.simple_tag(takes_context=True)
def form_fields(context, form) -> SafeString:
    """Every field of ``form`` through the field template, as ``{% include %}`` would."""
    field_template = context.template.engine.get_template(FIELD_TEMPLATE)
    key = _fixed_key(form)
    kept = _KEPT.setdefault(field_template, {}) if key is not None else None
    if kept is not None and key in kept:
        return kept[key]
    parts = []
    for field in form:
        with context.push(field=field):
            parts.append(field_template.render(context))
    markup = mark_safe("".join(parts))
    if kept is not None:
        kept[key] = markup
    return markup
