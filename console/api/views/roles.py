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
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts import role_rules
from console.accounts.permissions import ACTIONS, KINDS
from console.api.errors import ApiError
from console.api.serializers import StrictSerializer, refusals, validated


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
    role = serializers.CharField(max_length=role_rules.MAX_ROLE_NAME)
    kind = serializers.CharField(help_text=f"One of {', '.join(KINDS)}.")
    pattern = serializers.CharField(max_length=255, help_text="Shell-style: *, ?, […].")
    actions = serializers.ListField(
        child=serializers.CharField(max_length=20), help_text=f"Of {', '.join(ACTIONS)}."
    )


class MemberChange(StrictSerializer):
    username = serializers.CharField(max_length=150)
    member = serializers.BooleanField(default=True)


def _refused(error: role_rules.RoleError) -> ApiError:
    return ApiError(400, "invalid", str(error))


class RoleList(APIView):
    @extend_schema(operation_id="roles_list", responses={200: RoleSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response([asdict(role) for role in role_rules.roles()])

    @extend_schema(request=RuleAdd, responses={201: RuleSerializer})
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
    @extend_schema(request=MemberChange, responses={204: None})
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
    pattern = serializers.CharField(max_length=255)
    part = serializers.CharField(max_length=10, help_text="body, property or key.")
    field = serializers.CharField(max_length=255, default="*")
    how = serializers.CharField(max_length=10, default="mask", help_text="mask or remove.")


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
