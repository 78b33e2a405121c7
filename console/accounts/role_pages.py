"""/accounts/roles/: the roles and their rules; admins add and delete rules and members.

One page, one URL: GET shows every role (the presets' fixed rules, then the scoped
roles'), POST takes an ``action`` (``add_rule``, ``delete_rule``, ``add_member``,
``remove_member``), made by console/accounts/role_rules.py (audited), then redirects back
with a line saying what was done or why not.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from console.accounts import role_rules
from console.accounts.permissions import ACTION_HELP, KIND_ACTIONS, KINDS


def _add_rule(request: HttpRequest) -> str:
    rule = role_rules.add_rule(
        request.user,
        request.POST.get("role"),
        request.POST.get("kind"),
        request.POST.get("pattern"),
        request.POST.getlist("actions"),
    )
    actions = ", ".join(rule.actions)
    return f"Role {rule.role.name} now allows {actions} on {rule.kind}s {rule.pattern}."


def _chosen(request: HttpRequest, field: str, what: str) -> int:
    """The id the form's ``field`` names, or RoleError asking to choose ``what``."""
    value = request.POST.get(field, "")
    if not value.isdigit():
        raise role_rules.RoleError(f"Choose {what} to delete; nothing was deleted.")
    return int(value)


def _delete_rule(request: HttpRequest) -> str:
    rule_id = _chosen(request, "rule", "a rule")
    role_rules.delete_rule(request.user, rule_id)
    return f"Rule #{rule_id} deleted."


def _member(add: bool):
    def change(request: HttpRequest) -> str:
        role, username = request.POST.get("role"), request.POST.get("username")
        role_rules.set_member(request.user, role, username, add)
        return f"{username} is {'now' if add else 'no longer'} in role {role}."

    return change


def _add_mask(request: HttpRequest) -> str:
    rule = role_rules.add_mask(
        request.user,
        request.POST.get("pattern"),
        request.POST.get("part"),
        request.POST.get("field"),
        request.POST.get("how"),
    )
    return f"Topics {rule.pattern}: {rule.part} {rule.field} is now {rule.how}ed for viewers."


def _delete_mask(request: HttpRequest) -> str:
    mask_id = _chosen(request, "mask", "a mask rule")
    role_rules.delete_mask(request.user, mask_id)
    return f"Mask rule #{mask_id} deleted."


ACTIONS = {
    "add_mask": _add_mask,
    "delete_mask": _delete_mask,
    "add_rule": _add_rule,
    "delete_rule": _delete_rule,
    "add_member": _member(True),
    "remove_member": _member(False),
}


@require_http_methods(["GET", "HEAD", "POST"])
def role_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        handler = ACTIONS.get(request.POST.get("action", ""))
        if handler is None:
            messages.error(request, "That action is not known; nothing was changed.")
        else:
            try:
                messages.success(request, handler(request))
            except role_rules.RoleError as error:
                messages.error(request, str(error))
        return redirect(reverse("role_list"))
    return render(
        request,
        "accounts/roles.html",
        {
            "roles": role_rules.roles(),
            "masks": role_rules.masks(),
            "kinds": KINDS,
            "kind_actions": KIND_ACTIONS,
            "action_help": sorted(ACTION_HELP.items()),
            "all_actions": list(dict.fromkeys(a for k in KINDS for a in KIND_ACTIONS[k])),
        },
    )
