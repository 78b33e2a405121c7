"""The Jinja2 environment of the list pages' hot rows (``{% render_rows %}``).

A list page of 50 rows paid Django's template language about 20 variable look-ups a row
(each a dictionary, attribute and index attempt through ``Variable._resolve_lookup``);
Jinja2 compiles a template to Python once per process, so a row's look-ups are plain
attribute reads. Only the rows moved: the page around them stays a Django template, and
each row's markup has one owner, its ``.jinja`` file (``templates/<app>/_rows.jinja``).

Output is escaped as Django escapes it (``finalize`` is Django's ``conditional_escape``:
the same entities, ``&#x27;`` for a quote, and safe strings such as ``ms_time``'s
``<time>`` left alone), so a row gives the markup the Django template gave
(tests/console/pages/test_jinja_rows.py). The filters and functions are the console's
own (Django's ``floatformat``, ``filesizeformat`` and ``join``, escaping as in Django):
``num``, ``duration``, ``floatformat``, ``filesizeformat``, ``join``; ``ms_time``,
``status_badge``, ``row_button`` and ``row_url``. A template's last newline is kept, as
Django keeps it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2
from django.conf import settings
from django.dispatch import receiver
from django.template.defaultfilters import filesizeformat, floatformat, join
from django.utils.autoreload import file_changed
from django.utils.html import conditional_escape

from console.core.templatetags.row_tags import row_button
from console.topics.templatetags import topic_tags
from console.topics.templatetags.topic_tags import duration, ms_time, num, status_badge


def _join(value, separator: str = "") -> str:
    """Django's ``join`` filter under autoescape (each item and the separator escaped)."""
    return join(value, separator, autoescape=True)


@cache
def environment() -> jinja2.Environment:
    """The process's one environment: each template compiled once, and not looked at again
    (no ``stat`` a render); the development server's watcher drops them when a ``.jinja``
    file changes (``jinja_changed``)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(settings.SITE_DIR / "templates"),
        autoescape=True,
        finalize=conditional_escape,
        auto_reload=False,
        keep_trailing_newline=True,
    )
    env.filters.update(
        num=num,
        duration=duration,
        floatformat=floatformat,
        filesizeformat=filesizeformat,
        join=_join,
    )
    env.globals.update(ms_time=ms_time, status_badge=status_badge, row_button=row_button)
    return env


@receiver(file_changed, dispatch_uid="console.core.jinja.jinja_changed")
def jinja_changed(sender, file_path: Path, **kwargs) -> bool | None:
    """``runserver``'s watcher saw a file change: a ``.jinja`` template is compiled again
    at its next use (and rendered output kept from it dropped), without a restart."""
    if Path(file_path).suffix != ".jinja":
        return None
    environment().cache.clear()
    for forget in FORGET_ON_CHANGE:
        forget()
    return True


#: Functions keeping output rendered from a ``.jinja`` template (``cache_clear``).
FORGET_ON_CHANGE: list = [topic_tags._badge.cache_clear]
