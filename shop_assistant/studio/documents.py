"""The store's policy and FAQ documents as versions, published the way the prompt is (``services``): drafts,
publish (the version before is archived), rollback as a new version, diffs. The published version's text is the
StoreDocument's body, which is what the assistant quotes; publishing re-embeds the store's passages.

Every change runs in the store's transaction of ``services`` (the store's row locked first), so a prompt and a
document published at the same moment are still one after the other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from catalog import grounding, passages
from catalog.models import DocumentVersion, Store, StoreDocument
from catalog.tasks import embed_store_documents

from .budget import DiffLine, line_diff
from .services import PromptError, PublishConflict, _in_store_transaction

MAX_DOCUMENT_CHARS = 50_000
_UNSET = object()


class DocumentConflict(PublishConflict):
    def __init__(self, current: DocumentVersion | None) -> None:
        PromptError.__init__(
            self,
            f"v{current.version if current else '?'} of this document was published in the meantime; "
            "review the difference and publish again.",
        )
        self.current = current


def _user(user):
    return user if getattr(user, "is_authenticated", False) else None


def _next_version(document_id: int) -> int:
    latest = DocumentVersion.objects.filter(document_id=document_id).aggregate(v=Max("version"))["v"]
    return (latest or 0) + 1


def published_version(document: StoreDocument) -> DocumentVersion | None:
    return DocumentVersion.objects.filter(document=document, status=DocumentVersion.Status.PUBLISHED).first()


def in_step(document: StoreDocument, published: DocumentVersion | None) -> bool:
    """Whether the document's text (what shoppers are quoted) is its published version's: False only when an
    import, the admin or a queryset update changed it and the change is not recorded yet."""
    if published is None:
        return not document.body.strip()
    return (published.title, published.body) == (document.title, document.body)


OUTSIDE_NOTE = "changed outside the studio (import or admin)"
FIRST_OUTSIDE_NOTE = "written outside the studio (import or admin)"


def record_outside_change(document: StoreDocument) -> DocumentVersion | None:
    """Record the document's text as a new published version when it changed outside the studio (an import, the
    admin), and return the published version. Called when such a change is saved (``receivers``, once the
    change is committed) and before the studio writes a document, never from a page that only reads: the
    studio's own publish writes the text and its version together, so then there is nothing to record."""

    def unrecorded() -> tuple[StoreDocument | None, DocumentVersion | None, bool]:
        # The row as it is now, not ``document`` (which may predate the change).
        current = StoreDocument.objects.filter(pk=document.pk).first()
        if current is None:  # deleted since
            return None, None, False
        published = published_version(current)
        return current, published, not in_step(current, published)

    current, published, changed = unrecorded()
    if not changed:
        return published

    def work() -> DocumentVersion | None:
        current, published, changed = unrecorded()  # again, under the store's lock
        if current is None or not changed:
            return published
        if published is not None:
            DocumentVersion.objects.filter(pk=published.pk).update(status=DocumentVersion.Status.ARCHIVED)
        return DocumentVersion.objects.create(
            document=current, version=_next_version(current.pk), title=current.title, body=current.body,
            status=DocumentVersion.Status.PUBLISHED, published_at=timezone.now(),
            note=OUTSIDE_NOTE if published is not None else FIRST_OUTSIDE_NOTE,
        )

    return _in_store_transaction(document.store_id, work)


def _check(document: StoreDocument, title: str, body: str) -> None:
    if not title.strip():
        raise PromptError("the title is empty")
    if len(body) > MAX_DOCUMENT_CHARS:
        raise PromptError(f"a document is limited to {MAX_DOCUMENT_CHARS} characters")
    taken = StoreDocument.objects.filter(store_id=document.store_id, kind=document.kind, title=title.strip())
    if taken.exclude(pk=document.pk).exists():
        raise PromptError(f"another {document.get_kind_display()} document is called {title.strip()!r}")


def create_document(store: Store, kind: str, title: str, user=None) -> DocumentVersion:
    """A new, empty document (not quoted until a version is published) and its first draft."""
    if kind not in StoreDocument.Kind.values:
        raise PromptError("choose the kind of document")
    document = StoreDocument(store=store, kind=kind, title=title.strip()[:200], body="")
    _check(document, document.title, "")

    def work() -> DocumentVersion:
        document.save()
        return DocumentVersion.objects.create(
            document=document, version=1, title=document.title, body="", created_by=_user(user), note="new document"
        )

    return _in_store_transaction(store.pk, work)


def create_draft(document: StoreDocument, source: DocumentVersion | None = None, user=None) -> DocumentVersion:
    """A draft from ``source`` (default: the published version, or the document's text). A text changed behind
    the studio's back (a queryset update, which sends no signal) is recorded first, so the draft starts from what
    shoppers are quoted now."""
    recorded = record_outside_change(document)
    source = source or recorded
    title, body = (source.title, source.body) if source else (document.title, document.body)

    def work() -> DocumentVersion:
        return DocumentVersion.objects.create(
            document=document, version=_next_version(document.pk), title=title, body=body,
            created_by=_user(user), note=f"from v{source.version}" if source else "",
        )

    return _in_store_transaction(document.store_id, work)


def update_draft(draft: DocumentVersion, title: str, body: str, note: str = "") -> DocumentVersion:
    _check(draft.document, title, body)

    def work() -> DocumentVersion:
        current = DocumentVersion.objects.get(pk=draft.pk)
        if current.status != DocumentVersion.Status.DRAFT:
            raise PromptError(f"v{current.version} is {current.status}; only drafts can be edited")
        current.title, current.body, current.note = title.strip()[:200], body, note[:200]
        current.save(update_fields=["title", "body", "note"])
        return current

    return _in_store_transaction(draft.document.store_id, work)


def discard_draft(draft: DocumentVersion) -> None:
    def work() -> None:
        deleted, _ = DocumentVersion.objects.filter(pk=draft.pk, status=DocumentVersion.Status.DRAFT).delete()
        if not deleted:
            raise PromptError("only drafts can be discarded")

    _in_store_transaction(draft.document.store_id, work)


def _publish_locked(version_id: int, user, expected: int | None, *, check: bool) -> DocumentVersion:
    version = DocumentVersion.objects.select_related("document").get(pk=version_id)
    current = published_version(version.document)
    if current is not None and current.pk == version.pk:
        return version
    if version.status != DocumentVersion.Status.DRAFT:
        raise PromptError(f"v{version.version} is {version.status}; only drafts can be published (use rollback)")
    if check and (current.pk if current is not None else None) != expected:
        raise DocumentConflict(current)
    _check(version.document, version.title, version.body)
    if current is not None:
        DocumentVersion.objects.filter(pk=current.pk).update(status=DocumentVersion.Status.ARCHIVED)
    version.status, version.published_at = DocumentVersion.Status.PUBLISHED, timezone.now()
    version.published_by = _user(user)
    version.save(update_fields=["status", "published_at", "published_by"])
    document = version.document
    document.title, document.body = version.title, version.body
    document.save(update_fields=["title", "body", "updated_at"])  # updated_at: the passage index's stamp
    # The next shopper's quote comes from the new text: embed its passages now, once the commit is visible.
    store_id = document.store_id
    transaction.on_commit(lambda: embed_store_documents.delay(store_id))
    return version


def publish(version: DocumentVersion, user=None, expected_published: int | None | object = _UNSET) -> DocumentVersion:
    """Publish a draft; ``expected_published`` as in ``services.publish`` (a conflict is refused)."""
    check = expected_published is not _UNSET
    expected = expected_published if check else None
    # An unrecorded outside change is kept in the history before it is replaced, in its own transaction: with
    # ``expected_published`` the publish is then refused as a conflict, and the record stays.
    record_outside_change(version.document)
    return _in_store_transaction(
        version.document.store_id,
        lambda: _publish_locked(version.pk, user, expected, check=check),  # type: ignore[arg-type]
    )


def rollback(target: DocumentVersion, user=None, expected_published: int | None | object = _UNSET) -> DocumentVersion:
    """Publish an earlier version's text again, as a new version."""
    check = expected_published is not _UNSET
    record_outside_change(target.document)  # as in ``publish``

    def work() -> DocumentVersion:
        source = DocumentVersion.objects.get(pk=target.pk)
        if source.status == DocumentVersion.Status.PUBLISHED:
            raise PromptError(f"v{source.version} is already the published version")
        copy = DocumentVersion.objects.create(
            document_id=source.document_id, version=_next_version(source.document_id), title=source.title,
            body=source.body, created_by=_user(user), note=f"rollback to v{source.version}", restored_from=source,
        )
        expected = expected_published if check else None
        return _publish_locked(copy.pk, user, expected, check=check)  # type: ignore[arg-type]

    return _in_store_transaction(target.document.store_id, work)


def diff(old: DocumentVersion | None, new: DocumentVersion) -> list[DiffLine]:
    def text(version: DocumentVersion | None) -> str:
        return f"# {version.title}\n{version.body}" if version is not None else ""

    return line_diff(text(old), text(new))


# --- what a shopper gets from each sentence ----------------------------------------------------------------


@dataclass
class SentenceCheck:
    sentence: str
    question: str
    suggested: bool  # the question is the studio's suggestion, not one the owner wrote
    quotes: list[dict]  # what the shopper asking ``question`` is quoted, {"title", "text"}
    retrieved: bool  # the quote holds this sentence


_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")


def suggested_question(passage: passages.Passage) -> str:
    """An FAQ line's own question; for a policy sentence, a question made of its distinctive words."""
    if passage.question:
        return passage.question
    wanted = passages.content_words(passage.text)
    words, seen = [], set()
    for word in _WORD.findall(passage.text):
        key = passages.content_words(word)
        if key and key <= wanted and not key <= seen:
            words.append(word.lower())
            seen |= key
        if len(words) == 5:
            break
    return f"What about {' '.join(words)}?" if words else ""


def sentence_checks(document: StoreDocument) -> list[SentenceCheck]:
    """For each passage of the published text: the question that should retrieve it (the owner's, else the
    suggestion) and the quote the chat's own passage search gives a shopper asking it: the documents are the only
    source of a quote, so this is what the chat quotes, with nothing else to disagree."""
    checks = []
    for passage in passages.passages_of(document):
        owned = (document.questions or {}).get(passage.text, "").strip()
        question = owned or suggested_question(passage)
        answers = passages.answering(document.store, question) if question else []
        retrieved = any(m.passage.document_id == document.pk and m.passage.text == passage.text for m in answers)
        checks.append(SentenceCheck(passage.text, question, not owned, grounding.quotes_of(answers), retrieved))
    return checks


def save_questions(document: StoreDocument, questions: dict[str, str]) -> None:
    """The owner's questions for the published sentences (blank: back to the suggestion)."""
    sentences = {p.text for p in passages.passages_of(document)}
    document.questions = {s: q.strip()[:500] for s, q in questions.items() if s in sentences and q.strip()}
    # Not through save(): a question is not a change of the document's text, so the passage index stays.
    StoreDocument.objects.filter(pk=document.pk).update(questions=document.questions)
