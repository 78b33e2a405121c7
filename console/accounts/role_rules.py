"""Changing scoped roles: their rules and their members, for the roles page and the API
alike. Each change is audited (``role.rule_add``, ``role.rule_delete``,
``role.member_add``, ``role.member_remove``); refusals are ``RoleError`` with a sentence.

The built-in roles (viewer, operator, admin) are presets: their rules are fixed, and a
user's preset role is set on the users page. Any other name is a scoped role, created by
its first rule (an SSO provider's group mapping only has to name it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from console.accounts.models import MaskRule, RoleRule
from console.accounts.permissions import PRESETS, check_rule
from console.accounts.roles import ROLES
from console.audit.log import record

MAX_ROLE_NAME = 150


class RoleError(Exception):
    """A change to a role that cannot be made, with a sentence saying why."""


class NoSuchRoleThing(RoleError):
    """What the change names (a user, a role, a rule) does not exist."""


class BuiltInRoleError(RoleError):
    """The change is to a built-in role, whose rules and members are not set here."""


@dataclass(frozen=True)
class RuleView:
    id: int | None
    kind: str
    pattern: str
    actions: list[str]


@dataclass(frozen=True)
class RoleView:
    name: str
    preset: bool
    rules: list[RuleView]
    members: list[str]


def _scoped_role_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise RoleError("A role has a name, such as team-payments.")
    name = name.strip()
    if len(name) > MAX_ROLE_NAME:
        raise RoleError(f"A role's name is at most {MAX_ROLE_NAME} characters.")
    if name in ROLES:
        raise BuiltInRoleError(
            f"{name} is a built-in role: its rules are fixed, and its members are set on the "
            "users page."
        )
    return name


def roles() -> list[RoleView]:
    """The presets, then every scoped role (a group with rules, or without any yet), each
    with its rules and members."""
    members: dict[int, list[str]] = {}
    user_model = get_user_model()
    for group_id, username in user_model.groups.through.objects.values_list(
        "group_id", f"user__{user_model.USERNAME_FIELD}"
    ):
        members.setdefault(group_id, []).append(username)
    views = []
    groups = {g.name: g for g in Group.objects.all()}
    for name in ROLES:
        group = groups.get(name)
        rules = [RuleView(None, g.kind, g.pattern, sorted(g.actions)) for g in PRESETS[name]]
        views.append(
            RoleView(name, True, rules, sorted(members.get(group.pk, []) if group else []))
        )
    rules_of: dict[int, list[RuleView]] = {}
    for rule in RoleRule.objects.order_by("kind", "pattern", "pk"):
        rules_of.setdefault(rule.role_id, []).append(
            RuleView(rule.pk, rule.kind, rule.pattern, list(rule.actions))
        )
    for name, group in sorted(groups.items()):
        if name in ROLES:
            continue
        views.append(
            RoleView(name, False, rules_of.get(group.pk, []), sorted(members.get(group.pk, [])))
        )
    return views


def add_rule(actor: Any, role: Any, kind: Any, pattern: Any, actions: Any) -> RoleRule:
    """Add a rule to the scoped role ``role`` (created if new)."""
    name = _scoped_role_name(role)
    if not isinstance(actions, list | tuple) or not all(isinstance(a, str) for a in actions):
        raise RoleError("A rule's actions are a list of action names.")
    try:
        ordered = check_rule(
            kind, pattern.strip() if isinstance(pattern, str) else pattern, actions
        )
    except ValueError as error:
        raise RoleError(str(error)) from None
    with transaction.atomic():
        group, _ = Group.objects.get_or_create(name=name)
        rule = RoleRule.objects.create(
            role=group, kind=kind, pattern=pattern.strip(), actions=ordered
        )
        record(
            actor,
            "role.rule_add",
            f"role {name}",
            after={"kind": kind, "pattern": rule.pattern, "actions": ordered},
            link="/accounts/roles/",
        )
    return rule


def delete_rule(actor: Any, rule_id: Any) -> None:
    with transaction.atomic():
        rule = RoleRule.objects.select_related("role").filter(pk=rule_id).first()
        if rule is None:
            raise RoleError(f"There is no rule #{rule_id}; nothing was deleted.")
        before = {"kind": rule.kind, "pattern": rule.pattern, "actions": rule.actions}
        name = rule.role.name
        rule.delete()
        record(actor, "role.rule_delete", f"role {name}", before=before, link="/accounts/roles/")


def set_member(actor: Any, role: Any, username: Any, member: bool) -> None:
    """Put the user named ``username`` in the scoped role ``role`` (or take them out)."""
    name = _scoped_role_name(role)
    if not isinstance(username, str) or not username.strip():
        raise RoleError("Name the user, such as ada.")
    user = get_user_model()._default_manager.filter(username__iexact=username.strip()).first()
    if user is None:
        raise NoSuchRoleThing(f"There is no user named {username.strip()}.")
    with transaction.atomic():
        group = Group.objects.filter(name=name).first()
        if group is None:
            if not member:
                raise NoSuchRoleThing(f"There is no role named {name}.")
            group = Group.objects.create(name=name)
        was = user.groups.filter(pk=group.pk).exists()
        if was == member:
            return
        if member:
            user.groups.add(group)
        else:
            user.groups.remove(group)
        record(
            actor,
            "role.member_add" if member else "role.member_remove",
            f"role {name}",
            before={"member": user.get_username() if was else None},
            after={"member": user.get_username() if member else None},
            link="/accounts/roles/",
        )


# ------------------------------------------------------------------ mask rules


def masks() -> list[MaskRule]:
    return list(MaskRule.objects.all())


def add_mask(actor: Any, pattern: Any, part: Any, field: Any, how: Any) -> MaskRule:
    """Add a mask rule (console/accounts/masking.py), audited as ``mask.add``."""
    if not isinstance(pattern, str) or not pattern.strip() or len(pattern) > 255:
        raise RoleError("A mask rule's topic pattern is 1 to 255 characters, such as cards.*.")
    parts = [value for value, _ in MaskRule.PARTS]
    if part not in parts:
        raise RoleError(f"A mask rule's part is one of {', '.join(parts)}, not {part!r}.")
    hows = [value for value, _ in MaskRule.HOWS]
    if how not in hows:
        raise RoleError(f"A mask rule masks or removes ({', '.join(hows)}), not {how!r}.")
    field = field.strip() if isinstance(field, str) and field.strip() else "*"
    if len(field) > 255:
        raise RoleError("A mask rule's field is at most 255 characters.")
    with transaction.atomic():
        rule = MaskRule.objects.create(pattern=pattern.strip(), part=part, field=field, how=how)
        record(
            actor,
            "mask.add",
            f"topics {rule.pattern}",
            after={"part": part, "field": field, "how": how},
            link="/accounts/roles/",
        )
    return rule


def delete_mask(actor: Any, mask_id: Any) -> None:
    with transaction.atomic():
        rule = MaskRule.objects.filter(pk=mask_id).first()
        if rule is None:
            raise RoleError(f"There is no mask rule #{mask_id}; nothing was deleted.")
        before = {"part": rule.part, "field": rule.field, "how": rule.how}
        rule.delete()
        record(
            actor, "mask.delete", f"topics {rule.pattern}", before=before, link="/accounts/roles/"
        )
