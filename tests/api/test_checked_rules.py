"""What JSON Schema cannot say (issue 32, case 7) is said as ``checked`` rules of the
operation (console.api.rules): the schema lists each under ``x-cross-field-rules``, and
a request that breaks one is a 400 naming its fields with the rule's sentence. What JSON
Schema can say (a threshold per alert kind, a rule's actions per kind) is in the body's
schema."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from console.api.rules import CHECKED, Rule
from tests.api.apitools import error_of

pytestmark = pytest.mark.django_db

RESET = "/api/v1/groups/billing/reset/"
PRODUCE = "/api/v1/topics/orders/messages/"
RULES = "/api/v1/alerts/rules/"
SILENCES = "/api/v1/alerts/silences/"


@pytest.fixture
def schema(served_schema) -> dict:
    """What /api/schema/ serves (fetched once a session: tests/api/conftest.py)."""
    return served_schema


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=2)
    store.append_batch("orders", [{"body": f"m{i}", "queue": i % 2} for i in range(4)])
    store.commit_offset("billing", "orders", 0, 1)
    return store


def checked_rule(schema: dict, path: str, method: str, field: str) -> Rule:
    rules = map(Rule.from_json, schema["paths"][path][method]["x-cross-field-rules"])
    return next(rule for rule in rules if rule.kind == CHECKED and field in rule.fields)


def refusal(response, rule: Rule) -> tuple[set[str], bool]:
    """(the fields the 400 names, whether its message says ``rule``)."""
    assert response.status_code == 400, response.content
    error = error_of(response)
    return set(error["details"]["fields"]), rule.message in error["message"]


def test_offsets_keyed_by_a_name_not_a_queue_id_are_refused_by_the_listed_rule(
    as_operator, orders, schema
):
    rule = checked_rule(schema, "/api/v1/groups/{group}/reset/", "post", "offsets")

    response = as_operator.post(
        RESET, {"topic": "orders", "mode": "offset", "offsets": {"first": 1}}, format="json"
    )

    assert refusal(response, rule) == ({"offsets"}, True)
    assert "'first' is not a queue id." in error_of(response)["message"]
    assert rule.broken_by({"offsets": {"first": 1}}) == ["offsets"]


def test_offsets_keyed_by_queue_ids_pass_the_rule(as_operator, orders):
    response = as_operator.post(
        RESET, {"topic": "orders", "mode": "offset", "offsets": {"1": 1}}, format="json"
    )

    assert response.status_code == 200, response.content


def test_offsets_say_how_many_queues_they_name_in_the_schema(schema):
    body = schema["components"]["schemas"]["OffsetResetPreviewRequest"]

    counts = [c for c in body["allOf"] if "offsets" in c.get("properties", {})]
    assert counts[0]["properties"]["offsets"]["minProperties"] == 1


def test_an_empty_property_name_is_refused_by_the_listed_rule(as_operator, orders, schema):
    rule = checked_rule(schema, "/api/v1/topics/{topic}/messages/", "post", "properties")

    response = as_operator.post(PRODUCE, {"body": "x", "properties": {"": "v"}}, format="json")

    assert refusal(response, rule) == ({"properties"}, True)


def test_an_empty_property_name_in_a_batch_names_messages_by_the_listed_rule(
    as_operator, orders, schema
):
    rule = checked_rule(schema, "/api/v1/topics/{topic}/messages/", "post", "messages")
    body = {"messages": [{"body": "a"}, {"body": "b", "properties": {"": "v"}}]}

    response = as_operator.post(PRODUCE, body, format="json")

    assert refusal(response, rule) == ({"messages"}, True)
    assert rule.broken_by(body) == ["messages"]


def test_a_key_search_page_past_its_reach_names_page_by_the_listed_rule(as_viewer, orders, schema):
    rule = checked_rule(schema, "/api/v1/messages/", "get", "page")

    response = as_viewer.get("/api/v1/messages/?topic=orders&key=k&page=201&page_size=50")

    assert refusal(response, rule) == ({"page"}, True)
    assert error_of(response)["code"] == "search_too_deep"
    assert rule.broken_by({"key": "k", "page": "201", "page_size": "50"}) == ["page"]


def test_a_key_search_page_within_its_reach_passes_the_rule(as_viewer, orders, schema):
    rule = checked_rule(schema, "/api/v1/messages/", "get", "page")

    assert rule.broken_by({"key": "k", "page": "200", "page_size": "50"}) == []
    assert rule.broken_by({"key": "k", "page": "20", "page_size": "5000"}) == []  # 500 a page
    assert rule.broken_by({"key": "k", "page": "21", "page_size": "5000"}) == ["page"]


def test_a_queue_range_search_has_no_page_reach(as_viewer, orders, schema):
    rule = checked_rule(schema, "/api/v1/messages/", "get", "page")

    assert rule.broken_by({"queue": "0", "page": "100000"}) == []


def test_a_silence_ending_in_the_past_names_ends_at_by_the_listed_rule(as_operator, schema):
    rule = checked_rule(schema, "/api/v1/alerts/silences/", "post", "ends_at")
    ended = (timezone.now() - timedelta(hours=1)).isoformat()

    response = as_operator.post(SILENCES, {"ends_at": ended, "reason": "why"}, format="json")

    assert refusal(response, rule) == ({"ends_at"}, True)
    assert rule.broken_by({"ends_at": ended, "reason": "why"}) == ["ends_at"]


def test_a_webhook_url_urlvalidator_refuses_names_it_by_the_listed_rule(as_admin, schema):
    rule = checked_rule(schema, RULES, "post", "webhook_url")
    body = {"name": "r", "kind": "status_err", "webhook_url": "http://exa mple.com/"}

    response = as_admin.post(RULES, body, format="json")

    assert refusal(response, rule) == ({"webhook_url"}, True)


def test_a_recipient_that_is_not_an_address_names_recipients_by_the_listed_rule(as_admin, schema):
    rule = checked_rule(schema, "/api/v1/alerts/test-email/", "post", "recipients")

    response = as_admin.post(
        "/api/v1/alerts/test-email/", {"recipients": ["not an address"]}, format="json"
    )

    assert refusal(response, rule) == ({"recipients"}, True)


def test_a_disk_rule_says_its_open_ratio_in_the_schema(schema):
    body = schema["components"]["schemas"]["AlertRuleCreateRequest"]

    branches = next(c["anyOf"] for c in body["allOf"] if "threshold" in str(c))
    disk = next(b for b in branches if "disk_ratio" in str(b["properties"]["kind"]))
    threshold = disk["properties"]["threshold"]
    assert (threshold["minimum"], threshold["maximum"]) == (0, 1)
    assert threshold["exclusiveMinimum"] and threshold["exclusiveMaximum"]
    assert disk["required"] == ["threshold"]


def test_a_new_rule_of_a_built_in_kind_is_refused_and_not_offered(as_admin, schema):
    response = as_admin.post(RULES, {"name": "w", "kind": "monitoring_stale"}, format="json")

    assert response.status_code == 400
    assert "monitoring_stale" not in schema["components"]["schemas"]["NewRuleKindEnum"]["enum"]


def test_a_blank_rule_name_is_refused_by_its_pattern(as_admin, schema):
    response = as_admin.post(RULES, {"name": " \u3000", "kind": "status_err"}, format="json")

    assert response.status_code == 400
    assert (
        "pattern" in schema["components"]["schemas"]["AlertRuleCreateRequest"]["properties"]["name"]
    )


def test_a_role_rules_actions_per_kind_are_in_the_schema(schema):
    body = schema["components"]["schemas"]["RuleAddRequest"]

    branches = body["allOf"][0]["anyOf"]
    topic = next(b for b in branches if "topic" in str(b["properties"]["kind"]))
    assert "reset" not in str(topic["properties"]["actions"])


def test_the_members_of_a_built_in_role_are_a_409(as_admin):
    response = as_admin.post("/api/v1/roles/viewer/members/", {"username": "ada"}, format="json")

    assert response.status_code == 409
    assert error_of(response)["code"] == "built_in_role"


def test_a_member_who_is_not_a_user_is_a_404(as_admin):
    response = as_admin.post("/api/v1/roles/team-a/members/", {"username": "nobody"}, format="json")

    assert response.status_code == 404
