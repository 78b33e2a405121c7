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

The bodies' JSON types and unknown fields are refused here; everything else is the console's
own forms (console/alerts/forms.py: regexes, recipients, thresholds per kind, silence ends),
and every change goes through console/alerts/operations.py, which writes the same audit row
as the /alerts/ pages. Times are ISO 8601.
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
from console.alerts import operations
from console.alerts.evaluate import active_silences
from console.alerts.forms import (
    MAX_DAMPING_SECONDS,
    MAX_FOR_SECONDS,
    MAX_REPEAT_SECONDS,
    MAX_URL_LENGTH,
    RuleForm,
    SilenceForm,
    TestEmailForm,
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
from console.api.errors import ApiError, error_body
from console.api.pagination import Pagination, paginated
from console.api.serializers import ErrorSerializer, QuerySerializer, StrictSerializer, validated

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
    """Email addresses, each a JSON string (checked as addresses by the console's form)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("child", serializers.CharField(trim_whitespace=False))
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, list) and any(not isinstance(item, str) for item in data):
            raise serializers.ValidationError("Addresses are strings.")
        return super().to_internal_value(data)


def _text(**kwargs: Any) -> serializers.CharField:
    """A string left as sent: the console's form strips and checks it."""
    return serializers.CharField(trim_whitespace=False, **kwargs)


class AlertRuleWrite(StrictSerializer):
    """A rule as the console's rule form takes it; omitted fields take their defaults
    (PATCH: keep their values)."""

    name = _text(max_length=RULE_NAME_LENGTH, help_text="Unique.")
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
    reason = _text(max_length=REASON_LENGTH, help_text="Why it is silenced.")


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

    recipients = AddressList(help_text="One or more email addresses.")


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
        page = paginator.paginate_queryset(AlertRule.objects.all(), request, view=self)
        return paginator.get_paginated_response(AlertRuleSerializer(page, many=True).data)

    @extend_schema(
        request=AlertRuleWrite,
        responses={
            201: AlertRuleSerializer,
            409: OpenApiResponse(ErrorSerializer, description="A rule of that name exists."),
        },
    )
    def post(self, request: Request) -> Response:
        form = _rule_form(validated(AlertRuleWrite, request.data))
        try:
            rule = operations.create_rule(request.user, form)
        except IntegrityError:  # created meanwhile by another request
            raise _rule_exists(form.cleaned_data["name"]) from None
        return Response(AlertRuleSerializer(rule).data, status=status.HTTP_201_CREATED)


class AlertRuleDetail(APIView):
    change_role = ADMIN

    @extend_schema(operation_id="alerts_rules_retrieve", responses={200: AlertRuleSerializer})
    def get(self, request: Request, rule_id: int) -> Response:
        return Response(AlertRuleSerializer(_rule(rule_id)).data)

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
        events = AlertEvent.objects.all()
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
        rows = Notification.objects.all()
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
        silences = Silence.objects.select_related("rule")
        if "active" in query:
            in_force = Q(starts_at__lte=now, ends_at__gt=now)
            silences = silences.filter(in_force if query["active"] else ~in_force)
        paginator = Pagination()
        page = paginator.paginate_queryset(silences, request, view=self)
        data = SilenceSerializer(page, many=True, context={"now": now}).data
        return paginator.get_paginated_response(data)

    @extend_schema(request=SilenceCreate, responses={201: SilenceSerializer})
    def post(self, request: Request) -> Response:
        data = validated(SilenceCreate, request.data)
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
