from django.contrib import admin

from .models import ApiKey


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "store", "prefix", "created_at", "last_used_at", "revoked")
    list_filter = ("store", "revoked")
    readonly_fields = ("prefix", "created_at", "last_used_at")
    fields = ("store", "name", "prefix", "revoked", "created_at", "last_used_at")

    def has_add_permission(self, request) -> bool:  # keys come from `manage.py create_api_key` (shown once)
        return False
