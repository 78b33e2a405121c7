"""The schema says what the API does (issue 32, case 7): the 409 a GET of stream events
gives on a topic that is not a stream topic, the message-id pattern, the time bounds, and
the page bounds of every list."""

from __future__ import annotations

import re

import pytest

from tests.api.apitools import error_of

pytestmark = pytest.mark.django_db

STREAM_EVENTS = "/api/v1/streams/{topic}/{stream_id}/events/"


@pytest.fixture
def schema(served_schema) -> dict:
    """What /api/schema/ serves (fetched once a session: tests/api/conftest.py)."""
    return served_schema


def parameter(operation: dict, name: str) -> dict:
    return next(p for p in operation["parameters"] if p["name"] == name)


def test_get_stream_events_documents_the_409_it_gives(as_viewer, store, schema):
    store.create_topic("orders", queues=1)

    response = as_viewer.get("/api/v1/streams/orders/s-1/events/")

    assert response.status_code == 409
    assert error_of(response)["code"] == "wrong_topic_kind"
    assert "409" in schema["paths"][STREAM_EVENTS]["get"]["responses"]


def test_a_message_id_has_its_pattern(schema):
    operation = schema["paths"]["/api/v1/messages/{message_id}/"]["get"]

    assert parameter(operation, "message_id")["schema"]["pattern"] == "^[0-9A-Fa-f]{24}$"


def test_times_say_their_bounds(schema):
    operation = schema["paths"]["/api/v1/messages/"]["get"]

    description = parameter(operation, "since")["description"]
    assert "1970-01-01T00:00:00Z" in description and "9999-12-31" in description


@pytest.mark.parametrize("path", ["/api/v1/topics/", "/api/v1/messages/"])
def test_page_and_page_size_have_their_bounds(schema, path):
    operation = schema["paths"][path]["get"]

    assert parameter(operation, "page")["schema"]["minimum"] == 1
    size = parameter(operation, "page_size")
    assert size["schema"]["minimum"] == 1
    assert "more than 500 is 500" in size["description"]


# Rules across fields: the schema lists them (and says them in JSON Schema where OpenAPI
# 3.0 can), and the 400 names the fields.

SEARCH = "/api/v1/messages/"


def fields_of(response) -> set[str]:
    assert response.status_code == 400, response.content
    return set(error_of(response)["details"]["fields"])


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("key=k&queue=0", {"key", "queue"}),
        ("queue=0&since=0", {"queue", "since"}),
        ("first_queue=0&key=k", {"first_queue", "since", "until"}),
        ("from_offset=1", {"from_offset", "queue"}),
        ("since=2000-01-02&until=2000-01-01", {"until"}),
        ("queue=0&from_offset=5&to_offset=1", {"to_offset"}),
        ("", {"key", "queue", "from_offset", "to_offset", "since", "until"}),
    ],
)
def test_a_search_breaking_a_rule_across_fields_names_them(as_viewer, store, query, named):
    store.create_topic("orders", queues=1)

    assert fields_of(as_viewer.get(f"{SEARCH}?topic=orders&{query}")) == named


def test_the_search_lists_its_rules_across_fields(schema):
    operation = schema["paths"][SEARCH]["get"]

    rules = operation["x-cross-field-rules"]
    assert {"kind": "at_most_one", "groups": [["key"], ["queue", "from_offset", "to_offset"]]} in [
        {k: v for k, v in rule.items() if k != "message"} for rule in rules
    ]
    assert {"kind": "not_before", "fields": ["since", "until"]} in [
        {k: v for k, v in rule.items() if k != "message"} for rule in rules
    ]
    for rule in rules:
        assert rule["message"] in operation["description"]


def test_a_pull_without_offset_or_group_names_both(as_viewer, store, schema):
    store.create_topic("orders", queues=1)

    response = as_viewer.get("/api/v1/topics/orders/queues/0/messages/")

    assert fields_of(response) == {"offset", "group"}
    operation = schema["paths"]["/api/v1/topics/{topic}/queues/{queue}/messages/"]["get"]
    assert operation["x-cross-field-rules"][0]["fields"] == ["offset", "group"]


def test_an_export_range_out_of_order_names_to_offset(as_viewer, store, schema):
    store.create_topic("orders", queues=1)

    response = as_viewer.get(
        "/api/v1/messages/export/?topic=orders&queue=0&from_offset=3&to_offset=1"
    )

    assert fields_of(response) == {"to_offset"}
    assert "x-cross-field-rules" in schema["paths"]["/api/v1/messages/export/"]["get"]


def test_key_and_keys_together_are_refused_by_the_schema_and_named(as_operator, store, schema):
    store.create_topic("orders", queues=1)

    response = as_operator.post(
        "/api/v1/topics/orders/messages/", {"body": "x", "key": "a", "keys": ["b"]}, format="json"
    )

    assert fields_of(response) == {"key", "keys"}
    body = schema["components"]["schemas"]["ProduceMessageRequest"]
    assert {
        "not": {
            "required": ["key", "keys"],
            "properties": {"key": {"type": "string"}, "keys": {"type": "array"}},
        }
    } in body["allOf"]


@pytest.mark.parametrize("component", ["ProduceMessageRequest", "NewEventRequest"])
def test_a_base64_body_has_its_pattern_in_the_schema(schema, component):
    constraints = schema["components"]["schemas"][component]["allOf"]

    body_patterns = [
        branch["properties"]["body"]["pattern"]
        for constraint in constraints
        for branch in constraint.get("anyOf", [])
        if "body" in branch.get("properties", {})
    ]
    assert body_patterns == ["^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"]


@pytest.mark.parametrize(
    ("component", "field", "values"),
    [
        ("TopicCreateRequest", "kind", ["plain", "stream"]),
        ("RedriveAllRequest", "all", [True]),
        ("ApplyPreviewRequest", "dry_run", [False]),
    ],
)
def test_a_field_of_one_shape_of_a_body_says_its_one_value(schema, component, field, values):
    constraints = schema["components"]["schemas"][component]["allOf"]

    assert {"properties": {field: {"allOf": [{"enum": values}]}}} in constraints


def test_purging_a_dlq_documents_the_confirm_body_it_reads(schema):
    body = schema["paths"]["/api/v1/groups/{group}/dlq/"]["delete"]["requestBody"]

    assert body["required"] is True
    ref = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert schema["components"]["schemas"][ref]["required"] == ["confirm"]


def test_producing_requires_a_body_of_one_of_its_shapes(schema):
    assert schema["paths"]["/api/v1/topics/{topic}/messages/"]["post"]["requestBody"]["required"]


def test_a_stream_topic_in_the_path_has_the_pattern_of_a_topic_name(schema):
    operation = schema["paths"][STREAM_EVENTS]["post"]

    assert (
        parameter(operation, "topic")["schema"]["pattern"] == "^[A-Za-z0-9_-][A-Za-z0-9._-]{0,126}$"
    )


def test_a_time_has_the_pattern_of_the_times_it_promises_to_take(schema):
    pattern = parameter(schema["paths"][SEARCH]["get"], "since")["schema"]["pattern"]

    assert re.match(pattern, "2024-05-01T12:00:00Z") and re.match(pattern, "1714564800000")
    assert not re.match(pattern, "yesterday")


def test_an_audit_date_says_its_years(as_admin, schema):
    date_to = parameter(schema["paths"]["/api/v1/audit/"]["get"], "date_to")["schema"]

    assert not re.match(date_to["pattern"], "0193-09-07")
    assert fields_of(as_admin.get("/api/v1/audit/?date_to=0193-09-07")) == {"date_to"}


def test_text_that_refuses_nul_says_so(as_admin, schema):
    user = parameter(schema["paths"]["/api/v1/audit/"]["get"], "user")["schema"]["oneOf"][0]

    assert not re.match(user["pattern"], "a\x00b")
    assert fields_of(as_admin.get("/api/v1/audit/?user=a%00b")) == {"user"}


def test_audit_dates_out_of_order_name_date_to_and_the_schema_lists_the_rule(as_admin, schema):
    response = as_admin.get("/api/v1/audit/?date_from=2024-05-02&date_to=2024-05-01")

    assert fields_of(response) == {"date_to"}
    rules = schema["paths"]["/api/v1/audit/"]["get"]["x-cross-field-rules"]
    assert [rule["fields"] for rule in rules] == [["date_from", "date_to"]]
