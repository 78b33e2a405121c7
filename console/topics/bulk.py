"""/topics/selected/delete/: delete the topics selected on the topic list.

The list's "Delete selected…" posts the chosen names here; the answer is a confirmation
page that lists them (queues, messages) and asks the admin to type how many topics there
are, or their names, as deleting one topic asks for its name. Posted again with that typed,
each topic is deleted by ``console.operations.topics.delete_topic`` and audited on its own
(``topic.delete``). Each name is checked against the user's roles first: a request naming
a topic the user may not manage is refused whole (403), the sentence naming those topics.

The rule is this module's, for the page and the API's ``/api/v1/selected/topics/delete/``
alike: ``selection`` (what was chosen), ``refused`` (the roles, per topic), ``missing``,
``confirmed`` (the typed confirmation) and ``delete_each`` (one deletion and one audit row
per topic; a topic that fails is reported with its sentence, the others go on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

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


def selection(values: list[str]) -> list[str] | str:
    """The names selected, in order and once each; or a sentence saying what is wrong."""
    chosen = [name.strip() for name in values]
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


def refused(user: Any, chosen: list[str]) -> list[str]:
    """The topics of ``chosen`` that ``user``'s roles do not let them delete (manage)."""
    permissions = permissions_of(user)
    return [name for name in chosen if not permissions.allows(TOPIC, name, MANAGE)]


def refusal_sentence(names: list[str]) -> str:
    which = "topic" if len(names) == 1 else "topics"
    return (
        f"Your roles do not allow you to delete the {which} {_listing(names)}; nothing was deleted."
    )


def missing(store: MessageStore, chosen: list[str]) -> list[str]:
    """The topics of ``chosen`` the store does not hold."""
    existing = {info.name for info in store.topics()}
    return [name for name in chosen if name not in existing]


def missing_sentence(names: list[str]) -> str:
    which = "topic" if len(names) == 1 else "topics"
    return f"There is no {which} {_listing(names)} any more; nothing was deleted."


def unconfirmed_sentence(chosen: list[str]) -> str:
    return f"That is not {len(chosen)} nor the topics' names; nothing was deleted."


@dataclass(frozen=True)
class Deleted:
    """One selected topic's outcome: deleted (with the messages it held, as
    ``delete_topic`` counts them), or not, with the sentence saying why."""

    topic: str
    deleted: bool
    messages: int | None = None
    error: str | None = None


def delete_each(user: Any, chosen: list[str]) -> list[Deleted]:
    """Delete each topic of ``chosen`` (checked by the caller: roles, existence,
    confirmation) by ``console.operations.topics.delete_topic``, each audited on its own;
    one that fails does not stop the others."""
    outcomes = []
    for name in chosen:
        try:
            held = operations.delete_topic(user, name)
        except (StoreError, KeyError) as error:
            outcomes.append(Deleted(name, False, error=f"{error}"))
        else:
            outcomes.append(Deleted(name, True, messages=held))
    return outcomes


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
    chosen = selection(request.POST.getlist("topics"))
    if isinstance(chosen, str):
        messages.error(request, f"{chosen} Nothing was deleted.")
        return redirect(back)
    not_allowed = refused(request.user, chosen)
    if not_allowed:
        return forbidden_page(request, Denial(False, refusal_sentence(not_allowed)))
    store = get_store()
    gone = missing(store, chosen)
    if gone:
        messages.error(request, missing_sentence(gone))
        return redirect(back)
    if "confirm" not in request.POST:
        return _confirm_page(request, store, chosen)
    if not confirmed(request.POST["confirm"], chosen):
        return _confirm_page(
            request,
            store,
            chosen,
            unconfirmed_sentence(chosen),
        )
    outcomes = delete_each(request.user, chosen)
    deleted = [each.topic for each in outcomes if each.deleted]
    failed = [f"{each.topic} ({each.error})" for each in outcomes if not each.deleted]
    if deleted:
        noun = "topic" if len(deleted) == 1 else "topics"
        messages.success(request, f"Deleted {len(deleted)} {noun}: {_listing(deleted)}.")
    if failed:
        messages.error(request, f"Not deleted: {'; '.join(failed)}.")
    return redirect(back)
