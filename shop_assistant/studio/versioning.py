"""One lifecycle for every versioned text of a store: the system prompt (``services``) and each policy or FAQ
document (``documents``). Drafts, publish (the version published before is archived in the same transaction),
rollback (an earlier version's text published again as a new version: history stays append-only), discarding a
draft, and the check that nobody published another version since the owner loaded the page.

Every change runs in one transaction that first locks the store's row, so the changes of one store, to its prompt
or to any of its documents, happen one after the other: two owners publishing at the same moment never both see
"nothing published" and never hit the one-published constraint. The lock is an UPDATE rather than SELECT ... FOR
UPDATE so that SQLite (no row locks) takes its database write lock at the start of the transaction, where it waits
for the other writer, instead of failing later when a read lock cannot be upgraded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import IntegrityError, OperationalError, models, transaction
from django.db.models import F, Max
from django.utils import timezone

from catalog.models import Store
from shop_assistant.runtime.retry import retrying

logger = logging.getLogger(__name__)

T = TypeVar("T")
# A serialization failure or a busy SQLite database: the whole transaction is retried this many times.
RETRIES = 5
# ``expected_published`` not given: publish without the check (the admin, the demo loader, a command).
UNSET: Any = object()


class PromptError(Exception):
    """A change the owner asked for cannot be made; the message is for the owner."""


class PublishConflict(PromptError):
    """Someone else published another version since the owner loaded the page."""

    def __init__(self, current: Any) -> None:
        who = f" by {current.created_by}" if current is not None and current.created_by else ""
        label = f"v{current.version}" if current is not None else "another version"
        super().__init__(f"{label} was published{who} in the meantime; review the difference and publish again.")
        self.current = current


def user_or_none(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None


# --- the store's lock ---------------------------------------------------------------------------------------


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
            logger.warning("a versioned text of store %s: change retried after %s", store_id, error)

    return log


def in_store_transaction(store_id: int, work: Callable[[], T]) -> T:
    """Run ``work`` in a transaction holding the store's lock; retried when the database asks for it."""

    def locked() -> T:
        with transaction.atomic():
            _lock_store(store_id)
            return work()

    try:
        return retrying(retry_on=_worth_retrying, attempts=RETRIES, before_retry=_log_retry(store_id))(locked)
    except IntegrityError:
        raise PromptError("the text changed while saving; try again") from None  # never a constraint error


# --- one kind of versioned text ---------------------------------------------------------------------------


def _nothing(*_: Any) -> None:
    return None


@dataclass(frozen=True)
class VersionedText:
    """The lifecycle of one kind of versioned text.

    ``model``: its version model (``version``, ``status``, ``note``, ``created_by``, ``published_at``,
    ``published_by``, ``restored_from``); ``owner``: the field its versions are numbered under (one published
    version per owner); ``texts``: the fields a draft edits and a rollback copies; ``store_id``: the store whose
    lock a version's changes take; ``conflict``: the error for a publish that lost the race; ``check``: refuses a
    text (``PromptError``) before it is saved or published; ``on_publish``: what else a publish writes, in its
    transaction."""

    model: type[models.Model]
    owner: str
    texts: tuple[str, ...]
    store_id: Callable[[Any], int]
    conflict: Callable[[Any], PromptError] = PublishConflict
    check: Callable[[Any], None] = _nothing
    on_publish: Callable[[Any], None] = _nothing
    related: tuple[str, ...] = field(default=())  # select_related when a version is read to be published

    def _of(self, owner_id: int) -> models.QuerySet:
        return self.model.objects.filter(**{f"{self.owner}_id": owner_id})

    def next_version(self, owner_id: int) -> int:
        latest = self._of(owner_id).aggregate(v=Max("version"))["v"]
        return (latest or 0) + 1

    def published(self, owner_id: int) -> Any:
        return self._of(owner_id).filter(status=self.model.Status.PUBLISHED).first()

    def create(self, owner_id: int, user: Any = None, **fields: Any) -> Any:
        """A new draft with the owner's next version number (call it under the store's lock)."""
        return self.model.objects.create(
            **{f"{self.owner}_id": owner_id}, version=self.next_version(owner_id), created_by=user_or_none(user),
            **fields,
        )  # fmt: skip

    def update_draft(self, draft: Any, note: str = "", **texts: Any) -> Any:
        """Save new text into a draft; published and archived versions never change."""

        def work() -> Any:
            current = self.model.objects.get(pk=draft.pk)
            if current.status != self.model.Status.DRAFT:
                raise PromptError(f"v{current.version} is {current.status}; only drafts can be edited")
            for name, value in texts.items():
                setattr(current, name, value)
            current.note = note[:200]
            current.save(update_fields=[*texts, "note"])
            return current

        return in_store_transaction(self.store_id(draft), work)

    def discard_draft(self, draft: Any) -> None:
        def work() -> None:
            deleted, _ = self.model.objects.filter(pk=draft.pk, status=self.model.Status.DRAFT).delete()
            if not deleted:
                raise PromptError("only drafts can be discarded")

        in_store_transaction(self.store_id(draft), work)

    def publish_locked(self, version_id: int, user: Any, expected: int | None = UNSET) -> Any:
        """Publish a draft under the store's lock (already held); ``expected`` as in ``publish``."""
        version = self.model.objects.select_related(*self.related).get(pk=version_id)
        current = self.published(getattr(version, f"{self.owner}_id"))
        if current is not None and current.pk == version.pk:
            return version  # already published (a double click, or the same publish from two tabs)
        if version.status != self.model.Status.DRAFT:
            raise PromptError(f"v{version.version} is {version.status}; only drafts can be published (use rollback)")
        if expected is not UNSET and (current.pk if current is not None else None) != expected:
            raise self.conflict(current)
        self.check(version)
        if current is not None:
            self.model.objects.filter(pk=current.pk).update(status=self.model.Status.ARCHIVED)
        version.status, version.published_at = self.model.Status.PUBLISHED, timezone.now()
        version.published_by = user_or_none(user)
        version.save(update_fields=["status", "published_at", "published_by"])
        self.on_publish(version)
        return version

    def publish(self, version: Any, user: Any = None, expected_published: int | None = UNSET) -> Any:
        """Publish a draft; the version published before it is archived in the same transaction.

        ``expected_published``: the id of the version the owner saw published (None: nothing was). When given and
        another version has been published since, the kind's ``conflict`` is raised instead of overwriting it."""
        return in_store_transaction(
            self.store_id(version), lambda: self.publish_locked(version.pk, user, expected_published)
        )

    def rollback(self, target: Any, user: Any = None, expected_published: int | None = UNSET) -> Any:
        """Publish the text of an earlier version again, as a new version (history stays append-only)."""

        def work() -> Any:
            source = self.model.objects.get(pk=target.pk)
            if source.status == self.model.Status.PUBLISHED:
                raise PromptError(f"v{source.version} is already the published version")
            copy = self.create(
                getattr(source, f"{self.owner}_id"), user, note=f"rollback to v{source.version}", restored_from=source,
                **{name: getattr(source, name) for name in self.texts},
            )  # fmt: skip
            return self.publish_locked(copy.pk, user, expected_published)

        return in_store_transaction(self.store_id(target), work)
