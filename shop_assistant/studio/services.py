"""Prompt versioning: drafts, publish, rollback, and reading the published version.

Every change to a store's versions runs in one transaction that first locks the store's row, so changes of one
store happen one after the other: two owners publishing at the same moment never both see "nothing published"
and never hit the one-published-per-store constraint. The lock is an UPDATE rather than SELECT ... FOR UPDATE so
that SQLite (no row locks) takes its database write lock at the start of the transaction, where it waits for
the other writer, instead of failing later when a read lock cannot be upgraded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from django.db import IntegrityError, OperationalError, transaction
from django.db.models import F, Max
from django.utils import timezone

from catalog.models import Store
from shop_assistant.runtime.retry import retrying

from shop_assistant.prompts.defaults import DEFAULT_SYSTEM_PROMPT
from shop_assistant.prompts.models import PromptVersion, published_prompt
from .prewarm import announce

logger = logging.getLogger(__name__)

T = TypeVar("T")
# A serialization failure or a busy SQLite database: the whole transaction is retried this many times.
RETRIES = 5
MAX_PROMPT_CHARS = 50_000


class PromptError(Exception):
    """A change the owner asked for cannot be made; the message is for the owner."""


class PublishConflict(PromptError):
    """Someone else published another version since the owner loaded the page."""

    def __init__(self, current: PromptVersion | None) -> None:
        who = f" by {current.created_by}" if current is not None and current.created_by else ""
        label = f"v{current.version}" if current is not None else "another version"
        super().__init__(f"{label} was published{who} in the meantime; review the difference and publish again.")
        self.current = current


def _lock_store(store_id: int) -> None:
    Store.objects.filter(pk=store_id).update(cache_salt=F("cache_salt"))


def _worth_retrying(error: BaseException) -> bool:
    # Inside a caller's transaction a retry cannot help: the caller's transaction is already broken.
    if transaction.get_connection().in_atomic_block:
        return False
    # OperationalError: SQLite "database is locked" past its timeout, or PostgreSQL serialization/deadlock errors.
    # IntegrityError: only reachable if a writer bypassed the lock (raw SQL, the admin of an older release): retry
    # against the state it left.
    return isinstance(error, (OperationalError, IntegrityError))


def _log_retry(store_id: int) -> Callable[[int, BaseException], None]:
    def log(attempt: int, error: BaseException) -> None:
        if isinstance(error, OperationalError):
            logger.warning("prompt change for store %s retried after %s", store_id, error)

    return log


def _in_store_transaction(store_id: int, work: Callable[[], T]) -> T:
    """Run ``work`` in a transaction holding the store's lock; retried when the database asks for it."""

    def locked() -> T:
        with transaction.atomic():
            _lock_store(store_id)
            return work()

    try:
        return retrying(retry_on=_worth_retrying, attempts=RETRIES, before_retry=_log_retry(store_id))(locked)
    except IntegrityError:
        raise PromptError("the prompt changed while saving; try again") from None  # never a constraint error


def _check_text(system_prompt: str, policies: str) -> None:
    if not system_prompt.strip():
        raise PromptError("the system prompt is empty")
    if len(system_prompt) + len(policies) > MAX_PROMPT_CHARS:
        raise PromptError(f"the prompt and policies are limited to {MAX_PROMPT_CHARS} characters")


def _next_version(store_id: int) -> int:
    latest = PromptVersion.objects.filter(store_id=store_id).aggregate(v=Max("version"))["v"]
    return (latest or 0) + 1


def create_draft(
    store: Store, system_prompt: str, policies: str = "", user=None, note: str = ""
) -> PromptVersion:
    """A new draft with the next version number of the store."""
    _check_text(system_prompt, policies)

    def work() -> PromptVersion:
        return PromptVersion.objects.create(
            store=store,
            version=_next_version(store.pk),
            system_prompt=system_prompt,
            policies=policies,
            created_by=user if getattr(user, "is_authenticated", False) else None,
            note=note[:200],
        )

    return _in_store_transaction(store.pk, work)


def update_draft(draft: PromptVersion, system_prompt: str, policies: str, note: str = "") -> PromptVersion:
    """Save new text into a draft; published and archived versions never change."""
    _check_text(system_prompt, policies)

    def work() -> PromptVersion:
        current = PromptVersion.objects.get(pk=draft.pk)
        if current.status != PromptVersion.Status.DRAFT:
            raise PromptError(f"v{current.version} is {current.status}; only drafts can be edited")
        current.system_prompt, current.policies, current.note = system_prompt, policies, note[:200]
        current.save(update_fields=["system_prompt", "policies", "note"])
        return current

    return _in_store_transaction(draft.store_id, work)


def discard_draft(draft: PromptVersion) -> None:
    def work() -> None:
        deleted, _ = PromptVersion.objects.filter(pk=draft.pk, status=PromptVersion.Status.DRAFT).delete()
        if not deleted:
            raise PromptError("only drafts can be discarded")

    _in_store_transaction(draft.store_id, work)


def _publish_locked(version_id: int, user, expected_published_id: int | None, *, check: bool) -> PromptVersion:
    version = PromptVersion.objects.select_related("store").get(pk=version_id)
    current = PromptVersion.objects.filter(store_id=version.store_id, status=PromptVersion.Status.PUBLISHED).first()
    if current is not None and current.pk == version.pk:
        return version  # already published (a double click, or the same publish from two tabs)
    if version.status != PromptVersion.Status.DRAFT:
        raise PromptError(f"v{version.version} is {version.status}; only drafts can be published (use rollback)")
    if check and (current.pk if current is not None else None) != expected_published_id:
        raise PublishConflict(current)
    if current is not None:
        PromptVersion.objects.filter(pk=current.pk).update(status=PromptVersion.Status.ARCHIVED)
    version.status = PromptVersion.Status.PUBLISHED
    version.published_at = timezone.now()
    update = ["status", "published_at"]
    if user is not None and getattr(user, "is_authenticated", False):
        version.published_by = user
        update.append("published_by")
    version.save(update_fields=update)
    return version


_UNSET = object()


def publish(version: PromptVersion, user=None, expected_published: int | None | object = _UNSET) -> PromptVersion:
    """Publish a draft; the version published before it is archived in the same transaction.

    ``expected_published``: the id of the version the owner saw published (None: nothing was). When given and
    another version has been published since, ``PublishConflict`` is raised instead of overwriting it.
    """
    check = expected_published is not _UNSET
    expected = expected_published if check else None
    published = _in_store_transaction(
        version.store_id, lambda: _publish_locked(version.pk, user, expected, check=check)  # type: ignore[arg-type]
    )
    version.refresh_from_db()
    announce(published)  # every node pre-warms it once this commits
    return published


def rollback(target: PromptVersion, user=None, expected_published: int | None | object = _UNSET) -> PromptVersion:
    """Publish the text of an earlier version again, as a new version (history stays append-only)."""
    check = expected_published is not _UNSET

    def work() -> PromptVersion:
        source = PromptVersion.objects.get(pk=target.pk)
        if source.status == PromptVersion.Status.PUBLISHED:
            raise PromptError(f"v{source.version} is already the published version")
        copy = PromptVersion.objects.create(
            store_id=source.store_id,
            version=_next_version(source.store_id),
            system_prompt=source.system_prompt,
            policies=source.policies,
            created_by=user if getattr(user, "is_authenticated", False) else None,
            note=f"rollback to v{source.version}",
            restored_from=source,
        )
        return _publish_locked(copy.pk, user, expected_published if check else None, check=check)  # type: ignore[arg-type]

    published = _in_store_transaction(target.store_id, work)
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
        draft = PromptVersion.objects.create(
            store=store,
            version=_next_version(store.pk),
            system_prompt=DEFAULT_SYSTEM_PROMPT.format(store=store.name),
            note="default",
        )
        return _publish_locked(draft.pk, None, None, check=False)

    return _in_store_transaction(store.pk, work)
