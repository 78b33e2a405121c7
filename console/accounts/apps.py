from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Roles (viewer, operator, admin) as Django groups, and the checks views use."""

    name = "console.accounts"
    label = "accounts"
    verbose_name = "Tidemark accounts and roles"

    def ready(self) -> None:
        from console.accounts import access_audit

        access_audit.connect()
