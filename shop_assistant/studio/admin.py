"""Prompt versions in the admin: text of drafts only; status and version change only through the services
(publish, rollback), so the admin can never break the one-published-per-store rule or skip archiving."""

from __future__ import annotations

from django.contrib import admin, messages

from shop_assistant.prompts.models import PromptVersion, SampleQuestion

from . import services

LIFECYCLE_FIELDS = (
    "version",
    "status",
    "created_by",
    "created_at",
    "published_at",
    "published_by",
    "restored_from",
    "prewarmed_tokens",
    "prewarmed_at",
    # The score is the scoring's to write (studio.scoring), never an admin's.
    "score",
    "score_report",
    "score_text_hash",
    "score_state",
    "score_done",
    "score_total",
    "score_started_at",
    "scored_at",
)


@admin.register(PromptVersion)
class PromptVersionAdmin(admin.ModelAdmin):
    list_display = ("store", "version", "status", "note", "created_at", "published_at", "published_by")
    list_filter = ("store", "status")
    actions = ["publish_selected"]

    def get_readonly_fields(self, request, obj=None):
        # ``policies``: history only; a policy's one copy is its knowledge document.
        if obj is None:
            return ("policies", *LIFECYCLE_FIELDS)
        if obj.status != PromptVersion.Status.DRAFT:
            return ("store", "system_prompt", "policies", "note", *LIFECYCLE_FIELDS)
        return ("store", "policies", *LIFECYCLE_FIELDS)

    def save_model(self, request, obj, form, change) -> None:
        if change:
            saved = services.update_draft(obj, obj.system_prompt, "", obj.note)
        else:
            saved = services.create_draft(obj.store, obj.system_prompt, user=request.user, note=obj.note)
        obj.pk, obj.version, obj.status = saved.pk, saved.version, saved.status

    def has_delete_permission(self, request, obj=None) -> bool:
        # Published and archived versions are the history; only drafts may go.
        return super().has_delete_permission(request, obj) and (
            obj is None or obj.status == PromptVersion.Status.DRAFT
        )

    @admin.action(description="Publish the selected draft (archives the store's current version)")
    def publish_selected(self, request, queryset) -> None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one draft to publish.", messages.ERROR)
            return
        try:
            version = services.publish(queryset.get(), user=request.user)
        except services.PromptError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        self.message_user(request, f"Published v{version.version} of {version.store}.")


@admin.register(SampleQuestion)
class SampleQuestionAdmin(admin.ModelAdmin):
    list_display = ("store", "position", "text")
    list_filter = ("store",)
