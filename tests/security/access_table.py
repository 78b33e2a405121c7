"""The access table: every URL pattern of the console, a sample URL for it, and the
weakest level allowed per HTTP method; and the helpers the security tests share.

A new URL pattern must be added to ``ACCESS`` (tests/security/test_access.py fails until
it is); keys are the pattern's name (``namespace:name``) or, for a pattern without a
name, its route. The Django admin site is the exception: its patterns follow from the
registered models and are all staff-only (``ADMIN_SITE_NAMESPACE``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

ANONYMOUS = "anonymous"
LOGGED_IN = "logged_in"  # any logged-in user, even one in no role group
VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"

#: Weakest first; each client's rank says which of these it holds.
LEVELS = (ANONYMOUS, LOGGED_IN, VIEWER, OPERATOR, ADMIN)
#: The clients tried, each holding the level of the same name (nobody: LOGGED_IN).
CLIENTS = {"anonymous": ANONYMOUS, "nobody": LOGGED_IN, "viewer": VIEWER}
CLIENTS.update({"operator": OPERATOR, "admin": ADMIN})

ALL_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class Ref:
    """A sample kwarg taken from the `world` fixture (ids exist only once it is made)."""

    name: str


@dataclass(frozen=True)
class Rule:
    """Who may use a URL pattern: the minimal level per method, and a sample URL."""

    kind: str  # "page" or "api"
    methods: dict[str, str]
    kwargs: dict[str, Any] = field(default_factory=dict)
    path: str | None = None  # for patterns without a name
    query: str = ""
    #: Statuses an allowed request may get besides the usual ones (e.g. /readyz: 503).
    also_ok: tuple[int, ...] = ()


def page(
    *, read: str | None = None, post: str | None = None, other: dict | None = None, **options: Any
) -> Rule:
    """A page: GET and HEAD need `read`, POST needs `post` (a None: not accepted); `other`
    names any further method and its level."""
    methods = {}
    if read is not None:
        methods.update(GET=read, HEAD=read)
    if post is not None:
        methods["POST"] = post
    methods.update(other or {})
    return Rule("page", methods, **options)


def form_action(*, post: str, **options: Any) -> Rule:
    """A URL only a form posts to (console.core.post_only): POST needs `post`; GET and HEAD
    need the same role and are sent back (303) to the form's page, changing nothing."""
    return page(post=post, other={"GET": post, "HEAD": post}, **options)


def api(**options: Any) -> Rule:
    """An API endpoint; `read` covers GET and HEAD, the other keyword names are methods."""
    read = options.pop("read", None)
    changes = [m for m in ("post", "put", "patch", "delete") if m in options]
    methods = {m.upper(): options.pop(m) for m in changes}
    if read is not None:
        methods = {"GET": read, "HEAD": read, **methods}
    return Rule("api", methods, **options)


TOPIC = {"topic": "orders"}
QUEUE = {"topic": "orders", "queue": 0}
GROUP = {"group": "billing"}
RESET = {"group": "billing", "reset": Ref("reset_id")}
STREAM = {"topic": "accounts", "stream_id": "account-1"}

#: Every URL pattern, by its name (``namespace:name``) or, when it has none, its route.
ACCESS: dict[str, Rule] = {
    # Public: login, logout, password reset, liveness and readiness. Django's form views
    # answer PUT as POST; a reset link that is not valid shows its page for any method.
    "login": page(read=ANONYMOUS, post=ANONYMOUS, other={"PUT": ANONYMOUS}),
    "logout": page(post=ANONYMOUS),
    "password_reset": page(read=ANONYMOUS, post=ANONYMOUS, other={"PUT": ANONYMOUS}),
    "password_reset_done": page(read=ANONYMOUS),
    "password_reset_confirm": page(
        read=ANONYMOUS,
        post=ANONYMOUS,
        other={"PUT": ANONYMOUS, "PATCH": ANONYMOUS, "DELETE": ANONYMOUS},
        kwargs={"uidb64": "MQ", "token": "not-a-token"},
    ),
    "password_reset_complete": page(read=ANONYMOUS),
    "healthz": page(read=ANONYMOUS),
    "readyz": page(read=ANONYMOUS),
    # 503 until a worker has finished a task: the test starts none.
    "healthz-background": page(read=ANONYMOUS, also_ok=(503,)),
    # Prometheus: a bearer token or an allowed address (the test client's is 127.0.0.1).
    "metrics": page(read=ANONYMOUS),
    # Browsers ask for it on every page: a redirect to the static icon.
    "favicon": page(read=ANONYMOUS),
    # Any logged-in user changes their own password.
    "password_change": page(read=LOGGED_IN, post=LOGGED_IN, other={"PUT": LOGGED_IN}),
    "password_change_done": page(read=LOGGED_IN),
    # A login's TOTP step (without a right password first: back to the login page) and
    # single sign-on (404 while not configured).
    "login_code": page(read=ANONYMOUS, post=ANONYMOUS),
    "sso_start": page(read=ANONYMOUS),
    "sso_callback": page(read=ANONYMOUS),
    # Any logged-in user's own account and two-factor.
    "account": page(read=LOGGED_IN),
    "totp_setup": form_action(post=LOGGED_IN),
    "totp_confirm": form_action(post=LOGGED_IN),
    "totp_remove": form_action(post=LOGGED_IN),
    # Console pages.
    "home": page(read=VIEWER),
    "user_list": page(read=ADMIN, post=ADMIN),
    "user_action": form_action(post=ADMIN, kwargs={"user_id": Ref("user_id")}),
    "user_unlock": form_action(post=ADMIN),
    "role_list": page(read=ADMIN, post=ADMIN),
    "token_list": page(read=VIEWER, post=VIEWER),
    "token_revoke": form_action(post=VIEWER, kwargs={"token_id": Ref("token_id")}),
    "audit:list": page(read=VIEWER),
    "topics:list": page(read=VIEWER, post=ADMIN),
    "topics:detail": page(read=VIEWER, post=OPERATOR, kwargs=TOPIC),
    "topics:delete_selected": form_action(post=ADMIN),
    "topics:tail": page(read=VIEWER, kwargs=TOPIC),
    "messages:search": page(read=VIEWER),
    "streams:stream": page(read=VIEWER),
    "messages:export": page(read=VIEWER),
    "messages:detail": page(read=VIEWER, kwargs={"message_id": Ref("message_id")}),
    "messages:body": page(read=VIEWER, kwargs={"message_id": Ref("message_id")}),
    "storage:page": page(read=VIEWER),
    "groups:list": page(read=VIEWER),
    "groups:detail": page(read=VIEWER, kwargs=GROUP),
    "groups:reset_selected": form_action(post=OPERATOR),
    "groups:reset_preview": form_action(post=OPERATOR, kwargs=GROUP),
    "groups:reset_apply": form_action(post=OPERATOR, kwargs=GROUP),
    "groups:reset_again": form_action(post=OPERATOR, kwargs=GROUP),
    "groups:resets": page(read=VIEWER, kwargs=GROUP),
    "groups:reset_undo": page(read=OPERATOR, kwargs=RESET),
    "groups:dlq": page(read=VIEWER, post=OPERATOR, kwargs=GROUP),
    "groups:delete": form_action(post=ADMIN, kwargs=GROUP),
    "alerts:index": page(read=VIEWER),
    "alerts:rule_create": page(read=ADMIN, post=ADMIN),
    "alerts:rule_edit": page(read=ADMIN, post=ADMIN, kwargs={"rule_id": Ref("rule_id")}),
    "alerts:rule_action": form_action(post=ADMIN, kwargs={"rule_id": Ref("rule_id")}),
    "alerts:silence_create": page(read=OPERATOR, post=OPERATOR),
    "alerts:silence_expire": form_action(post=OPERATOR, kwargs={"silence_id": Ref("silence_id")}),
    "alerts:test_email": form_action(post=ADMIN),
    "background:tasks": page(read=VIEWER),
    "background:workers": page(read=VIEWER),
    "monitoring:chart": page(read=VIEWER, kwargs={"kind": "dashboard"}),
    # API v1.
    "api-topics": api(read=VIEWER, post=ADMIN),
    "api-topic": api(read=VIEWER, delete=ADMIN, kwargs=TOPIC),
    "api-topics-delete-selected": api(post=ADMIN),
    "api-queues": api(read=VIEWER, post=ADMIN, kwargs=TOPIC),
    "api-queue": api(read=VIEWER, delete=ADMIN, kwargs=QUEUE),
    "api-topic-settings": api(read=VIEWER, patch=OPERATOR, kwargs=TOPIC),
    "api-queue-freeze": api(post=OPERATOR, kwargs=QUEUE),
    "api-queue-unfreeze": api(post=OPERATOR, kwargs=QUEUE),
    "api-topic-messages": api(post=OPERATOR, kwargs=TOPIC),
    "api-topic-tail": api(read=VIEWER, kwargs=TOPIC),
    "api-topic-tail-export": api(read=VIEWER, kwargs=TOPIC),
    "api-topic-filter": api(read=VIEWER, kwargs=TOPIC),
    "api-topic-filter-export": api(read=VIEWER, kwargs=TOPIC),
    "api-stream-events": api(read=VIEWER, post=OPERATOR, kwargs=STREAM),
    "api-queue-messages": api(read=VIEWER, kwargs=QUEUE),
    "api-queue-commit": api(post=OPERATOR, kwargs=QUEUE),
    "api-messages": api(read=VIEWER),
    "api-messages-export": api(read=VIEWER),
    "api-message": api(read=VIEWER, kwargs={"message_id": Ref("message_id")}),
    "api-message-consumption": api(read=VIEWER, kwargs={"message_id": Ref("message_id")}),
    "api-groups": api(read=VIEWER),
    "api-group": api(read=VIEWER, delete=ADMIN, kwargs=GROUP),
    "api-group-reset": api(post=OPERATOR, kwargs=GROUP),
    "api-selected-groups-reset": api(post=OPERATOR),
    "api-group-resets": api(read=VIEWER, kwargs=GROUP),
    "api-group-reset-detail": api(read=VIEWER, kwargs=RESET),
    "api-group-reset-undo": api(post=OPERATOR, kwargs=RESET),
    "api-group-history": api(read=VIEWER, kwargs=GROUP),
    "api-group-dlq": api(read=VIEWER, delete=OPERATOR, kwargs=GROUP),
    "api-group-dlq-redrive": api(post=OPERATOR, kwargs=GROUP),
    "api-storage": api(read=VIEWER),
    "api-audit": api(read=VIEWER),
    "api-roles": api(read=ADMIN, post=ADMIN),
    "api-role-rule": api(delete=ADMIN, kwargs={"rule_id": 999_999}),
    "api-role-members": api(post=ADMIN, kwargs={"role": "team-a"}),
    "api-masks": api(read=ADMIN, post=ADMIN),
    "api-mask": api(delete=ADMIN, kwargs={"mask_id": 999_999}),
    "api-alert-rules": api(read=VIEWER, post=ADMIN),
    "api-alert-rule": api(
        read=VIEWER, put=ADMIN, patch=ADMIN, delete=ADMIN, kwargs={"rule_id": Ref("rule_id")}
    ),
    "api-alert-events": api(read=VIEWER),
    "api-alert-notifications": api(read=VIEWER),
    "api-alert-silences": api(read=VIEWER, post=OPERATOR),
    "api-alert-silence-expire": api(post=OPERATOR, kwargs={"silence_id": Ref("silence_id")}),
    "api-alert-test-email": api(post=ADMIN),
    "api-tasks": api(read=VIEWER),
    # The OpenAPI document and its docs page need a login, as every page does (issue 21).
    "api-schema": api(read=VIEWER),
    "api-docs": page(read=VIEWER),
    # Any other path under /api/: a JSON 404 for everyone, whatever the method.
    r"api/^[\s\S]*$": api(
        read=ANONYMOUS,
        post=ANONYMOUS,
        put=ANONYMOUS,
        patch=ANONYMOUS,
        delete=ANONYMOUS,
        path="/api/v1/no-such-endpoint/",
    ),
}

#: The Django admin site: staff only, whatever the console role. Its patterns come from the
#: registered models; the site checks every one of them the same way (AdminSite.admin_view).
ADMIN_SITE_NAMESPACE = "admin"
ADMIN_SITE_SAMPLES = (
    ("GET", "/admin/"),
    ("GET", "/admin/auth/user/"),
    ("POST", "/admin/auth/user/add/"),
    ("GET", "/admin/audit/auditentry/"),
    ("GET", "/admin/auth/"),
    ("GET", "/admin/no-such-page/"),
)


def url_patterns(patterns=None, prefix: str = "", namespace: str | None = None):
    """(key, route, namespace) of every pattern, resolvers walked recursively."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            inner = namespace
            if pattern.namespace:
                inner = f"{namespace}:{pattern.namespace}" if namespace else pattern.namespace
            yield from url_patterns(pattern.url_patterns, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern):
            route = prefix + str(pattern.pattern)
            if pattern.name:
                key = f"{namespace}:{pattern.name}" if namespace else pattern.name
            else:
                key = route
            yield key, route, namespace


def _rows(model, *columns: str, order: str | None = None) -> list[tuple]:
    """The rows of ``model``'s table (``columns``, by default every concrete column),
    ordered by ``order`` (default: the primary key), as the database holds them: one SQL
    query, without the ORM's query building (each snapshot is taken before and after a
    request, ~1,700 times in the access tests)."""
    from django.db import connection

    meta = model._meta
    names = columns or tuple(f.column for f in meta.concrete_fields)
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(map(quote, names))} FROM {quote(meta.db_table)}"
            f" ORDER BY {order or quote(meta.pk.column)}"
        )
        return cursor.fetchall()


def snapshot(store) -> dict[str, Any]:
    """Everything a request could change, as plain values: each table's rows as the
    database holds them (a change to any column of a rule or a silence shows)."""
    from django.contrib.auth.models import Group

    from console.accounts.models import ApiToken
    from console.alerts.models import AlertRule, Silence
    from console.audit.models import AuditEntry
    from storeadapter.summaries import group_summaries, topic_summaries

    user = get_user_model()
    membership = user.groups.through
    names = dict(_rows(Group, "id", "name"))
    groups: dict[Any, list[str]] = {}
    member, group = (membership._meta.get_field(f).column for f in ("user", "group"))
    for user_id, group_id in _rows(membership, member, group):
        groups.setdefault(user_id, []).append(names[group_id])
    return {
        "audit": AuditEntry.objects.count(),
        "users": [
            (*row, sorted(groups.get(row[0], ())))
            for row in _rows(user, "id", "username", "is_active", "password")
        ],
        "tokens": _rows(ApiToken, "id"),
        "rules": _rows(AlertRule),
        "silences": _rows(Silence),
        "topics": [(t.name, t.queues, t.frozen_queues, t.messages) for t in topic_summaries(store)],
        "groups": [
            (g.group, [(q.topic, q.queue, q.committed) for q in g.queues])
            for g in group_summaries(store, with_queues=True)
        ],
    }


def sample_url(key: str, rule: Rule, world: dict[str, Any]) -> str:
    if rule.path is not None:
        return rule.path
    kwargs = {k: world[v.name] if isinstance(v, Ref) else v for k, v in rule.kwargs.items()}
    return reverse(key, kwargs=kwargs) + rule.query


def send(client: Client, method: str, url: str):
    call = getattr(client, method.lower())
    if method in ("POST", "PUT", "PATCH"):
        if url.startswith("/api/"):
            return call(url, data="{}", content_type="application/json")
        return call(url, data={})
    return call(url)


def is_login_redirect(response) -> bool:
    """A 302 to the console's or the admin site's login page."""
    return response.status_code == 302 and "/login/" in response.get("Location", "")
