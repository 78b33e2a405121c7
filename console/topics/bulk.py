"""/topics/selected/delete/: delete the topics selected on the topic list.

The list's "Delete selected…" posts the chosen names here; the answer is a confirmation
page that lists them (queues, messages) and asks the admin to type how many topics there
are, or their names, as deleting one topic asks for its name. Posted again with that typed,
each topic is deleted by ``console.operations.topics.delete_topic`` and audited on its own
(``topic.delete``). Each name is checked against the user's roles first: a request naming
a topic the user may not manage is refused whole (403), the sentence naming those topics.
"""

from __future__ import annotations

import re

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from console.accounts.permissions import MANAGE, TOPIC, Denial, forbidden_page, permissions_of
from console.core.post_only import post_only
from console.core.store import get_store
from console.monitoring import scale
from console.operations import topics as operations
from storeadapter.engine import MessageStore, StoreError
from storeadapter.summaries import topic_summaries

#: The most topics one request deletes.
MAX_SELECTED = 100
#: The longest name taken (a topic name is shorter): longer is not a topic.
MAX_NAME = 300


def _selected(request: HttpRequest) -> list[str] | str:
    """The names selected, in order and once each; or a sentence saying what is wrong."""
    chosen = [name.strip() for name in request.POST.getlist("topics")]
    chosen = list(dict.fromkeys(name for name in chosen if name))
    if not chosen:
        return "Select at least one topic to delete."
    if len(chosen) > MAX_SELECTED:
        return f"Select at most {MAX_SELECTED} topics at once."
    if any(len(name) > MAX_NAME for name in chosen):
        return "That is not a topic's name."
    return chosen


def _listing(names: list[str]) -> str:
    return ", ".join(names)


def confirmed(typed: str, chosen: list[str]) -> bool:
    """Whether ``typed`` is the number of topics chosen, or all their names (separated
    by commas, spaces or lines, in any order)."""
    typed = typed.strip()
    if typed == str(len(chosen)):
        return True
    given = [part for part in re.split(r"[\s,]+", typed) if part]
    return len(given) == len(chosen) and set(given) == set(chosen)


def _confirm_page(
    request: HttpRequest, store: MessageStore, chosen: list[str], error: str = ""
) -> HttpResponse:
    rows = topic_summaries(store, chosen, scale.SampledFigures())
    context = {
        "rows": rows,
        "chosen": chosen,
        "count": len(chosen),
        "messages_total": sum(row.messages or 0 for row in rows),
        "error": error,
    }
    return render(request, "topics/delete_selected.html", context)


@post_only(lambda: reverse("topics:list"))
def delete_selected(request: HttpRequest) -> HttpResponse:
    """Confirm, then delete, the topics selected on the list (see the module)."""
    back = reverse("topics:list")
    chosen = _selected(request)
    if isinstance(chosen, str):
        messages.error(request, f"{chosen} Nothing was deleted.")
        return redirect(back)
    permissions = permissions_of(request.user)
    refused = [name for name in chosen if not permissions.allows(TOPIC, name, MANAGE)]
    if refused:
        which = "topic" if len(refused) == 1 else "topics"
        return forbidden_page(
            request,
            Denial(
                False,
                f"Your roles do not allow you to delete the {which} {_listing(refused)}; "
                "nothing was deleted.",
            ),
        )
    store = get_store()
    existing = {info.name for info in store.topics()}
    missing = [name for name in chosen if name not in existing]
    if missing:
        which = "topic" if len(missing) == 1 else "topics"
        messages.error(
            request, f"There is no {which} {_listing(missing)} any more; nothing was deleted."
        )
        return redirect(back)
    if "confirm" not in request.POST:
        return _confirm_page(request, store, chosen)
    if not confirmed(request.POST["confirm"], chosen):
        return _confirm_page(
            request,
            store,
            chosen,
            f"That is not {len(chosen)} nor the topics' names; nothing was deleted.",
        )
    deleted, failed = [], []
    for name in chosen:
        try:
            operations.delete_topic(request.user, name)
        except (StoreError, KeyError) as error:
            failed.append(f"{name} ({error})")
        else:
            deleted.append(name)
    if deleted:
        noun = "topic" if len(deleted) == 1 else "topics"
        messages.success(request, f"Deleted {len(deleted)} {noun}: {_listing(deleted)}.")
    if failed:
        messages.error(request, f"Not deleted: {'; '.join(failed)}.")
    return redirect(back)
