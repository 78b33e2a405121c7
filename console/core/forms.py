"""What a console form may say about its own markup."""

from __future__ import annotations


class FixedUnboundMarkup:
    """A form whose unbound markup depends on its class alone.

    Mixed into a form class, it tells ``{% form_fields %}`` (console/core/templatetags/
    form_tags.py) that the form made without data, initial values or prefix renders the
    same on every request: no callable initial, no choices read per request, no field
    changed per instance. Such a form's fields are rendered once per process (per field
    template) and the markup kept.
    """
