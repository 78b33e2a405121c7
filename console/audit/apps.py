from django.apps import AppConfig


class AuditConfig(AppConfig):
    """The audit log: who changed what, when, before → after."""

    name = "console.audit"
    label = "audit"
    verbose_name = "Audit log"
