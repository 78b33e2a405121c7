"""Rules that span fields of a request (issue 32): one table per serializer that both
refuses the request (a 400 naming every field the rule is about) and writes the schema.

A serializer lists its rules in ``cross_field_rules``; ``StrictSerializer.validate``
checks them before its own ``validate``. In the schema each operation lists the rules of
what it takes under ``x-cross-field-rules`` (the JSON of ``Rule.as_json``) and says each
in its description; a request body's schema also says them in JSON Schema where OpenAPI
3.0 can (``not``/``anyOf``). A rule about query parameters, or an order of two values,
has no JSON Schema in OpenAPI 3.0: the description and the extension are what say it.

What JSON Schema cannot say of a value at all (that a text is a regex RE2 takes, that a
time is in the future, that a map's keys are queue ids: OpenAPI 3.0 has no
``propertyNames``) is a ``checked`` rule: it names a check of ``CHECKS``, which the module
that owns the rule registers with ``@check(name)`` or ``@value_check(name)``.

A field counts as given when it is present and not null.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.validators import ProhibitNullCharactersValidator, RegexValidator
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

#: The pattern of text without NUL characters (what a CharField takes). Not empty: a field
#: that takes blank text is "this or empty" in drf-spectacular's schema (a oneOf).
NO_NUL_PATTERN = "^[^\\x00]+$"
#: The schema extension that lists an operation's rules.
EXTENSION = "x-cross-field-rules"

AT_MOST_ONE = "at_most_one"  # of these groups of fields, at most one given
AT_LEAST_ONE = "at_least_one"  # of these fields, at least one given
REQUIRES = "requires"  # any of ``fields`` given: one of ``then`` given too
NOT_BEFORE = "not_before"  # fields[1] is not less than fields[0] when both given
CHECKED = "checked"  # the named check (CHECKS) holds of the fields

#: A check of a ``checked`` rule: (the request's data, the rule's fields) → the fields to
#: name in the 400, each with why ("" to say only the rule; {} when it holds). The data is
#: the validated values in the API, and the request's JSON (times as text) in a test that
#: judges a refusal: a check takes both.
Check = Callable[[dict, tuple[str, ...]], dict[str, str]]
#: Every check, by name.
CHECKS: dict[str, Check] = {}


def check(name: str) -> Callable[[Check], Check]:
    """Register a check of ``checked`` rules under ``name``."""

    def register(function: Check) -> Check:
        CHECKS[name] = function
        return function

    return register


ValueCheck = Callable[[Any], "str | None"]


def value_check(name: str) -> Callable[[ValueCheck], ValueCheck]:
    """Register ``why_not(value)`` (None when the value passes, else why: a sentence or "")
    as a check of each field given, under ``name``."""

    def register(why_not: ValueCheck) -> ValueCheck:
        def checked(data: dict, fields: tuple[str, ...]) -> dict[str, str]:
            found = {n: why_not(data[n]) for n in fields if _given(data, n)}
            return {n: why for n, why in found.items() if why is not None}

        CHECKS[name] = checked
        return why_not

    return register


def _given(data: dict, name: str) -> bool:
    return data.get(name) is not None


@dataclass(frozen=True)
class Rule:
    kind: str
    #: AT_MOST_ONE: the groups, each a tuple of names; the others: names.
    fields: tuple
    message: str
    then: tuple[str, ...] = ()
    #: CHECKED: the name of its check in CHECKS.
    check_name: str = ""

    @staticmethod
    def at_most_one(*groups: tuple[str, ...] | str, message: str) -> Rule:
        named = tuple((g,) if isinstance(g, str) else tuple(g) for g in groups)
        return Rule(AT_MOST_ONE, named, message)

    @staticmethod
    def at_least_one(*names: str, message: str) -> Rule:
        return Rule(AT_LEAST_ONE, names, message)

    @staticmethod
    def requires(names: tuple[str, ...], then: tuple[str, ...], message: str) -> Rule:
        return Rule(REQUIRES, tuple(names), message, tuple(then))

    @staticmethod
    def not_before(first: str, second: str, message: str) -> Rule:
        return Rule(NOT_BEFORE, (first, second), message)

    @staticmethod
    def checked(*names: str, check: str, message: str) -> Rule:
        return Rule(CHECKED, names, message, check_name=check)

    def names(self) -> list[str]:
        """Every field the rule is about, in its order."""
        if self.kind == AT_MOST_ONE:
            return [name for group in self.fields for name in group]
        return [*self.fields, *self.then]

    def broken_by(self, data: dict) -> list[str]:
        """The fields to name in the 400 when ``data`` breaks the rule, else []."""
        if self.kind == AT_MOST_ONE:
            given = [g for g in self.fields if any(_given(data, name) for name in g)]
            if len(given) < 2:
                return []
            return [name for group in given for name in group if _given(data, name)]
        if self.kind == AT_LEAST_ONE:
            return [] if any(_given(data, name) for name in self.fields) else list(self.fields)
        if self.kind == REQUIRES:
            asked = [name for name in self.fields if _given(data, name)]
            if asked and not any(_given(data, name) for name in self.then):
                return [*asked, *self.then]
            return []
        if self.kind == CHECKED:
            return list(CHECKS[self.check_name](data, self.fields))
        first, second = self.fields
        if _given(data, first) and _given(data, second) and data[second] < data[first]:
            return [second]
        return []

    def check(self, data: dict) -> None:
        """Raise a ValidationError naming the fields when ``data`` breaks the rule."""
        if self.kind == CHECKED:
            why = CHECKS[self.check_name](data, self.fields)
            if why:
                raise serializers.ValidationError(
                    {name: [f"{reason} {self.message}".lstrip()] for name, reason in why.items()}
                )
            return
        names = self.broken_by(data)
        if names:
            raise serializers.ValidationError({name: [self.message] for name in names})

    def as_json(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.kind == AT_MOST_ONE:
            rule["groups"] = [list(group) for group in self.fields]
        else:
            rule["fields"] = list(self.fields)
        if self.then:
            rule["then"] = list(self.then)
        if self.check_name:
            rule["check"] = self.check_name
        return rule

    @staticmethod
    def from_json(rule: dict[str, Any]) -> Rule:
        fields = rule.get("groups") or rule["fields"]
        fields = tuple(tuple(g) if isinstance(g, list) else g for g in fields)
        then = tuple(rule.get("then", ()))
        return Rule(rule["kind"], fields, rule["message"], then, rule.get("check", ""))

    def json_schema(self, properties: dict[str, Any]) -> dict[str, Any] | None:
        """The rule as JSON Schema over a body's ``properties`` (what makes a field
        given: present, and of its type rather than null), or None (an order)."""

        def given(*names: str) -> dict[str, Any]:
            typed = {n: _not_null(properties.get(n, {})) for n in names}
            return {"required": list(names), "properties": typed}

        if self.kind == AT_MOST_ONE:
            pairs = [
                given(a, b)
                for i, first in enumerate(self.fields)
                for second in self.fields[i + 1 :]
                for a in first
                for b in second
            ]
            return {"not": {"anyOf": pairs} if len(pairs) > 1 else pairs[0]}
        if self.kind == AT_LEAST_ONE:
            return {"anyOf": [given(name) for name in self.fields]}
        if self.kind == REQUIRES:
            return {
                "anyOf": [
                    {"not": {"anyOf": [given(name) for name in self.fields]}},
                    *(given(name) for name in self.then),
                ]
            }
        return None


def only(field: str, *values: Any) -> dict[str, Any]:
    """A ``body_constraints`` entry: ``field``, when given, is one of ``values``. (The
    enum sits in an allOf: drf-spectacular would make a bare one a component of its own.)"""
    return {"properties": {field: {"allOf": [{"enum": list(values)}]}}}


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A property's schema that a null does not match."""
    if "type" in schema:
        return {"type": schema["type"]}
    return {"not": {"enum": [None]}}


def rules_of(serializer: Any) -> tuple[Rule, ...]:
    return tuple(getattr(serializer, "cross_field_rules", ()))


def describe(rules: tuple[Rule, ...] | list[Rule]) -> str:
    """The rules as the sentences of a description."""
    return "\n".join(f"- {rule.message}" for rule in rules)


class RulesSchema(AutoSchema):
    """The API's schema class: an operation says the cross-field rules of its query
    parameters and body (the module's docstring); a "one of" body is required (as a
    serializer's with required fields is); a DELETE that reads a body documents it."""

    def _reads_body(self) -> bool:
        if self.method == "DELETE":
            return getattr(self.view, "delete_reads_body", False)
        return self.method in ("POST", "PUT", "PATCH")

    def _get_request_body(self, direction: str = "request") -> Any:
        if self.method != "DELETE" or not self._reads_body():
            return super()._get_request_body(direction)
        self.method = "POST"  # drf-spectacular documents bodies of PUT, PATCH and POST
        try:
            return super()._get_request_body(direction)
        finally:
            self.method = "DELETE"

    def _get_request_for_media_type(self, serializer: Any, direction: str = "request") -> Any:
        schema, required = super()._get_request_for_media_type(serializer, direction)
        return schema, required or isinstance(serializer, PolymorphicProxySerializer)

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        rules: list[Rule] = []
        for parameter in self.get_override_parameters():
            rules += [r for r in rules_of(parameter) if r not in rules]
        body = self.get_request_serializer() if self._reads_body() else None
        for serializer in getattr(body, "serializers", None) or [body]:
            rules += [r for r in rules_of(serializer) if r not in rules]
        if rules:
            operation[EXTENSION] = [rule.as_json() for rule in rules]
            said = "Rules across fields (a 400 names the fields):\n" + describe(rules)
            operation["description"] = "\n\n".join(
                part for part in (operation.get("description"), said) if part
            )
        return operation

    def _map_serializer_field(self, field: Any, direction: str, bypass_extensions=False):
        """A text field of a request that refuses NUL characters (DRF's CharField does,
        unless a field takes them as data) says so with a pattern, when it has none."""
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        validators = field.validators
        refuses_nul = any(isinstance(v, ProhibitNullCharactersValidator) for v in validators)
        # A pattern (RegexField's, added later by drf-spectacular) says what it takes.
        patterned = any(isinstance(v, RegexValidator) for v in validators)
        plain = schema.get("type") == "string" and not {"pattern", "enum", "format"} & set(schema)
        if direction == "request" and refuses_nul and plain and not patterned:
            schema = {**schema, "pattern": NO_NUL_PATTERN}
        return schema

    def _map_serializer(self, serializer: Any, direction: str, bypass_extensions=False):
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        if direction != "request":
            return schema
        constraints = []
        for rule in rules_of(serializer):
            constraint = rule.json_schema(schema.get("properties", {}))
            if constraint is not None:
                constraints.append(constraint)
        constraints += list(getattr(serializer, "body_constraints", ()))
        if constraints:
            schema = {**schema, "allOf": [*schema.get("allOf", []), *constraints]}
        return schema
