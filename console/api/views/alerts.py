"""API: alert rules, their events, silences and the test email.

- ``/api/v1/alerts/rules/``: GET list; POST create (admin).
- ``/api/v1/alerts/rules/<id>/``: GET; PUT replace, PATCH change some fields, DELETE (admin).
  A PATCH of ``enabled`` alone is the page's Enable / Disable button.
- ``/api/v1/alerts/events/``: GET, newest first (``state``, ``rule``, ``subject``); each
  with its latest notification's delivery (state, attempts, last error).
- ``/api/v1/alerts/notifications/``: GET, newest first (``state``): what was decided to be
  told, to which channel, and how its delivery went.
- ``/api/v1/alerts/silences/``: GET list (``active``); POST create (operator).
- ``/api/v1/alerts/silences/<id>/expire/``: POST ends it now (operator).
- ``/api/v1/alerts/test-email/``: POST mails a test message (admin).

The bodies' JSON types and unknown fields are refused here, and what the console's own forms
(console/alerts/forms.py) check is said by the schema: in JSON Schema (a threshold per kind,
the scope's regexes, a name or reason not blank), or as ``checked`` rules (console.api.rules:
a regex RE2 takes, one email address per recipient, a webhook URL, a silence's times),
checked here before the form. Every change goes through console/alerts/operations.py, which
writes the same audit row as the /alerts/ pages. Times are ISO 8601.
"""

from __future__ import annotations

from typing import Any, NoReturn

from django.core.exceptions import NON_FIELD_ERRORS
from django.db import IntegrityError
from django.db.models import Q
from django.forms import BaseForm
from django.urls import path
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts.roles import ADMIN, OPERATOR
from console.alerts import kinds, operations
from console.alerts.evaluate import active_silences
from console.alerts.forms import (
    MAX_DAMPING_SECONDS,
    MAX_FOR_SECONDS,
    MAX_RECIPIENTS,
    MAX_REPEAT_SECONDS,
    MAX_URL_LENGTH,
    MIN_REPEAT_SECONDS,
    RuleForm,
    SilenceForm,
    TestEmailForm,
    is_one_address,
    is_webhook_url,
    pattern_error,
    silence_problem,
)
from console.alerts.models import (
    DEFAULT_GROUP_INTERVAL_SECONDS,
    DEFAULT_KEEP_FIRING_SECONDS,
    MAX_PATTERN_LENGTH,
    AlertEvent,
    AlertRule,
    Notification,
    Silence,
)
from console.alerts.visibility import (
    visible_events,
    visible_notifications,
    visible_rules,
    visible_silences,
)
from console.api.errors import ApiError, error_body
from console.api.pagination import Pagination, paginated
from console.api.rules import Rule, check, value_check
from console.api.serializers import (
    BLANK_PATTERN,
    NOT_BLANK_PATTERN,
    ErrorSerializer,
    QuerySerializer,
    StrictSerializer,
    not_blank_text,
    refusals,
    validated,
)

#: The largest id a path or a body names (the database's bigint).
MAX_ID = 2**63 - 1
RULE_NAME_LENGTH = AlertRule._meta.get_field("name").max_length
SUBJECT_LENGTH = AlertEvent._meta.get_field("subject").max_length
#: The longest silence reason and the longest recipients text, as in the forms.
REASON_LENGTH = SilenceForm.base_fields["reason"].max_length
RECIPIENTS_LENGTH = TestEmailForm.base_fields["recipients"].max_length


# ------------------------------------------------------------------- serializers


class AlertRuleSerializer(serializers.ModelSerializer):
    recipients = serializers.ListField(
        child=serializers.CharField(), source="recipient_list", help_text="Email addresses."
    )
    condition = serializers.CharField(
        source="condition_text", help_text='As the page says it: "lag > 1000 messages".'
    )
    applies_to = serializers.CharField(
        source="scope_text", help_text='"all groups", "the store", or the regexes.'
    )
    damping = serializers.CharField(
        source="damping_text", help_text="The keep-firing time and group interval, in words."
    )
    webhook_url = serializers.CharField(help_text="Empty: no webhook.")

    class Meta:
        model = AlertRule
        fields = [
            "id",
            "name",
            "enabled",
            "kind",
            "threshold",
            "scope",
            "group_pattern",
            "topic_pattern",
            "for_seconds",
            "repeat_seconds",
            "keep_firing_seconds",
            "group_interval_seconds",
            "recipients",
            "webhook_url",
            "condition",
            "applies_to",
            "damping",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class AddressList(serializers.ListField):
    """Email addresses, each a JSON string (the ``addresses`` check takes each as one)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("child", serializers.CharField(trim_whitespace=False))
        kwargs.setdefault("max_length", MAX_RECIPIENTS)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, list) and any(not isinstance(item, str) for item in data):
            raise serializers.ValidationError("Addresses are strings.")
        return super().to_internal_value(data)


def _text(**kwargs: Any) -> serializers.CharField:
    """A string left as sent: the console's form strips and checks it."""
    return serializers.CharField(trim_whitespace=False, **kwargs)


@value_check("regex")
def _regex(value: Any) -> str | None:
    return pattern_error(value) if isinstance(value, str) else ""


@value_check("addresses")
def _addresses(value: Any) -> str | None:
    wrong = [item for item in value if not isinstance(item, str) or not is_one_address(item)]
    return f"Not one address: {str(wrong[0])[:60]!r}." if wrong else None


@value_check("webhook_url")
def _webhook_url(value: Any) -> str | None:
    return None if isinstance(value, str) and is_webhook_url(value) else ""


REGEXES = Rule.checked(
    "group_pattern",
    "topic_pattern",
    check="regex",
    message="A regex is one RE2 takes (no back-references or look-arounds), or blank.",
)
ADDRESSES = Rule.checked(
    "recipients",
    check="addresses",
    message="Each recipient is one email address, as Django's EmailValidator takes it.",
)


def _only(*values: Any) -> dict[str, Any]:
    """A property's schema: one of ``values`` (in an allOf, as console.api.rules.only)."""
    return {"allOf": [{"enum": list(values)}]}


def _threshold_per_kind(offered: list[str]) -> dict[str, Any]:
    """The threshold each kind takes (console.alerts.kinds), as JSON Schema over a body."""
    branches = []
    for key in offered:
        branch: dict[str, Any] = {"properties": {"kind": _only(key)}}
        schema = kinds.KINDS[key].threshold_schema()
        if schema is not None:
            branch["properties"]["threshold"] = schema
            branch["required"] = ["threshold"]
        branches.append(branch)
    return {"anyOf": branches}


def _given_regex(name: str) -> dict[str, Any]:
    return {"required": [name], "properties": {name: {"pattern": NOT_BLANK_PATTERN}}}


#: The rule form's scope rules: all groups with no regex, or (but for the store-wide kinds)
#: the matching scope with a group regex, a topic regex or both (blank is none).
SCOPE_AND_REGEXES = {
    "anyOf": [
        {
            "properties": {
                "scope": _only(AlertRule.SCOPE_ALL),
                "group_pattern": {"pattern": BLANK_PATTERN},
                "topic_pattern": {"pattern": BLANK_PATTERN},
            }
        },
        {
            "required": ["scope"],
            "properties": {
                "scope": _only(AlertRule.SCOPE_MATCH),
                "kind": {"not": _only(*AlertRule.STORE_KINDS)},
            },
            "anyOf": [_given_regex("group_pattern"), _given_regex("topic_pattern")],
        },
    ]
}
#: No reminders (0), or at least MIN_REPEAT_SECONDS apart.
REPEAT = {
    "properties": {"repeat_seconds": {"anyOf": [{"maximum": 0}, {"minimum": MIN_REPEAT_SECONDS}]}}
}


class AlertRuleWrite(StrictSerializer):
    """A rule as the console's rule form takes it; omitted fields take their defaults
    (PATCH: keep their values)."""

    name = not_blank_text(max_length=RULE_NAME_LENGTH, help_text="Unique.")
    enabled = serializers.BooleanField(default=True)
    kind = serializers.ChoiceField(choices=AlertRule.KINDS, help_text="The condition.")
    threshold = serializers.FloatField(
        allow_null=True,
        default=None,
        help_text="N: messages, seconds, hours, or a disk use ratio in (0, 1); not used (null) "
        "by the status kinds.",
    )
    scope = serializers.ChoiceField(choices=AlertRule.SCOPES, default=AlertRule.SCOPE_ALL)
    group_pattern = _text(
        allow_blank=True,
        default="",
        max_length=MAX_PATTERN_LENGTH,
        help_text="A regex for the whole group name (scope match); empty: any.",
    )
    topic_pattern = _text(
        allow_blank=True,
        default="",
        max_length=MAX_PATTERN_LENGTH,
        help_text="A regex for a topic the group consumes (scope match); empty: any.",
    )
    for_seconds = serializers.IntegerField(
        min_value=0,
        max_value=MAX_FOR_SECONDS,
        required=False,
        help_text=(
            "How long the condition must hold before it fires; omitted: the condition's "
            "default (two sample intervals for the status conditions, else 0)."
        ),
    )
    repeat_seconds = serializers.IntegerField(
        min_value=0,
        max_value=MAX_REPEAT_SECONDS,
        default=3600,
        help_text="A reminder while it keeps firing; 0 for none, else at least 60.",
    )
    keep_firing_seconds = serializers.IntegerField(
        min_value=0,
        max_value=MAX_DAMPING_SECONDS,
        default=DEFAULT_KEEP_FIRING_SECONDS,
        help_text="Flap damping: it resolves once the condition was clear this long.",
    )
    group_interval_seconds = serializers.IntegerField(
        min_value=0,
        max_value=MAX_DAMPING_SECONDS,
        default=DEFAULT_GROUP_INTERVAL_SECONDS,
        help_text="At most one state-change notification per subject this often.",
    )
    recipients = AddressList(default=list, help_text="Email addresses; empty: no mail.")
    webhook_url = _text(
        allow_blank=True,
        default="",
        max_length=MAX_URL_LENGTH,
        help_text="An http(s) URL that gets an Alertmanager-style JSON POST; empty: none.",
    )

    cross_field_rules = (
        REGEXES,
        ADDRESSES,
        Rule.checked(
            "webhook_url",
            check="webhook_url",
            message="A webhook URL is blank, or an http(s) URL as Django's URLValidator takes "
            "it (without a scheme: https).",
        ),
    )
    body_constraints = (
        _threshold_per_kind([key for key, _ in AlertRule.KINDS]),
        SCOPE_AND_REGEXES,
        REPEAT,
    )


#: The kinds a new rule may have (the built-in ones are made by the console itself).
NEW_RULE_KINDS = kinds.choices(include_built_in=False)


class AlertRuleCreate(AlertRuleWrite):
    """A new rule as the console's rule form takes it; omitted fields take their defaults."""

    kind = serializers.ChoiceField(choices=NEW_RULE_KINDS, help_text="The condition.")

    body_constraints = (
        _threshold_per_kind([key for key, _ in NEW_RULE_KINDS]),
        SCOPE_AND_REGEXES,
        REPEAT,
    )


class DeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = Notification
        fields = ["id", "channel", "state", "attempts", "last_error", "sent_at", "next_attempt_at"]
        read_only_fields = fields


class NotificationSerializer(serializers.ModelSerializer):
    rule = serializers.IntegerField(source="rule_id", allow_null=True)

    class Meta:
        model = Notification
        fields = [
            "id",
            "rule",
            "rule_name",
            "channel",
            "target",
            "headline",
            "sections",
            "state",
            "attempts",
            "last_error",
            "created_at",
            "last_attempt_at",
            "next_attempt_at",
            "sent_at",
        ]
        read_only_fields = fields


class NotificationQuery(QuerySerializer):
    state = serializers.ChoiceField(choices=Notification.STATES, required=False)


class AlertEventSerializer(serializers.ModelSerializer):
    rule = serializers.IntegerField(
        source="rule_id", allow_null=True, help_text="Null once the rule is deleted."
    )
    value_text = serializers.CharField(help_text="The value when it fired, as the page says.")
    current_value_text = serializers.CharField()
    details = serializers.DictField()
    silenced_by = serializers.SerializerMethodField(
        help_text="The active silence muting its mail, if any (open events only)."
    )
    delivery = serializers.SerializerMethodField(
        help_text="Its latest notification's delivery: state, attempts, last error; null: none."
    )

    class Meta:
        model = AlertEvent
        fields = [
            "id",
            "rule",
            "rule_name",
            "kind",
            "subject",
            "state",
            "since",
            "started_at",
            "resolved_at",
            "value",
            "current_value",
            "value_text",
            "current_value_text",
            "details",
            "last_notified_at",
            "silenced_by",
            "delivery",
        ]
        read_only_fields = fields

    @extend_schema_field(DeliverySerializer(allow_null=True))
    def get_delivery(self, event: AlertEvent) -> dict | None:
        latest = event.latest_notification()
        return None if latest is None else DeliverySerializer(latest).data

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_silenced_by(self, event: AlertEvent) -> int | None:
        if event.state not in AlertEvent.OPEN_STATES:
            return None
        silence = operations.silenced_by(event, self.context["silences"], self.context["now"])
        return None if silence is None else silence.pk


class AlertEventQuery(QuerySerializer):
    state = serializers.ChoiceField(choices=AlertEvent.STATES, required=False)
    rule = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, help_text="The rule's id."
    )
    subject = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,  # an exact match: a long run of spaces is too long, not ""
        max_length=SUBJECT_LENGTH,
        help_text='The whole group name, or "store".',
    )


class SilenceSerializer(serializers.ModelSerializer):
    rule = serializers.IntegerField(
        source="rule_id", allow_null=True, help_text="Null: every rule."
    )
    rule_name = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by_name")
    active = serializers.SerializerMethodField()
    applies_to = serializers.CharField(source="scope_text")

    class Meta:
        model = Silence
        fields = [
            "id",
            "rule",
            "rule_name",
            "subject_pattern",
            "topic_pattern",
            "starts_at",
            "ends_at",
            "reason",
            "created_by",
            "created_at",
            "active",
            "applies_to",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_rule_name(self, silence: Silence) -> str | None:
        return silence.rule.name if silence.rule_id else None

    @extend_schema_field(serializers.BooleanField())
    def get_active(self, silence: Silence) -> bool:
        return silence.is_active(self.context.get("now"))


class SilenceListQuery(QuerySerializer):
    active = serializers.BooleanField(
        required=False, help_text="true: only silences in force now; false: only the others."
    )


class SilenceCreate(StrictSerializer):
    """A silence as the console's silence form takes it: from ``starts_at`` (default now)
    until ``ends_at``."""

    rule = serializers.IntegerField(
        allow_null=True,
        default=None,
        min_value=1,
        max_value=MAX_ID,
        help_text="The rule whose mail to silence; null: every rule.",
    )
    subject_pattern = _text(
        allow_blank=True,
        default="",
        max_length=MAX_PATTERN_LENGTH,
        help_text='An RE2 regex for the whole subject (group name, "store" or "monitoring"); '
        "empty: all.",
    )
    topic_pattern = _text(
        allow_blank=True,
        default="",
        max_length=MAX_PATTERN_LENGTH,
        help_text="An RE2 regex: only groups consuming a matching topic; empty: any.",
    )
    starts_at = serializers.DateTimeField(
        allow_null=True, default=None, help_text="Now when null; at most 90 days ahead."
    )
    ends_at = serializers.DateTimeField(help_text="After the start, at most 90 days later.")
    reason = not_blank_text(max_length=REASON_LENGTH, help_text="Why it is silenced.")

    cross_field_rules = (
        Rule.checked(
            "subject_pattern",
            "topic_pattern",
            check="regex",
            message=REGEXES.message,
        ),
        Rule.checked(
            "starts_at",
            "ends_at",
            check="silence_times",
            message="A silence starts at most 90 days ahead (now when starts_at is null or "
            "past) and ends in the future, after its start, at most 90 days later.",
        ),
    )


def _time(value: Any) -> Any:
    """A time of a body: the validated datetime, or its JSON text (None if not a time)."""
    try:
        return serializers.DateTimeField().to_internal_value(value)
    except serializers.ValidationError:
        return None


@check("silence_times")
def _silence_times(data: dict, fields: tuple[str, ...]) -> dict[str, str]:
    starts_at, ends_at = _time(data.get("starts_at")), _time(data.get("ends_at"))
    if ends_at is None:
        return {}
    problem = silence_problem(starts_at, ends_at, timezone.now())
    return {} if problem is None else dict([problem])


class SilenceActionResult(SilenceSerializer):
    changed = serializers.SerializerMethodField(help_text="False: it had already ended.")

    class Meta(SilenceSerializer.Meta):
        fields = [*SilenceSerializer.Meta.fields, "changed"]
        read_only_fields = fields

    @extend_schema_field(serializers.BooleanField())
    def get_changed(self, silence: Silence) -> bool:
        return self.context["changed"]


class TestEmailSend(StrictSerializer):
    """Where to send the test email."""

    recipients = AddressList(min_length=1, help_text="One or more email addresses.")

    cross_field_rules = (ADDRESSES,)


class TestEmailResult(serializers.Serializer):
    recipients = serializers.ListField(child=serializers.CharField())
    sent = serializers.BooleanField()


# ------------------------------------------------------------------------------ helpers


def refuse(form: BaseForm) -> NoReturn:
    """A 400 ``invalid`` in the one error shape, from a console form's errors."""
    fields = {
        ("non_field_errors" if name == NON_FIELD_ERRORS else name): errors
        for name, errors in form.errors.get_json_data().items()
    }
    name, errors = next(iter(fields.items()))
    first = errors[0]["message"]
    message = first if name == "non_field_errors" else f"{name}: {first}"
    raise ApiError(status.HTTP_400_BAD_REQUEST, "invalid", message, {"fields": fields})


def _rule(rule_id: int) -> AlertRule:
    rule = AlertRule.objects.filter(pk=rule_id).first()
    if rule is None:
        raise ApiError(404, "rule_not_found", f"There is no alert rule {rule_id}.")
    return rule


def _rule_exists(name: str) -> ApiError:
    return ApiError(409, "rule_exists", f"An alert rule named {name!r} exists already.")


def _rule_form(data: dict[str, Any], rule: AlertRule | None = None) -> RuleForm:
    """The console's rule form bound to ``data`` (recipients as a list); refused unless
    valid, a name taken by another rule being a 409."""
    data = dict(data)
    if isinstance(data.get("recipients"), list):
        data["recipients"] = "\n".join(data["recipients"])
    form = RuleForm(data, instance=rule)
    if not form.is_valid():
        errors = form.errors.get_json_data()
        if list(errors) == ["name"] and all(e["code"] == "unique" for e in errors["name"]):
            raise _rule_exists(str(data.get("name", "")).strip())
        refuse(form)
    return form


def _silence_data(silence: Silence, **context: Any) -> dict[str, Any]:
    context.setdefault("now", timezone.now())
    serializer = SilenceActionResult if "changed" in context else SilenceSerializer
    return serializer(silence, context=context).data


# ----------------------------------------------------------------------------------- rules


class AlertRuleList(APIView):
    change_role = ADMIN

    @extend_schema(
        operation_id="alerts_rules_list", responses={200: paginated(AlertRuleSerializer)}
    )
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        rules = visible_rules(request.user, AlertRule.objects.all())
        page = paginator.paginate_queryset(rules, request, view=self)
        return paginator.get_paginated_response(AlertRuleSerializer(page, many=True).data)

    @extend_schema(
        request=AlertRuleCreate,
        responses={
            201: AlertRuleSerializer,
            409: OpenApiResponse(ErrorSerializer, description="A rule of that name exists."),
        },
    )
    def post(self, request: Request) -> Response:
        form = _rule_form(validated(AlertRuleCreate, request.data))
        try:
            rule = operations.create_rule(request.user, form)
        except IntegrityError:  # created meanwhile by another request
            raise _rule_exists(form.cleaned_data["name"]) from None
        return Response(AlertRuleSerializer(rule).data, status=status.HTTP_201_CREATED)


class AlertRuleDetail(APIView):
    change_role = ADMIN

    @extend_schema(operation_id="alerts_rules_retrieve", responses={200: AlertRuleSerializer})
    def get(self, request: Request, rule_id: int) -> Response:
        rule = visible_rules(request.user, AlertRule.objects.filter(pk=rule_id)).first()
        if rule is None:
            raise ApiError(404, "rule_not_found", f"There is no alert rule {rule_id}.")
        return Response(AlertRuleSerializer(rule).data)

    def _save(self, request: Request, rule: AlertRule, data: dict[str, Any]) -> Response:
        form = _rule_form(data, rule)
        try:
            operations.update_rule(request.user, form)
        except IntegrityError:
            raise _rule_exists(form.cleaned_data["name"]) from None
        return Response(AlertRuleSerializer(_rule(rule.pk)).data)

    @extend_schema(
        request=AlertRuleWrite,
        responses={
            200: AlertRuleSerializer,
            409: OpenApiResponse(ErrorSerializer, description="Another rule has that name."),
        },
    )
    def put(self, request: Request, rule_id: int) -> Response:
        rule = _rule(rule_id)
        return self._save(request, rule, validated(AlertRuleWrite, request.data))

    @extend_schema(
        request=AlertRuleWrite,
        responses={
            200: AlertRuleSerializer,
            409: OpenApiResponse(ErrorSerializer, description="Another rule has that name."),
        },
    )
    def patch(self, request: Request, rule_id: int) -> Response:
        rule = _rule(rule_id)
        changes = validated(AlertRuleWrite, request.data, partial=True)
        if set(changes) == {"enabled"}:
            # The page's Enable / Disable button: its own audit action, nothing if so already.
            operations.set_enabled(request.user, rule, changes["enabled"])
            return Response(AlertRuleSerializer(_rule(rule.pk)).data)
        return self._save(request, rule, {**operations.rule_form_data(rule), **changes})

    @extend_schema(responses={204: None})
    def delete(self, request: Request, rule_id: int) -> Response:
        operations.delete_rule(request.user, _rule(rule_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


# ---------------------------------------------------------------------------------- events


class AlertEventList(APIView):
    @extend_schema(
        operation_id="alerts_events_list",
        parameters=[AlertEventQuery],
        responses={200: paginated(AlertEventSerializer)},
    )
    def get(self, request: Request) -> Response:
        query = validated(AlertEventQuery, request.query_params)
        events = visible_events(request.user, AlertEvent.objects.all())
        if "state" in query:
            events = events.filter(state=query["state"])
        if "rule" in query:
            events = events.filter(rule_id=query["rule"])
        if query.get("subject"):
            events = events.filter(subject=query["subject"])
        paginator = Pagination()
        page = paginator.paginate_queryset(events, request, view=self)
        now = timezone.now()
        context = {"now": now, "silences": active_silences(now)}
        data = AlertEventSerializer(page, many=True, context=context).data
        return paginator.get_paginated_response(data)


class NotificationList(APIView):
    @extend_schema(
        operation_id="alerts_notifications_list",
        parameters=[NotificationQuery],
        responses={200: paginated(NotificationSerializer)},
    )
    def get(self, request: Request) -> Response:
        query = validated(NotificationQuery, request.query_params)
        rows = visible_notifications(request.user, Notification.objects.all())
        if "state" in query:
            rows = rows.filter(state=query["state"])
        paginator = Pagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(NotificationSerializer(page, many=True).data)


# -------------------------------------------------------------------------------- silences


class SilenceList(APIView):
    method_roles = {"POST": OPERATOR}

    @extend_schema(
        operation_id="alerts_silences_list",
        parameters=[SilenceListQuery],
        responses={200: paginated(SilenceSerializer)},
    )
    def get(self, request: Request) -> Response:
        query = validated(SilenceListQuery, request.query_params)
        now = timezone.now()
        silences = visible_silences(request.user, Silence.objects.select_related("rule"))
        if "active" in query:
            in_force = Q(starts_at__lte=now, ends_at__gt=now)
            silences = silences.filter(in_force if query["active"] else ~in_force)
        paginator = Pagination()
        page = paginator.paginate_queryset(silences, request, view=self)
        data = SilenceSerializer(page, many=True, context={"now": now}).data
        return paginator.get_paginated_response(data)

    @extend_schema(
        request=SilenceCreate,
        responses={201: SilenceSerializer, **refusals((404, "No such alert rule."))},
    )
    def post(self, request: Request) -> Response:
        data = validated(SilenceCreate, request.data)
        if data["rule"] is not None:
            _rule(data["rule"])
        form = SilenceForm(
            {**data, "rule": data["rule"] or "", "starts_at": data["starts_at"] or ""}
        )
        if not form.is_valid():
            refuse(form)
        silence = operations.create_silence(request.user, form)
        return Response(_silence_data(silence), status=status.HTTP_201_CREATED)


class SilenceExpire(APIView):
    """POST ends the silence now; ``changed`` is false (and nothing is audited) when it
    had already ended."""

    method_roles = {"POST": OPERATOR}

    @extend_schema(request=None, responses={200: SilenceActionResult})
    def post(self, request: Request, silence_id: int) -> Response:
        silence = Silence.objects.select_related("rule").filter(pk=silence_id).first()
        if silence is None:
            raise ApiError(404, "silence_not_found", f"There is no silence {silence_id}.")
        now = timezone.now()
        changed = operations.expire_silence(request.user, silence, now)
        return Response(_silence_data(silence, now=now, changed=changed))


# ------------------------------------------------------------------------------ test email


class TestEmail(APIView):
    """POST mails a test message (admin); audited whether or not the mail server took it."""

    change_role = ADMIN

    @extend_schema(
        request=TestEmailSend,
        responses={
            200: TestEmailResult,
            502: OpenApiResponse(
                ErrorSerializer, description="The mail server refused; the attempt is audited."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = validated(TestEmailSend, request.data)
        form = TestEmailForm({"recipients": "\n".join(data["recipients"])})
        if not form.is_valid():
            refuse(form)
        recipients = form.cleaned_data["recipients"]
        failure = operations.send_test_email(request.user, recipients)
        if failure is not None:
            # Answered, not raised: the audit row of the attempt must not be rolled back.
            body = error_body(
                "mail_failed",
                f"The test email could not be sent ({failure}).",
                {"recipients": recipients},
            )
            return Response(body, status=status.HTTP_502_BAD_GATEWAY)
        return Response({"recipients": recipients, "sent": True})


urlpatterns = [
    path("alerts/rules/", AlertRuleList.as_view(), name="api-alert-rules"),
    path("alerts/rules/<int:rule_id>/", AlertRuleDetail.as_view(), name="api-alert-rule"),
    path("alerts/events/", AlertEventList.as_view(), name="api-alert-events"),
    path("alerts/notifications/", NotificationList.as_view(), name="api-alert-notifications"),
    path("alerts/silences/", SilenceList.as_view(), name="api-alert-silences"),
    path(
        "alerts/silences/<int:silence_id>/expire/",
        SilenceExpire.as_view(),
        name="api-alert-silence-expire",
    ),
    path("alerts/test-email/", TestEmail.as_view(), name="api-alert-test-email"),
]
