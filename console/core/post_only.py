"""``post_only``: the decorator of every console view that only a form's button posts to.

A POST runs the view. A GET or HEAD (the address bar after a form was sent, a new tab, a
login's ``?next=``) is redirected (303) to the page the form is on, with a line saying
why, instead of a blank 405; any other method is still 405::

    @require_role(OPERATOR)
    @post_only(lambda group: detail_url(group, "reset"))
    def reset_preview(request, group): ...

``form_page`` gets the view's URL keyword arguments and returns the form's page URL.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect

ViewFunc = Callable[..., HttpResponse]

_MARK = "tidemark_post_only"


def post_only(form_page: Callable[..., str]) -> Callable[[ViewFunc], ViewFunc]:
    def decorator(view: ViewFunc) -> ViewFunc:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method == "POST":
                return view(request, *args, **kwargs)
            if request.method in ("GET", "HEAD"):
                messages.info(
                    request,
                    f"{request.path} answers only a form's button; here is the form.",
                )
                return HttpResponseRedirect(form_page(*args, **kwargs), status=303)
            return HttpResponseNotAllowed(["POST"])

        setattr(wrapper, _MARK, True)
        return wrapper

    return decorator


def is_post_only(view: Callable[..., Any]) -> bool:
    """Whether ``post_only`` is somewhere in the view's decorator chain."""
    current: Any = view
    while current is not None:
        if getattr(current, _MARK, False):
            return True
        current = getattr(current, "__wrapped__", None)
    return False
