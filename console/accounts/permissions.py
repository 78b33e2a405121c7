"""Who may do what: roles hold rules on topics and consumer groups, and one table says what
each URL needs.

A **rule** is (resource kind, name pattern, actions): on topics (or consumer groups) whose
name matches the pattern (shell-style: ``*``, ``?``, ``[…]``, case-sensitive), the actions
are allowed. The actions:

=========  ===========================================================================
view       see the topic or group: in lists, its page, its figures
read       read its messages (search, export, the message page, pulls; a group's DLQ)
produce    send to the topic (test messages, the API, event appends), freeze a queue
reset      change a group's committed offsets (resets, undo, commits through the API)
redrive    redrive or purge a group's dead letters
manage     create (a name the pattern matches) and delete topics, add and remove queues;
           delete a group
=========  ===========================================================================

A **role** is a Django group. The three built-in roles are presets whose rules cover
every topic and group: viewer (view, read), operator (also produce, reset, redrive) and
admin (everything, and the console-wide features: users, roles, alert rules). Any other
group is a scoped role: it holds ``RoleRule`` rows, edited by an admin on /accounts/roles/
or through ``/api/v1/roles/``. A user gets the union of their roles' rules (an SSO login
only has to put the user in groups). A user in a scoped role only sees the console as a
viewer where no topic or group is concerned (the store's health: disk use, flushes,
recovery; tasks); the store's totals, the retention report and the alerts count and show
only the topics and groups the user may view (``viewable``).

A group's own topics (``%RETRY%<group>``, ``%DLQ%<group>``) may also be viewed and read by
whoever may view and read the group.

**The table** ``NEEDS`` names, per URL pattern and method, what a request needs: a
console level (``level(...)``) or an action on the resource the URL names (``on(...)``:
from the URL, the query string or the posted form or JSON). Pages are checked by
``PermissionMiddleware``, the API by ``console.api.permissions.RolePermission``; both call
``denial``. A view whose resource only shows once it is read (a message by id) calls
``require`` itself; lists filter with ``Permissions.filter``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.accounts.roles import ADMIN, OPERATOR, ROLES, VIEWER, role_includes

TOPIC = "topic"
GROUP = "group"
KINDS = (TOPIC, GROUP)
VIEW, READ, PRODUCE, RESET, REDRIVE, MANAGE = (
    "view",
    "read",
    "produce",
    "reset",
    "redrive",
    "manage",
)
ACTIONS = (VIEW, READ, PRODUCE, RESET, REDRIVE, MANAGE)
#: The actions that mean something for each kind.
KIND_ACTIONS: dict[str, tuple[str, ...]] = {
    TOPIC: (VIEW, READ, PRODUCE, MANAGE),
    GROUP: (VIEW, READ, RESET, REDRIVE, MANAGE),
}
ACTION_HELP = {
    VIEW: "see it in lists and its page",
    READ: "read its messages (a group: its dead letters)",
    PRODUCE: "send to it, freeze its queues, change its settings",
    RESET: "change its committed offsets",
    REDRIVE: "redrive or purge its dead letters",
    MANAGE: "create and delete it, add and remove queues",
}

_RETRY_PREFIX = "%RETRY%"
_DLQ_PREFIX = "%DLQ%"


@dataclass(frozen=True)
class Grant:
    """A rule in force: ``actions`` on resources of ``kind`` matching ``pattern``."""

    kind: str
    pattern: str
    actions: frozenset[str]

    def allows(self, kind: str, name: str, action: str) -> bool:
        return kind == self.kind and action in self.actions and fnmatchcase(name, self.pattern)


def _everything(actions: Iterable[str]) -> tuple[Grant, ...]:
    wanted = frozenset(actions)
    return tuple(Grant(kind, "*", wanted & frozenset(KIND_ACTIONS[kind])) for kind in KINDS)


#: The built-in roles' rules.
PRESETS: dict[str, tuple[Grant, ...]] = {
    VIEWER: _everything({VIEW, READ}),
    OPERATOR: _everything({VIEW, READ, PRODUCE, RESET, REDRIVE}),
    ADMIN: _everything(ACTIONS),
}


def check_rule(kind: str, pattern: str, actions: Iterable[str]) -> list[str]:
    """The rule's actions, in the table's order; ValueError with a sentence if it is not a
    rule (unknown kind or action, empty or over-long pattern, no action)."""
    if kind not in KINDS:
        raise ValueError(f"A rule's kind is one of {', '.join(KINDS)}, not {kind!r}.")
    if not isinstance(pattern, str) or not pattern.strip() or len(pattern) > 255:
        raise ValueError("A rule's pattern is 1 to 255 characters, such as team-a.* or *.")
    wanted = list(actions)
    unknown = [a for a in wanted if a not in KIND_ACTIONS[kind]]
    if unknown:
        raise ValueError(
            f"On a {kind} the actions are {', '.join(KIND_ACTIONS[kind])}; "
            f"not {', '.join(map(str, unknown))}."
        )
    if not wanted:
        raise ValueError("A rule allows at least one action.")
    return [a for a in KIND_ACTIONS[kind] if a in wanted]


class Permissions:
    """What one user may do: their console level and the rules of their roles."""

    def __init__(self, user: Any) -> None:
        self.level: str | None = None
        self.grants: tuple[Grant, ...] = ()
        self._mask_rules: list | None = None
        if user is None or not getattr(user, "is_authenticated", False):
            return
        if not getattr(user, "is_active", True):
            return
        if user.is_superuser:
            self.level = ADMIN
            self.grants = PRESETS[ADMIN]
            return
        from django.contrib.auth.models import Group

        # One query: the user's groups, each with its rules (a group without rules once,
        # its rule columns empty); ``role_of``'s answer from the names.
        rows = (
            Group.objects.filter(user=user)
            .order_by("name", "rules__kind", "rules__pattern", "rules__pk")
            .values_list("name", "rules__kind", "rules__pattern", "rules__actions")
            if user.pk
            else []
        )
        names: set[str] = set()
        scoped: list[Grant] = []
        for name, kind, pattern, actions in rows:
            names.add(name)
            if kind is not None:
                scoped.append(Grant(kind, pattern, frozenset(actions)))
        grants: list[Grant] = []
        for name in ROLES:
            if name in names:
                grants.extend(PRESETS[name])
                self.level = name  # ROLES is weakest first: the strongest stays
        grants.extend(scoped)
        if self.level is None and len(grants):
            self.level = VIEWER  # a scoped role sees the console-wide pages as a viewer
        self.grants = tuple(grants)

    def has_level(self, level: str) -> bool:
        return role_includes(self.level, level)

    def granted(self, kind: str, name: str, action: str) -> bool:
        """Whether a rule of the user's roles allows ``action`` on ``name`` (masked
        reading left out)."""
        if self.level is None:
            return False
        if any(grant.allows(kind, name, action) for grant in self.grants):
            return True
        if kind == TOPIC and action in (VIEW, READ):
            for prefix in (_RETRY_PREFIX, _DLQ_PREFIX):
                if name.startswith(prefix) and len(name) > len(prefix):
                    return self.granted(GROUP, name[len(prefix) :], action)
        return False

    def allows(self, kind: str, name: str, action: str) -> bool:
        """Whether the user may do ``action`` on the topic or group ``name``; reading a
        topic the user may only view is allowed, masked, when a mask rule covers it
        (console/accounts/masking.py)."""
        if self.granted(kind, name, action):
            return True
        return (
            kind == TOPIC
            and action == READ
            and self.granted(TOPIC, name, VIEW)
            and bool(self._masks_matching(name))
        )

    @property
    def mask_rules(self) -> list:
        if self._mask_rules is None:
            from console.accounts.models import MaskRule

            self._mask_rules = list(MaskRule.objects.all()) if self.level is not None else []
        return self._mask_rules

    def _masks_matching(self, topic: str) -> list:
        return [rule for rule in self.mask_rules if fnmatchcase(topic, rule.pattern)]

    def masks_for(self, topic: str) -> list | None:
        """None when the user reads ``topic`` whole; else the mask rules to apply to its
        messages (empty: the user may not read it at all)."""
        if self.granted(TOPIC, topic, READ):
            return None
        if not self.granted(TOPIC, topic, VIEW):
            return []
        return self._masks_matching(topic)

    @property
    def reads_masked(self) -> bool:
        """Whether some topic may be read masked by the user (then reads go through the
        masking store)."""
        if any(g.kind == TOPIC and g.pattern == "*" and READ in g.actions for g in self.grants):
            return False  # reads every topic whole: no query for the mask rules
        return bool(self.mask_rules)

    def allows_some(self, kind: str, action: str) -> bool:
        """Whether some rule of the user allows ``action`` on some ``kind``."""
        if self.level is None:
            return False
        if any(grant.kind == kind and action in grant.actions for grant in self.grants):
            return True
        return (
            kind == TOPIC
            and action == READ
            and bool(self.mask_rules)
            and any(grant.kind == TOPIC and VIEW in grant.actions for grant in self.grants)
        )

    def filter(self, kind: str, items: Iterable, action: str = VIEW, name=lambda item: item):
        """The items (names, or objects whose ``name(item)`` is one) the user may ``action``."""
        return [item for item in items if self.allows(kind, name(item), action)]

    def unscoped(self, kind: str) -> bool:
        """Whether a rule lets the user view every topic (or group): a list needs no
        filtering."""
        return any(g.kind == kind and g.pattern == "*" and VIEW in g.actions for g in self.grants)


def viewable(user: Any, kind: str) -> Callable[[str], bool] | None:
    """None when the user may view every topic (or group); else whether they may view the
    one named: what store-wide totals count for a scoped role."""
    permissions = permissions_of(user)
    if permissions.unscoped(kind):
        return None
    return lambda name: permissions.allows(kind, name, VIEW)


def visible_topics(user: Any, infos: list) -> list:
    """The topics (objects with a ``name``) the user may view, in the same order."""
    permissions = permissions_of(user)
    if permissions.unscoped(TOPIC):
        return list(infos)
    return permissions.filter(TOPIC, infos, VIEW, lambda info: info.name)


def visible_groups(user: Any, summaries: list) -> list:
    """The groups (objects with a ``group`` name) the user may view, in the same order."""
    permissions = permissions_of(user)
    if permissions.unscoped(GROUP):
        return list(summaries)
    return permissions.filter(GROUP, summaries, VIEW, lambda summary: summary.group)


_CACHE = "_tidemark_permissions"


def permissions_of(user: Any) -> Permissions:
    """The user's ``Permissions``, worked out once per user object (once per request)."""
    cached = getattr(user, _CACHE, None) if user is not None else None
    if cached is None:
        cached = Permissions(user)
        if user is not None:
            with contextlib.suppress(AttributeError):  # an object without a __dict__
                setattr(user, _CACHE, cached)
    return cached


def require(user: Any, kind: str, name: str, action: str) -> None:
    """Raise ``PermissionDenied`` (a sentence) unless the user may ``action`` on ``name``."""
    if not permissions_of(user).allows(kind, name, action):
        raise PermissionDenied(f"Your roles do not allow you to {action} the {kind} {name!r}.")


# ------------------------------------------------------------------------ the table


@dataclass(frozen=True)
class Need:
    """What a request needs: a console ``level``; or ``action`` on a ``kind`` whose name is
    in ``source`` ("url", "query", "form": the URL's keyword ``key``, the query string's or
    the posted form's/JSON's field ``key``; from the query or form, only when given).
    ``actions_by_field`` picks the action by a posted field's value (a page whose one URL
    takes several actions)."""

    level: str | None = None
    kind: str | None = None
    action: str | None = None
    source: str = "url"
    key: str = ""
    actions_by_field: tuple[str, dict[str, str]] | None = None
    public: bool = False
    extra: tuple[Need, ...] = field(default=())


PUBLIC = Need(public=True)


def level_only(need: Need | None) -> Need | None:
    """``need`` without its actions on resources: its level alone."""
    if need is None or need.public:
        return need
    return Need(level=need.level)


def reads_body(need: Need | None) -> bool:
    """Whether checking ``need`` reads the posted form or JSON body."""
    if need is None:
        return False
    return any(
        each.source == "form" or each.actions_by_field is not None for each in (need, *need.extra)
    )


def level(name: str) -> Need:
    return Need(level=name)


def on(kind: str, action: str, key: str | None = None, source: str = "url") -> Need:
    return Need(level=VIEWER, kind=kind, action=action, source=source, key=key or kind)


def on_each(kind: str, action: str) -> Need:
    """``action`` on each of several resources a form selects: the user must be allowed it
    on some ``kind`` here, and the view checks each one selected (refusing the request
    whole, naming those it may not act on)."""
    return Need(level=VIEWER, kind=kind, action=action, source="form", key="")


def both(first: Need, second: Need) -> Need:
    """Both needs (the first's level)."""
    return Need(
        level=first.level,
        kind=first.kind,
        action=first.action,
        source=first.source,
        key=first.key,
        actions_by_field=first.actions_by_field,
        extra=(second,),
    )


def by_field(kind: str, key: str, field_name: str, actions: dict[str, str]) -> Need:
    return Need(
        level=VIEWER, kind=kind, source="url", key=key, actions_by_field=(field_name, actions)
    )


def pages(read: Need, post: Need | None = None) -> dict[str, Need]:
    table = {"GET": read}
    if post is not None:
        table["POST"] = post
    return table


def form_action(need: Need) -> dict[str, Need]:
    """A URL only a form posts to: a GET is sent back to the form, and needs the same."""
    return {"GET": need, "POST": need}


V, OP, A = level(VIEWER), level(OPERATOR), level(ADMIN)

#: What every console URL pattern (``namespace:name``) needs, per method; HEAD and
#: OPTIONS need what GET does; a method not listed is left to the view (405).
NEEDS: dict[str, dict[str, Need]] = {
    # Public, or any logged-in user.
    "login": {"GET": PUBLIC, "POST": PUBLIC, "PUT": PUBLIC},
    "logout": {"POST": PUBLIC},
    "password_reset": {"GET": PUBLIC, "POST": PUBLIC, "PUT": PUBLIC},
    "password_reset_done": {"GET": PUBLIC},
    "password_reset_confirm": {m: PUBLIC for m in ("GET", "POST", "PUT", "PATCH", "DELETE")},
    "password_reset_complete": {"GET": PUBLIC},
    "password_change": {"GET": PUBLIC, "POST": PUBLIC, "PUT": PUBLIC},
    "password_change_done": {"GET": PUBLIC},
    # One's own account and its TOTP (any logged-in user: the views ask for a login);
    # the login's code step and single sign-on (before any login).
    "account": {"GET": PUBLIC},
    "totp_setup": form_action(PUBLIC),
    "totp_confirm": form_action(PUBLIC),
    "totp_remove": form_action(PUBLIC),
    "login_code": {"GET": PUBLIC, "POST": PUBLIC},
    "sso_start": {"GET": PUBLIC},
    "sso_callback": {"GET": PUBLIC},
    "healthz": {"GET": PUBLIC},
    "readyz": {"GET": PUBLIC},
    "healthz-background": {"GET": PUBLIC},
    "metrics": {"GET": PUBLIC},
    "favicon": {"GET": PUBLIC},
    # Console-wide pages.
    "home": pages(V),
    "user_list": pages(A, A),
    "user_action": form_action(A),
    "user_unlock": form_action(A),
    "role_list": pages(A, A),
    "token_list": pages(V, V),
    "token_revoke": form_action(V),
    "audit:list": pages(V),
    "storage:page": pages(V),
    "alerts:index": pages(V),
    "alerts:rule_create": pages(A, A),
    "alerts:rule_edit": pages(A, A),
    "alerts:rule_action": form_action(A),
    "alerts:silence_create": pages(OP, OP),
    "alerts:silence_expire": form_action(OP),
    "alerts:test_email": form_action(A),
    "background:tasks": pages(V),
    "background:workers": pages(V),
    "monitoring:chart": pages(V),
    "api-docs": pages(V),
    # Topics and messages.
    "topics:list": pages(V, on(TOPIC, MANAGE, "name", "form")),
    "topics:detail": pages(
        on(TOPIC, VIEW),
        by_field(
            TOPIC,
            "topic",
            "action",
            {
                "send": PRODUCE,
                "append": PRODUCE,
                "freeze": PRODUCE,
                "unfreeze": PRODUCE,
                "add_queues": MANAGE,
                "remove_queue": MANAGE,
                "delete": MANAGE,
                "settings": PRODUCE,
            },
        ),
    ),
    "topics:delete_selected": form_action(on_each(TOPIC, MANAGE)),
    "messages:search": pages(on(TOPIC, READ, "topic", "query")),
    "messages:export": pages(on(TOPIC, READ, "topic", "query")),
    "messages:detail": pages(V),  # the view checks the message's topic (``require``)
    "messages:body": pages(V),
    "topics:tail": pages(on(TOPIC, READ)),
    "streams:stream": pages(on(TOPIC, READ, "topic", "query")),
    # Groups.
    "groups:list": pages(V),
    "groups:detail": pages(on(GROUP, VIEW)),
    "groups:reset_preview": form_action(on(GROUP, RESET)),
    "groups:reset_apply": form_action(on(GROUP, RESET)),
    "groups:reset_again": form_action(on(GROUP, RESET)),
    "groups:resets": pages(on(GROUP, VIEW)),
    "groups:reset_undo": pages(on(GROUP, RESET)),
    "groups:reset_selected": form_action(on_each(GROUP, RESET)),
    "groups:dlq": pages(on(GROUP, READ), on(GROUP, REDRIVE)),
    "groups:delete": form_action(on(GROUP, MANAGE)),
    # API v1.
    "api-topics": {"GET": V, "POST": on(TOPIC, MANAGE, "name", "form")},
    "api-topic": {"GET": on(TOPIC, VIEW), "DELETE": on(TOPIC, MANAGE)},
    "api-topics-delete-selected": {"POST": on_each(TOPIC, MANAGE)},
    "api-queues": {"GET": on(TOPIC, VIEW), "POST": on(TOPIC, MANAGE)},
    "api-queue": {"GET": on(TOPIC, VIEW), "DELETE": on(TOPIC, MANAGE)},
    "api-topic-settings": {"GET": on(TOPIC, VIEW), "PATCH": on(TOPIC, PRODUCE)},
    "api-queue-freeze": {"POST": on(TOPIC, PRODUCE)},
    "api-queue-unfreeze": {"POST": on(TOPIC, PRODUCE)},
    "api-topic-messages": {"POST": on(TOPIC, PRODUCE)},
    "api-stream-events": {"GET": on(TOPIC, READ), "POST": on(TOPIC, PRODUCE)},
    "api-queue-messages": {"GET": on(TOPIC, READ)},
    "api-topic-tail": {"GET": on(TOPIC, READ)},
    "api-topic-tail-export": {"GET": on(TOPIC, READ)},
    "api-topic-filter": {"GET": on(TOPIC, READ)},
    "api-topic-filter-export": {"GET": on(TOPIC, READ)},
    "api-queue-commit": {"POST": both(on(TOPIC, READ), on(GROUP, RESET, "group", "form"))},
    "api-messages": {"GET": on(TOPIC, READ, "topic", "query")},
    "api-messages-export": {"GET": on(TOPIC, READ, "topic", "query")},
    "api-message": {"GET": V},  # the view checks the message's topic
    "api-message-consumption": {"GET": V},  # the view checks the message's topic
    "api-groups": {"GET": V},
    "api-group": {"GET": on(GROUP, VIEW), "DELETE": on(GROUP, MANAGE)},
    "api-group-reset": {"POST": on(GROUP, RESET)},
    "api-selected-groups-reset": {"POST": on_each(GROUP, RESET)},
    "api-group-resets": {"GET": on(GROUP, VIEW)},
    "api-group-reset-detail": {"GET": on(GROUP, VIEW)},
    "api-group-reset-undo": {"POST": on(GROUP, RESET)},
    "api-group-history": {"GET": on(GROUP, VIEW)},
    "api-group-dlq": {"GET": on(GROUP, READ), "DELETE": on(GROUP, REDRIVE)},
    "api-group-dlq-redrive": {"POST": on(GROUP, REDRIVE)},
    "api-storage": {"GET": V},
    "api-audit": {"GET": V},
    "api-roles": {"GET": A, "POST": A},
    "api-role-rule": {"DELETE": A},
    "api-role-members": {"POST": A},
    "api-masks": {"GET": A, "POST": A},
    "api-mask": {"DELETE": A},
    "api-alert-rules": {"GET": V, "POST": A},
    "api-alert-rule": {"GET": V, "PUT": A, "PATCH": A, "DELETE": A},
    "api-alert-events": {"GET": V},
    "api-alert-notifications": {"GET": V},
    "api-alert-silences": {"GET": V, "POST": OP},
    "api-alert-silence-expire": {"POST": OP},
    "api-alert-test-email": {"POST": A},
    "api-tasks": {"GET": V},
    "api-schema": {"GET": V},
}

_SAFE_ALIASES = {"HEAD": "GET", "OPTIONS": "GET", "TRACE": "GET"}


def need_for(view_name: str | None, method: str) -> Need | None:
    """What ``method`` on the URL pattern ``view_name`` needs (None: not in the table)."""
    table = NEEDS.get(view_name or "")
    if table is None:
        return None
    method = method.upper()
    return table.get(method) or table.get(_SAFE_ALIASES.get(method, ""))


@dataclass(frozen=True)
class Denial:
    """Why a request is refused: ``login`` (not logged in) or a 403 with a sentence."""

    login: bool
    message: str
    level: str | None = None


def _resource_name(need: Need, kwargs: dict, query, form) -> str | None:
    if need.source == "url":
        value = kwargs.get(need.key)
    elif need.source == "query":
        value = query.get(need.key) if query is not None else None
    else:
        value = form.get(need.key) if hasattr(form, "get") else None
    return value if isinstance(value, str) and value else None


def denial(user: Any, need: Need | None, kwargs: dict, query=None, form=None) -> Denial | None:
    """None when ``user`` may make the request ``need`` describes (its URL keywords
    ``kwargs``, query string ``query``, posted form or JSON ``form``); else why not."""
    if need is None or need.public:
        return None
    if user is None or not user.is_authenticated:
        return Denial(True, "Log in first.")
    permissions = permissions_of(user)
    if need.level is not None and not permissions.has_level(need.level):
        held = permissions.level or "none"
        return Denial(False, f"This needs the {need.level} role; yours is {held}.", need.level)
    for each in (need, *need.extra):
        if each.kind is None:
            continue
        actions = [each.action]
        if each.actions_by_field is not None:
            field_name, by_value = each.actions_by_field
            value = form.get(field_name) if hasattr(form, "get") else None
            chosen = by_value.get(value) if isinstance(value, str) else None
            # An unknown action: any of them will do (the view says it is unknown).
            actions = [chosen] if chosen else sorted(set(by_value.values()))
        name = _resource_name(each, kwargs, query, form)
        if name is None:
            # Not named here (the view refuses, or filters what it shows): the user must
            # be allowed the action on some topic or group at least.
            if not any(permissions.allows_some(each.kind, action) for action in actions):
                return Denial(
                    False, f"Your roles do not allow you to {actions[0]} any {each.kind}."
                )
            continue
        if not any(permissions.allows(each.kind, name, action) for action in actions):
            return Denial(
                False, f"Your roles do not allow you to {actions[0]} the {each.kind} {name!r}."
            )
    return None


def forbidden_page(request: HttpRequest, refused: Denial) -> HttpResponse:
    return render(
        request,
        "403.html",
        {
            "required_role": refused.level,
            "current_role": permissions_of(request.user).level,
            "reason": refused.message,
        },
        status=403,
    )


class PermissionMiddleware:
    """Checks every console page against ``NEEDS`` before its view runs (the API is checked
    by its permission class, after its own authentication)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        from console.accounts.masking import current_request

        token = current_request.set(request)
        try:
            return self.get_response(request)
        finally:
            current_request.reset(token)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        match = getattr(request, "resolver_match", None)
        need = need_for(match.view_name if match else None, request.method or "GET")
        form = request.POST if request.method == "POST" else None
        refused = denial(request.user, need, view_kwargs, request.GET, form)
        if refused is None:
            return None
        if refused.login:
            return redirect_to_login(request.get_full_path())
        return forbidden_page(request, refused)


def may_open(request: HttpRequest, path: str) -> bool:
    """Whether the request's user may GET the console page at ``path`` (a path that is no
    console page: True, the link is not the console's to hide)."""
    from urllib.parse import parse_qs, urlsplit

    from django.urls import Resolver404, resolve

    parts = urlsplit(path)
    try:
        match = resolve(parts.path)
    except Resolver404:
        return True
    need = need_for(match.view_name, "GET")
    if need is None:
        return True
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    return denial(request.user, need, match.kwargs, query, None) is None
