"""A property-based fuzz of the whole API from its OpenAPI schema (schemathesis), with
every check.

Every operation gets generated requests, valid and invalid, sent as an admin (the role
that reaches every code path) to the app in-process; no answer may be a 5xx, every answer
must match the schema (its status code, content type, headers and body), requests that
break the schema must be refused, and requests the schema allows must be accepted.

Some rules span fields (one search mode at a time; ``offset`` or ``group``; an order of
two values) and OpenAPI 3.0 cannot say them of query parameters: the schema lists them
under ``x-cross-field-rules`` (console.api.rules), as are the checks JSON Schema cannot
say at all (a regex RE2 takes, a time in the future, a map's keys). A schema-valid request
refused with a 400 that says one of those rules, naming fields the rule is about, and that
does break it, is a right refusal; any other refusal of a schema-valid request fails.

Each operation gets schemathesis's coverage phase (its schema's boundaries: every
parameter and body field at its limits, and each kind of wrong value) and
``tests.fuzzing.examples(5)`` random requests. The coverage phase's wrong values repeat
themselves: a body of one-of shapes has each common field broken the same ways once per
shape, and a query parameter's wrong type is sent as four strings a view reads alike
('0.5', 'true', 'null', 'AAA'). `make test` sends one request per place, parameter, kind
of wrong value, field and Python type of the wrong value (``filter_case``), every accepted
request of the phase, and the random ones; `make soak` (``TIDEMARK_FUZZ_SCALE`` above 1)
sends them all and ten times the random requests.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from rest_framework.test import APIClient
from schemathesis.generation.meta import TestPhase
from schemathesis.specs.openapi.checks import positive_data_acceptance

from console.accounts.models import ApiToken
from console.api.rules import EXTENSION, NOT_BEFORE, Rule
from console.messages import tail
from tests import fuzzing
from tests.api.apitools import error_of

try:  # schemathesis's own module (4.32): without it each test's schema finds them itself
    from schemathesis.python._constants.orchestrator import build_constants_pool
except ImportError:  # pragma: no cover - a later schemathesis moved it
    build_constants_pool = None

# Each test in a transaction rolled back at its end (the app's requests run in this
# thread, on the test's connection: connections_kept).
pytestmark = pytest.mark.django_db

#: Long polls are capped at this many seconds in the fuzz, to keep it quick.
FUZZ_WAIT_S = 0.01


@pytest.fixture
def populated(store):
    store.create_topic("orders", 2)
    store.append_batch(
        "orders", [{"body": f"m{i}", "key": f"k{i % 3}", "queue": i % 2} for i in range(10)]
    )
    store.commit_offset("billing", "orders", 0, 2)
    return store


@pytest.fixture(autouse=True)
def connections_kept():
    """Requests go to the WSGI app itself, whose request signals close the database
    connection (close_old_connections), and with it the test's transaction; Django's
    test client takes the same handler off for its requests."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def admin_token(django_user_model) -> str:
    user = django_user_model.objects.create_superuser("fuzz", "fuzz@example.com", None)
    return ApiToken.issue(user, "fuzz")[1]


METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def leave_out_queue_list_limits(raw: dict) -> list[tuple[str, str]]:
    """Take the ``maxLength`` off every ``queues`` query parameter of ``raw`` (each says
    tail.QUEUES_MAX_LENGTH); the operations that have one.

    The coverage phase draws a pattern's longest values (``maxLength`` and one less) one
    character at a time through hypothesis's regex strategy: the two 8,192-character and
    8,191-character queue lists took 6.8 s of this file's ~47 s of CPU. Those operations'
    limit is checked by test_a_queue_list_at_its_limit_is_taken_and_one_longer_refused
    instead, against the schema /api/schema/ serves, which keeps it."""
    operations = []
    for path, item in raw["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []) if method in METHODS else []:
                if parameter["in"] == "query" and parameter["name"] == "queues":
                    assert parameter["schema"].pop("maxLength") == tail.QUEUES_MAX_LENGTH
                    operations.append((method.upper(), path))
    return operations


# The schema is the one /api/schema/ serves (that needs a login), made in-process: it needs
# no database or store. Requests go to the app itself.
RAW_SCHEMA = SchemaGenerator().get_schema(request=None, public=True)
QUEUE_LISTS = leave_out_queue_list_limits(RAW_SCHEMA)
SCHEMA = schemathesis.openapi.from_dict(RAW_SCHEMA)
SCHEMA.app = get_wsgi_application()
SCHEMA.location = "/api/schema/?format=json"
OPERATIONS = [
    (method.upper(), path)
    for path, item in SCHEMA.raw_schema["paths"].items()
    for method in item
    if method in METHODS
]


#: The operation the running test fuzzes (set by its ``operation`` fixture).
RUNNING: dict[str, tuple[str, str]] = {}

#: Every request of the coverage phase, wrong values repeated included (make soak).
ALL_REFUSALS = fuzzing.SCALE > 1
#: (place, parameter, scenario, field, type) of the coverage phase's wrong values sent so
#: far by the running test.
REFUSALS_SENT: set[tuple] = set()


@SCHEMA.hook
def filter_case(context, case) -> bool:
    """The coverage phase's first wrong request for each place (query, path, header, body),
    parameter, kind of wrong value, field (the one its description names) and Python type
    of the wrong value (an int and a list break different code); its accepted requests and
    the random phase's requests all go."""
    meta = case.meta
    if ALL_REFUSALS or meta is None or meta.phase.name != TestPhase.COVERAGE:
        return True
    if meta.generation.mode != schemathesis.GenerationMode.NEGATIVE:
        return True
    data = meta.phase.data
    field = data.description.partition(": ")[0] if ": " in data.description else None
    key = (data.parameter_location, data.parameter, data.scenario, field)
    key += (type(wrong_value(case, data.parameter_location, data.parameter, field)),)
    if key in REFUSALS_SENT:
        return False
    REFUSALS_SENT.add(key)
    return True


def wrong_value(case, place, parameter: str | None, field: str | None):
    """The value a coverage-phase case breaks: the body's field, the parameter's value, or
    the whole body."""
    if place == "body":
        body = case.body
        return body[field] if isinstance(body, dict) and field in body else body
    values = {"query": case.query, "path": case.path_parameters, "header": case.headers}
    return (values.get(getattr(place, "value", place)) or {}).get(parameter)


@pytest.fixture(params=OPERATIONS, ids=[f"{method} {path}" for method, path in OPERATIONS])
def operation(request):
    """The schema, with the one operation this test fuzzes: each operation is a test of its
    own, with its own store and database (``populated``, ``admin_token``), its requests
    generated when it runs. Made at collection, the requests of the 60 operations took 16 s
    of CPU in every pytest-xdist worker, which each collects every file."""
    RUNNING["operation"] = request.param
    REFUSALS_SENT.clear()
    # The literals schemathesis reads from the app's modules for its values (its constants
    # pool), found once: each test's schema is a clone of SCHEMA and shares what SCHEMA
    # found before it was cloned; found by each clone, they took 0.4 s of CPU a test.
    if build_constants_pool is not None:
        build_constants_pool(SCHEMA)
    # Schemathesis's lazy schemas name the test by the node's ``_nodeid``, which pytest 9.2
    # no longer sets (schemathesis 4.32).
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid
    return SCHEMA


def is_running(context) -> bool:
    """Whether ``context`` is the operation the running test fuzzes. (A lazy schema puts its
    own filters in place of the fixture schema's: the filter is the lazy schema's.)"""
    operation = context.operation
    return (operation.method.upper(), operation.path) == RUNNING["operation"]


# Above the lazy schema's parametrize: it reads the settings from the test it makes.
@settings(
    max_examples=fuzzing.examples(5),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@schemathesis.pytest.from_fixture("operation").include(is_running).parametrize()
def test_no_request_breaks_the_api(case, populated, admin_token):
    if case.query and "wait" in case.query:
        case.query["wait"] = FUZZ_WAIT_S
    headers = {"Authorization": f"Token {admin_token}"}
    response = case.call(headers=headers)
    excluded = [positive_data_acceptance] if refused_by_a_documented_rule(case, response) else []
    case.validate_response(response, headers=headers, excluded_checks=excluded)


def refused_by_a_documented_rule(case, response) -> bool:
    """Whether ``response`` refuses ``case`` by a rule across fields that the operation's
    schema lists, saying the rule and naming its fields, and ``case`` breaks it."""
    if response.status_code != 400:
        return False
    error = response.json()["error"]
    named = set(error["details"].get("fields", {}))
    given = {**(case.query or {}), **(case.body if isinstance(case.body, dict) else {})}
    for rule in map(Rule.from_json, case.operation.definition.raw.get(EXTENSION, [])):
        if rule.message not in error["message"] or not named <= set(rule.names()):
            continue
        # An order is between parsed values (times, say): that both are given is what
        # the request shows.
        if rule.kind == NOT_BEFORE or rule.broken_by(given):
            return True
    return False


def queue_list(length: int) -> str:
    """Queue ids 0, comma-separated, ``length`` characters long (the first one "00" when
    the length is even)."""
    return "0" * (2 - length % 2) + ",0" * ((length - 1) // 2)


#: A value for each query parameter these operations require.
REQUIRED = {"expression": "true", "cursor": "0:0@0"}


@pytest.mark.parametrize(("method", "path"), QUEUE_LISTS, ids=[" ".join(o) for o in QUEUE_LISTS])
def test_a_queue_list_at_its_limit_is_taken_and_one_longer_refused(
    method, path, served_schema, populated, admin_token
):
    """The boundary the fuzz leaves out (leave_out_queue_list_limits): the longest queue
    list the served schema allows is taken, one character more is refused, naming it."""
    parameters = served_schema["paths"][path][method.lower()]["parameters"]
    (limit,) = [p["schema"]["maxLength"] for p in parameters if p["name"] == "queues"]
    query = {
        p["name"]: REQUIRED[p["name"]]
        for p in parameters
        if p["in"] == "query" and p.get("required")
    }
    client = APIClient(HTTP_AUTHORIZATION=f"Token {admin_token}")
    url = path.format(topic="orders") + "?"
    longest, one_longer = queue_list(limit), queue_list(limit + 1)

    taken = client.generic(method, url + urlencode({**query, "queues": longest}))
    refused = client.generic(method, url + urlencode({**query, "queues": one_longer}))

    assert (len(longest), len(one_longer)) == (limit, limit + 1)
    assert taken.status_code == 200, taken.content[:300]
    if taken.streaming:
        b"".join(taken.streaming_content)
    assert refused.status_code == 400
    assert "queues" in error_of(refused)["details"]["fields"]
