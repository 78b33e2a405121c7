from django.contrib import admin

from console.audit.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Read-only: audit rows are written by the code that makes changes, never edited."""

    list_display = ("created_at", "username", "action", "target")
    list_filter = ("action",)
    search_fields = ("username", "action", "target", "detail")
    date_hierarchy = "created_at"
    readonly_fields = [field.name for field in AuditEntry._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
