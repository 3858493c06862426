"""The system prompt's versions: drafts, publish, rollback, the default prompt of a new store. The lifecycle is
the one every versioned text of a store shares (``versioning``); what is the prompt's own: its text's limits, and
that a publish or rollback is announced to every node, which pre-warms it (``prewarm``). The read the chat needs,
``published_prompt``, is the ``prompts`` app's."""

from __future__ import annotations

from catalog.models import Store
from shop_assistant.chat.answers import owner
from shop_assistant.prompts import guidance
from shop_assistant.prompts.defaults import DEFAULT_SYSTEM_PROMPT
from shop_assistant.prompts.models import PromptVersion, published_prompt

from .prewarm import announce
from .versioning import UNSET, PromptError, PublishConflict, VersionedText, in_store_transaction

__all__ = [
    "MAX_PROMPT_CHARS", "PromptError", "PublishConflict", "create_draft", "discard_draft", "ensure_default_prompt",
    "publish", "published_prompt", "rollback", "understood", "update_draft",
]  # fmt: skip

MAX_PROMPT_CHARS = 50_000

PROMPTS = VersionedText(
    model=PromptVersion, owner="store", texts=("system_prompt", "policies"), store_id=lambda v: v.store_id,
    related=("store",),
)  # fmt: skip


def _check_text(system_prompt: str, policies: str) -> None:
    if not system_prompt.strip():
        raise PromptError("the system prompt is empty")
    if len(system_prompt) + len(policies) > MAX_PROMPT_CHARS:
        raise PromptError(f"the prompt and policies are limited to {MAX_PROMPT_CHARS} characters")


def create_draft(
    store: Store, system_prompt: str, policies: str = "", user=None, note: str = ""
) -> PromptVersion:
    """A new draft with the next version number of the store."""
    _check_text(system_prompt, policies)
    return in_store_transaction(
        store.pk,
        lambda: PROMPTS.create(store.pk, user, system_prompt=system_prompt, policies=policies, note=note[:200]),
    )


def update_draft(draft: PromptVersion, system_prompt: str, policies: str, note: str = "") -> PromptVersion:
    """Save new text into a draft; published and archived versions never change."""
    _check_text(system_prompt, policies)
    return PROMPTS.update_draft(draft, note, system_prompt=system_prompt, policies=policies)


def understood(version: PromptVersion) -> dict[str, object]:
    """What the assistant takes from a version's prompt (its guidance, names resolved against the catalog as it is
    now), for the prompt pages: ``guidance`` and ``guidance_rows``."""
    read = guidance.for_version(version)
    return {"guidance": read, "guidance_rows": owner.describe(read, version.store)}


def discard_draft(draft: PromptVersion) -> None:
    PROMPTS.discard_draft(draft)


def publish(version: PromptVersion, user=None, expected_published: int | None = UNSET) -> PromptVersion:
    """Publish a draft (``versioning.VersionedText.publish``); every node pre-warms it once this commits."""
    published = PROMPTS.publish(version, user, expected_published)
    version.refresh_from_db()
    announce(published)
    return published


def rollback(target: PromptVersion, user=None, expected_published: int | None = UNSET) -> PromptVersion:
    """Publish the text of an earlier version again, as a new version; announced as a publish is."""
    published = PROMPTS.rollback(target, user, expected_published)
    announce(published)
    return published


def ensure_default_prompt(store: Store) -> PromptVersion:
    """Give a store a published prompt if it has none (idempotent, also when two sessions ask at once)."""
    current = published_prompt(store)
    if current is not None:
        return current

    def work() -> PromptVersion:
        existing = published_prompt(store)
        if existing is not None:
            return existing
        draft = PROMPTS.create(store.pk, system_prompt=DEFAULT_SYSTEM_PROMPT.format(store=store.name), note="default")
        return PROMPTS.publish_locked(draft.pk, None)

    return in_store_transaction(store.pk, work)
