from django.contrib import admin

from .models import AnswerSettings, Conversation, Message, WidgetSettings


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    can_delete = False
    fields = ("created_at", "role", "agent", "text", "finish_reason", "prompt_tokens", "cached_tokens")
    readonly_fields = fields
    ordering = ("created_at",)


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("id", "store", "created_at", "last_activity_at")
    list_filter = ("store",)
    # The token hash is useless to staff and would only help someone guess at tokens.
    exclude = ("resume_token_hash",)
    readonly_fields = ("store", "created_at", "last_activity_at")
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("created_at", "conversation", "role", "short_text", "finish_reason", "cached_tokens")
    list_filter = ("role", "finish_reason", "conversation__store")
    search_fields = ("text",)
    readonly_fields = [f.name for f in Message._meta.fields]

    @admin.display(description="text")
    def short_text(self, obj: Message) -> str:
        return obj.text[:80]


@admin.register(AnswerSettings)
class AnswerSettingsAdmin(admin.ModelAdmin):
    list_display = ("store", "model_text", "answer_max_tokens", "temperature")


@admin.register(WidgetSettings)
class WidgetSettingsAdmin(admin.ModelAdmin):
    list_display = ("store", "allowed_origins")  # the key is never shown: it seeds the store's signing secret
