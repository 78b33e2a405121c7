"""Reset previews kept for a later apply: by the API always, by the console for plans of
big topics (too big to send back and forth through a page)."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from console.api.models import PREVIEW_KEPT, PREVIEW_LIFETIME, ResetPreview
from storeadapter.offset_reset import ResetPlan


def keep_preview(plan: ResetPlan) -> datetime:
    """Keep ``plan`` under its token (dropping long-expired ones); return when it was kept."""
    now = timezone.now()
    ResetPreview.objects.filter(created_at__lt=now - PREVIEW_LIFETIME - PREVIEW_KEPT).delete()
    ResetPreview.objects.update_or_create(
        token=plan.token,
        defaults={"group": plan.group, "plan": plan.as_dict(), "created_at": now},
    )
    return now


def kept_preview(token: str, group: str) -> ResetPreview | None:
    """The preview kept under ``token`` for ``group``, expired or not; None if none is."""
    return ResetPreview.objects.filter(token=token, group=group).first()


def kept_plan(saved: ResetPreview) -> ResetPlan:
    """The plan of a kept preview (ResetError if it no longer reads as one)."""
    return ResetPlan.from_dict(saved.plan, with_moves=True)
