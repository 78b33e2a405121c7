"""One row action button: ``{% row_button "freeze" "Freeze" "queue" row.queue %}``.

A small submit button in a table row's actions cell, saying what it acts on to a screen
reader (the words after its label, hidden on screen: "Freeze queue 3"), red when
``danger``, asking first when ``confirm`` holds the question (static/js/confirm.js).
``action`` "" leaves out name and value (a form with one button). ``describedby`` names
the element that explains it; ``after`` follows the label ("…" for one that opens a form).
"""

from __future__ import annotations

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

register = template.Library()


@register.simple_tag
def row_button(
    action: str,
    label: str,
    *about: object,
    danger: bool = False,
    confirm: str = "",
    describedby: str = "",
    after: str = "",
) -> SafeString:
    attributes = [("type", "submit")]
    if action:
        attributes += [("name", "action"), ("value", action)]
    attributes.append(
        ("class", "tm-button-small tm-button-danger" if danger else "tm-button-small")
    )
    if describedby:
        attributes.append(("aria-describedby", describedby))
    if confirm:
        attributes.append(("data-confirm", confirm))
    hidden = " ".join(str(part) for part in about)
    return format_html(
        '<button{}>{}<span class="tm-visually-hidden"> {}</span>{}</button>',
        format_html_join("", ' {}="{}"', attributes),
        label,
        hidden,
        after,
    )
