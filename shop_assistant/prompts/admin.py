from django.contrib import admin

from .models import PromptVersion


@admin.register(PromptVersion)
class PromptVersionAdmin(admin.ModelAdmin):
    list_display = ("store", "version", "status", "created_at", "published_at")
    list_filter = ("store", "status")
    readonly_fields = ("published_at", "created_at")
