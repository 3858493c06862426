from django.contrib import admin

from .models import (
    Action,
    CannedReply,
    Label,
    Note,
    Notification,
    RetentionSettings,
    StoreMembership,
    TranscriptExport,
)


@admin.register(StoreMembership)
class StoreMembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "store", "role", "created_at"]
    list_filter = ["store", "role"]


@admin.register(RetentionSettings)
class RetentionSettingsAdmin(admin.ModelAdmin):
    list_display = ["store", "retention_days"]


@admin.register(CannedReply)
class CannedReplyAdmin(admin.ModelAdmin):
    list_display = ["store", "shortcut", "text"]
    list_filter = ["store"]


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ["store", "name", "color"]


@admin.register(Action)
class ActionAdmin(admin.ModelAdmin):
    list_display = ["created_at", "user", "kind", "conversation"]
    list_filter = ["kind"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # the log is a record: nobody edits it


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ["created_at", "user", "kind", "actor", "conversation", "read_at"]
    list_filter = ["kind"]


admin.site.register(Note)
admin.site.register(TranscriptExport)
