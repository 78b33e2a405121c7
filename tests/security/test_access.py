"""Every URL of the console, tried as every role, for every method it accepts.

The table ``ACCESS`` (tests/security/access_table.py) is checked against the URL
configuration itself (``get_resolver().url_patterns``, walked recursively), so a new page or
endpoint fails
``test_every_url_pattern_is_in_the_access_table`` until someone decides who may use it.

For each pattern and method the request is sent as anonymous, as a logged-in user with no
role, and as viewer, operator and admin:

- below the pattern's minimal role, a page answers 302 to the login page (anonymous) or
  403 (logged in), the API 401 or 403, and nothing changes: no audit row, no user, token,
  rule or silence, no topic, queue, message or committed offset;
- at or above it, the answer is not a redirect to login, not 401/403 and not a 5xx.

Methods a pattern does not list are answered 405 for an admin, so the table cannot miss
a method either. The Django admin site (``/admin/``) is for staff only: no console role
opens it.
"""

from __future__ import annotations

import pytest

from tests.security.access_table import (
    ACCESS,
    ADMIN_SITE_NAMESPACE,
    ADMIN_SITE_SAMPLES,
    ALL_METHODS,
    ANONYMOUS,
    CLIENTS,
    LEVELS,
    Rule,
    is_login_redirect,
    sample_url,
    send,
    snapshot,
    url_patterns,
)

pytestmark = pytest.mark.django_db


def test_every_url_pattern_is_in_the_access_table():
    missing = sorted(
        f"{key} ({route})"
        for key, route, namespace in url_patterns()
        if key not in ACCESS and namespace != ADMIN_SITE_NAMESPACE
    )

    assert not missing, (
        "These URL patterns are not in the ACCESS table of tests/security/access_table.py; add "
        "each with its sample kwargs and the minimal role for every method it accepts: "
        + ", ".join(missing)
    )


def test_the_access_table_lists_no_pattern_that_is_gone():
    keys = {key for key, _, _ in url_patterns()}

    assert set(ACCESS) <= keys, sorted(set(ACCESS) - keys)


# ------------------------------------------------------------------------ the world


def denial_problem(kind: str, client_name: str, response) -> str | None:
    """Why `response` is not a proper refusal, or None."""
    status = response.status_code
    if kind == "api":
        expected = (401,) if client_name == "anonymous" else (403,)
        return None if status in expected else f"{status}, expected {expected[0]}"
    if client_name == "anonymous":
        return None if is_login_redirect(response) else f"{status}, expected 302 to login"
    return None if status == 403 else f"{status}, expected 403"


def allowed_problem(rule: Rule, method: str, response) -> str | None:
    """Why `response` is not an allowed request's answer, or None."""
    status = response.status_code
    if status in rule.also_ok:
        return None
    # Public pages may send to the login page (logout does); the others must not.
    to_login = is_login_redirect(response) and rule.methods[method] != ANONYMOUS
    if status in (401, 403) or status >= 500 or to_login:
        return f"{status} {response.get('Location', '')}".strip()
    return None


@pytest.mark.parametrize("key", list(ACCESS))
def test_each_role_gets_what_the_table_says(key, clients, world, store):
    rule = ACCESS[key]
    url = sample_url(key, rule, world)
    problems = []
    state = None  # what a refused request must leave as it is; None: to be taken
    # Reads first and DELETE last; per method the weakest client first, so every refusal
    # is checked before an allowed request changes anything. The state is taken before
    # each refused request (after the one before it, or anew after an allowed one).
    for method in [m for m in ALL_METHODS if m in rule.methods]:
        needed = LEVELS.index(rule.methods[method])
        for client_name, level in CLIENTS.items():
            refused = LEVELS.index(level) < needed
            if refused and state is None:
                state = snapshot(store)
            response = send(clients[client_name], method, url)
            if refused:
                problem = denial_problem(rule.kind, client_name, response)
                after = snapshot(store)
                if after != state:
                    problem = f"{problem or response.status_code}, and it changed something"
                state = after
            else:
                problem = allowed_problem(rule, method, response)
                state = None
            if problem:
                problems.append(f"{method} as {client_name}: {problem}")

    assert not problems, f"{url}: " + "; ".join(problems)


UNLISTED = {
    key: [method for method in ALL_METHODS if method not in rule.methods]
    for key, rule in ACCESS.items()
}


def test_the_methods_the_table_does_not_list_are_405(as_admin, world):
    # 405 answers change nothing, so one world serves every pattern.
    problems = []
    for key, methods in UNLISTED.items():
        url = sample_url(key, ACCESS[key], world)
        statuses = {method: send(as_admin, method, url).status_code for method in methods}
        wrong = {method: status for method, status in statuses.items() if status != 405}
        if wrong:
            problems.append(f"{url}: {wrong}")

    assert not problems, "; ".join(problems)


# ------------------------------------------------------------------ the admin site


@pytest.mark.parametrize(("method", "url"), ADMIN_SITE_SAMPLES)
def test_the_admin_site_sends_every_console_role_to_its_login(method, url, clients, world):
    statuses = {name: send(client, method, url) for name, client in clients.items()}

    refused = {name: r.status_code for name, r in statuses.items() if not is_login_redirect(r)}
    assert not refused, f"{method} {url}: {refused}"


def test_the_admin_site_opens_for_a_staff_superuser(admin_client):
    assert admin_client.get("/admin/").status_code == 200


# ------------------------------------------------------------------------ OPTIONS


def test_options_is_never_a_500_and_opens_nothing_to_anonymous(clients, world):
    problems = []
    for key, rule in ACCESS.items():
        url = sample_url(key, rule, world)
        public = ANONYMOUS in rule.methods.values()
        for client_name, client in clients.items():
            status = client.options(url).status_code
            if status >= 500 or (client_name == "anonymous" and status == 200 and not public):
                problems.append(f"{url} as {client_name}: {status}")

    assert not problems, "; ".join(problems)


def test_trace_and_made_up_methods_are_never_a_500_nor_a_200(clients, world):
    problems = []
    for key, rule in ACCESS.items():
        url = sample_url(key, rule, world)
        for client_name in ("anonymous", "admin"):
            for method in ("TRACE", "PROPFIND"):
                status = clients[client_name].generic(method, url).status_code
                # An invalid reset link shows its page for any method; nothing happens.
                if status >= 500 or (status == 200 and key != "password_reset_confirm"):
                    problems.append(f"{method} {url} as {client_name}: {status}")

    assert not problems, "; ".join(problems)
