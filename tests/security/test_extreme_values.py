"""Extreme dates and numbers through every form of every page and every parameter and body
field of the API: a 4xx or a form error, never a 500 (issue 21: the audit filter with a
date in year 9999 answered 500).

Pages: each readable page of the access table is fetched as an admin, its forms are read
from the HTML, and each form is sent once per field and extreme value of the field's kind,
the other fields as the page filled them. API: each operation of the OpenAPI schema gets,
one at a time, extreme values in each query parameter, integer path parameter and body
field of a number or date kind (the body otherwise filled with plain values).
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from urllib.parse import urlencode, urljoin

import pytest

from tests.security.access_table import ACCESS, sample_url

pytestmark = pytest.mark.django_db

HUGE = "9" * 30
NUMBERS = (HUGE, "-" + HUGE, "1e309")
DATES = ("9999-12-31", "0001-01-01")
DATETIMES = ("9999-12-31T23:59", "0001-01-01T00:00")
#: Free text fields are often read as a time or a number (since, until, offsets).
TEXTS = ("9999-12-31T23:59:59Z", HUGE, "-" + HUGE)
VALUES_BY_INPUT_TYPE = {
    "number": NUMBERS,
    "range": NUMBERS,
    "date": DATES,
    "datetime-local": DATETIMES,
    "text": TEXTS,
    "search": TEXTS,
    "textarea": TEXTS,
}


class FormReader(HTMLParser):
    """The forms of a page: method, action and fields (name, input type, value)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict] = []
        self._textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.forms.append(
                {
                    "method": (attrs.get("method") or "get").lower(),
                    "action": attrs.get("action") or "",
                    "fields": [],
                }
            )
        elif not self.forms or not attrs.get("name"):
            return
        elif tag == "input":
            kind = (attrs.get("type") or "text").lower()
            if kind in ("submit", "button", "image", "file", "reset"):
                return
            if kind in ("checkbox", "radio") and "checked" not in attrs:
                return
            self.forms[-1]["fields"].append([attrs["name"], kind, attrs.get("value") or ""])
        elif tag == "select":
            self.forms[-1]["fields"].append([attrs["name"], "select", None])
        elif tag == "option":
            fields = self.forms[-1]["fields"]
            if (
                fields
                and fields[-1][1] == "select"
                and (fields[-1][2] is None or "selected" in attrs)
            ):
                fields[-1][2] = attrs.get("value") or ""
        elif tag == "textarea":
            self.forms[-1]["fields"].append([attrs["name"], "textarea", ""])
            self._textarea = attrs["name"]

    def handle_data(self, data):
        if self._textarea is not None and self.forms:
            self.forms[-1]["fields"][-1][2] += data

    def handle_endtag(self, tag):
        if tag == "textarea":
            self._textarea = None


def forms_of(html: str) -> list[dict]:
    reader = FormReader()
    reader.feed(html)
    return reader.forms


def send(client, method: str, url: str, data: dict) -> int:
    try:
        if method == "post":
            return client.post(url, data).status_code
        return client.get(url.split("?")[0] + "?" + urlencode(data)).status_code
    except Exception as error:  # noqa: BLE001 - the test client re-raises a view's error
        return 599 if not isinstance(error, AssertionError) else 598


PAGES = [key for key, rule in ACCESS.items() if rule.kind == "page" and "GET" in rule.methods]


@pytest.mark.parametrize("key", PAGES)
def test_every_form_field_takes_extreme_values_without_a_500(key, world, as_admin):
    page_url = sample_url(key, ACCESS[key], world)
    response = as_admin.get(page_url)
    if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
        return
    failures = []
    for form in forms_of(response.content.decode()):
        action = urljoin(page_url, form["action"]) if form["action"] else page_url
        base = {name: value or "" for name, _, value in form["fields"]}
        for name, kind, _ in form["fields"]:
            for extreme in VALUES_BY_INPUT_TYPE.get(kind, ()):
                status = send(as_admin, form["method"], action, {**base, name: extreme})
                if status >= 500:
                    failures.append((form["method"], action, name, extreme, status))
    assert not failures, failures


# ------------------------------------------------------------------------------------ API


def _schema(client) -> dict:
    return client.get("/api/schema/?format=json").json()


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = schema["components"]["schemas"][name]
    return node


def _extremes(node: dict) -> tuple[str, ...] | tuple:
    kind, fmt = node.get("type"), node.get("format")
    if kind in ("integer", "number"):
        return (10**30, -(10**30), 1e308)
    if kind == "string" and fmt == "date":
        return DATES
    if kind == "string" and fmt == "date-time":
        return ("9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z")
    return ()


def _plain(schema: dict, node: dict):
    node = _resolve(schema, node)
    if "enum" in node:
        return node["enum"][0]
    if "oneOf" in node:
        return _plain(schema, node["oneOf"][0])
    return {
        "string": "orders",
        "integer": 0,
        "number": 0,
        "boolean": False,
        "array": [],
        "object": {},
    }.get(node.get("type"), "orders")


def _bodies(schema: dict, operation: dict) -> list[tuple[dict, dict]]:
    """(plain body, its properties) for each alternative of the operation's JSON body."""
    content = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if content is None:
        return []
    root = _resolve(schema, content["schema"])
    alternatives = [_resolve(schema, alt) for alt in root.get("oneOf", [root])]
    bodies = []
    for alternative in alternatives:
        properties = {
            name: _resolve(schema, prop) for name, prop in alternative.get("properties", {}).items()
        }
        body = {
            name: _plain(schema, properties[name])
            for name in alternative.get("required", [])
            if name in properties
        }
        bodies.append((body, properties))
    return bodies


def _path(template: str, world: dict, overrides: dict) -> str:
    values = {
        "topic": "orders",
        "group": "billing",
        "queue": 0,
        "message_id": world["message_id"],
        "reset": world["reset_id"],
        "rule_id": world["rule_id"],
        "silence_id": world["silence_id"],
        "stream_id": "account-1",
        "role": "team-a",
        "mask_id": 999_999,
        **overrides,
    }
    return template.format(**values)


def api_failures(client, world) -> list:
    schema = _schema(client)
    failures = []

    def call(method: str, url: str, body=None) -> None:
        try:
            if body is None:
                status = getattr(client, method)(url).status_code
            else:
                status = getattr(client, method)(
                    url, data=json.dumps(body), content_type="application/json"
                ).status_code
        except Exception as error:  # noqa: BLE001 - the test client re-raises a view's error
            status = f"{type(error).__name__}: {error}"
        if not isinstance(status, int) or status >= 500:
            failures.append((method, url, body, status))

    for template, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method not in ("get", "post", "put", "patch"):
                continue
            url = _path(template, world, {})
            for parameter in operation.get("parameters", []):
                node = _resolve(schema, parameter.get("schema", {}))
                extremes = _extremes(node)
                if parameter["in"] == "query" and node.get("type") == "string" and not extremes:
                    extremes = TEXTS
                for extreme in extremes:
                    if parameter["in"] == "query":
                        call(method, url + "?" + urlencode({parameter["name"]: extreme}))
                    elif parameter["in"] == "path" and isinstance(extreme, int):
                        call(method, _path(template, world, {parameter["name"]: extreme}))
            for body, properties in _bodies(schema, operation):
                for name, node in properties.items():
                    for extreme in _extremes(node):
                        call(method, url, {**body, name: extreme})
    return failures


def test_every_api_parameter_and_body_field_takes_extreme_values_without_a_500(world, as_admin):
    assert not api_failures(as_admin, world)


# ------------------------------------------------------------------------ nested bodies

NESTED = "[" * 50_000 + "]" * 50_000


def test_a_50000_level_nested_value_posted_anywhere_is_never_a_500(world, as_admin):
    """Every form-taking URL (the console's POSTs, form-encoded and as JSON) and every API
    change, with a value nested 50,000 levels deep (issue 21: a reset plan was a 500)."""
    failures = []
    for key, rule in ACCESS.items():
        if "POST" not in rule.methods:
            continue
        url = sample_url(key, rule, world)
        for data, kind in (
            ({"plan": NESTED, "offsets": NESTED, "token": NESTED}, None),
            (json.dumps({"plan": json.loads("[" * 900 + "]" * 900)}), "application/json"),
            ('{"plan": ' + NESTED + "}", "application/json"),
        ):
            try:
                if kind is None:
                    status = as_admin.post(url, data).status_code
                else:
                    status = as_admin.post(url, data=data, content_type=kind).status_code
            except Exception as error:  # noqa: BLE001 - the test client re-raises
                status = f"{type(error).__name__}"
            if not isinstance(status, int) or status >= 500:
                failures.append((url, kind, status))
    assert not failures, failures
