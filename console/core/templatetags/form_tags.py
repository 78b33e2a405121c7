"""Fields that bring a refused form's first error into view.

``topics/_field.html`` renders every console form field with ``{{ field|with_error_focus }}``:
the first field (in the form's order) that has an error gets ``autofocus``, so the browser
scrolls the re-rendered page to it and puts the cursor there; every field with an error
gets ``aria-invalid``. A form whose only errors are not a field's focuses its error box
(``topics/_form_errors.html``, ``form|errors_only_general``).
"""

from __future__ import annotations

from django import template
from django.forms import BoundField
from django.utils.safestring import SafeString

register = template.Library()


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
