"""API: roles and their rules, and the data mask rules (admins): the same changes as
/accounts/roles/, audited.

- ``/api/v1/roles/``: GET every role (presets first) with its rules and members; POST
  ``{role, kind, pattern, actions}`` adds a rule (a new scoped role with its first rule).
- ``/api/v1/roles/rules/<id>/``: DELETE a rule.
- ``/api/v1/roles/<role>/members/``: POST ``{username, member}`` puts a user in the role
  (``member``: true, the default) or takes them out.
- ``/api/v1/masks/``: GET the mask rules; POST ``{pattern, part, field, how}`` adds one.
- ``/api/v1/masks/<id>/``: DELETE a mask rule.
"""

from __future__ import annotations

from dataclasses import asdict

from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts import role_rules
from console.accounts.models import MaskRule
from console.accounts.permissions import ACTIONS, KIND_ACTIONS, KINDS
from console.api.errors import ApiError
from console.api.rules import only
from console.api.serializers import (
    NOT_BLANK_PATTERN,
    StrictSerializer,
    not_blank_text,
    refusals,
    validated,
)


class RuleSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="null for a preset's rules.")
    # Text, not an enum: the schema would give it the same enum name as other kinds.
    kind = serializers.CharField(help_text=f"One of {', '.join(KINDS)}.")
    pattern = serializers.CharField()
    actions = serializers.ListField(child=serializers.ChoiceField(choices=list(ACTIONS)))


class RoleSerializer(serializers.Serializer):
    name = serializers.CharField()
    preset = serializers.BooleanField()
    rules = RuleSerializer(many=True)
    members = serializers.ListField(child=serializers.CharField())


class RuleAdd(StrictSerializer):
    """A rule for a scoped role: on resources of ``kind`` matching ``pattern``, ``actions``."""

    role = not_blank_text(
        max_length=role_rules.MAX_ROLE_NAME, help_text="A scoped role (new: created)."
    )
    kind = serializers.ChoiceField(
        choices=list(KINDS),
        error_messages={
            "invalid_choice": f"A rule's kind is one of {', '.join(KINDS)}, not {{input!r}}."
        },
    )
    pattern = not_blank_text(max_length=255, help_text="Shell-style: *, ?, […].")
    actions = serializers.ListField(
        child=serializers.CharField(max_length=20),
        min_length=1,
        help_text="; ".join(f"on a {kind}: {', '.join(KIND_ACTIONS[kind])}" for kind in KINDS),
    )

    # The actions a kind of resource has (console.accounts.permissions.KIND_ACTIONS).
    body_constraints = (
        {
            "anyOf": [
                {
                    "properties": {
                        **only("kind", kind)["properties"],
                        "actions": {"items": {"allOf": [{"enum": list(KIND_ACTIONS[kind])}]}},
                    }
                }
                for kind in KINDS
            ]
        },
    )


class MemberChange(StrictSerializer):
    """Put a user in the role (``member`` true) or take them out."""

    username = not_blank_text(max_length=150)
    member = serializers.BooleanField(default=True)


#: A scoped role's name in a path.
ROLE_PARAMETER = OpenApiParameter(
    "role",
    {"type": "string", "pattern": NOT_BLANK_PATTERN, "maxLength": role_rules.MAX_ROLE_NAME},
    OpenApiParameter.PATH,
)
BUILT_IN = (409, "A built-in role: its rules are fixed, its members set on the users page.")


def _refused(error: role_rules.RoleError) -> ApiError:
    if isinstance(error, role_rules.NoSuchRoleThing):
        return ApiError(404, "not_found", str(error))
    if isinstance(error, role_rules.BuiltInRoleError):
        return ApiError(409, "built_in_role", str(error))
    return ApiError(400, "invalid", str(error))


class RoleList(APIView):
    @extend_schema(operation_id="roles_list", responses={200: RoleSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response([asdict(role) for role in role_rules.roles()])

    @extend_schema(request=RuleAdd, responses={201: RuleSerializer, **refusals(BUILT_IN)})
    def post(self, request: Request) -> Response:
        data = validated(RuleAdd, request.data)
        try:
            rule = role_rules.add_rule(
                request.user, data["role"], data["kind"], data["pattern"], data["actions"]
            )
        except role_rules.RoleError as error:
            raise _refused(error) from None
        body = {"id": rule.pk, "kind": rule.kind, "pattern": rule.pattern, "actions": rule.actions}
        return Response(body, status=status.HTTP_201_CREATED)


class RoleRuleDetail(APIView):
    @extend_schema(responses={204: None, **refusals((404, "No such rule."))})
    def delete(self, request: Request, rule_id: int) -> Response:
        try:
            role_rules.delete_rule(request.user, rule_id)
        except role_rules.RoleError as error:
            raise ApiError(404, "not_found", str(error)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class RoleMembers(APIView):
    @extend_schema(
        request=MemberChange,
        parameters=[ROLE_PARAMETER],
        responses={
            204: None,
            **refusals(BUILT_IN, (404, "No such user (or, taking one out, no such role).")),
        },
    )
    def post(self, request: Request, role: str) -> Response:
        data = validated(MemberChange, request.data)
        try:
            role_rules.set_member(request.user, role, data["username"], data["member"])
        except role_rules.RoleError as error:
            raise _refused(error) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class MaskSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    pattern = serializers.CharField(help_text="Topics whose name matches (shell-style).")
    part = serializers.CharField(help_text="body, property or key.")
    field = serializers.CharField(help_text="A JSON body field (dotted), a property, or *.")
    how = serializers.CharField(help_text="mask or remove.")


class MaskAdd(StrictSerializer):
    """A mask rule: on topics matching ``pattern``, mask or remove a part's ``field``."""

    pattern = not_blank_text(max_length=255, help_text="Topics whose name matches.")
    part = serializers.ChoiceField(
        choices=MaskRule.PARTS,
        error_messages={
            "invalid_choice": "A mask rule's part is one of "
            f"{', '.join(value for value, _ in MaskRule.PARTS)}, not {{input!r}}."
        },
    )
    field = serializers.CharField(
        max_length=255, default="*", trim_whitespace=False, help_text="Blank: *."
    )
    how = serializers.ChoiceField(
        choices=MaskRule.HOWS,
        default="mask",
        error_messages={
            "invalid_choice": "A mask rule masks or removes "
            f"({', '.join(value for value, _ in MaskRule.HOWS)}), not {{input!r}}."
        },
    )


def _mask_data(rule) -> dict:
    return {
        "id": rule.pk,
        "pattern": rule.pattern,
        "part": rule.part,
        "field": rule.field,
        "how": rule.how,
    }


class MaskList(APIView):
    @extend_schema(operation_id="masks_list", responses={200: MaskSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response([_mask_data(rule) for rule in role_rules.masks()])

    @extend_schema(request=MaskAdd, responses={201: MaskSerializer})
    def post(self, request: Request) -> Response:
        data = validated(MaskAdd, request.data)
        try:
            rule = role_rules.add_mask(
                request.user, data["pattern"], data["part"], data["field"], data["how"]
            )
        except role_rules.RoleError as error:
            raise _refused(error) from None
        return Response(_mask_data(rule), status=status.HTTP_201_CREATED)


class MaskDetail(APIView):
    @extend_schema(responses={204: None, **refusals((404, "No such mask rule."))})
    def delete(self, request: Request, mask_id: int) -> Response:
        try:
            role_rules.delete_mask(request.user, mask_id)
        except role_rules.RoleError as error:
            raise ApiError(404, "not_found", str(error)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


urlpatterns = [
    path("masks/", MaskList.as_view(), name="api-masks"),
    path("masks/<int:mask_id>/", MaskDetail.as_view(), name="api-mask"),
    path("roles/", RoleList.as_view(), name="api-roles"),
    path("roles/rules/<int:rule_id>/", RoleRuleDetail.as_view(), name="api-role-rule"),
    path("roles/<str:role>/members/", RoleMembers.as_view(), name="api-role-members"),
]
