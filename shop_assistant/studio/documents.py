"""The store's policy and FAQ documents as versions, with the lifecycle every versioned text of a store shares
(``versioning``: drafts, publish, rollback as a new version, the expected-published check). The published
version's text is the StoreDocument's body, which is what the assistant quotes; publishing writes it there and
re-embeds the store's passages. A text changed outside the studio (an import, the admin) is recorded as a version
before the studio changes the document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from catalog import grounding, passages
from catalog.models import DocumentVersion, Store, StoreDocument
from catalog.tasks import embed_store_documents

from .budget import DiffLine, line_diff
from .versioning import UNSET, PromptError, PublishConflict, VersionedText, in_store_transaction

MAX_DOCUMENT_CHARS = 50_000


class DocumentConflict(PublishConflict):
    def __init__(self, current: DocumentVersion | None) -> None:
        PromptError.__init__(
            self,
            f"v{current.version if current else '?'} of this document was published in the meantime; "
            "review the difference and publish again.",
        )
        self.current = current


def _check(document: StoreDocument, title: str, body: str) -> None:
    if not title.strip():
        raise PromptError("the title is empty")
    if len(body) > MAX_DOCUMENT_CHARS:
        raise PromptError(f"a document is limited to {MAX_DOCUMENT_CHARS} characters")
    taken = StoreDocument.objects.filter(store_id=document.store_id, kind=document.kind, title=title.strip())
    if taken.exclude(pk=document.pk).exists():
        raise PromptError(f"another {document.get_kind_display()} document is called {title.strip()!r}")


def _write_the_document(version: DocumentVersion) -> None:
    """A published version's text becomes what shoppers are quoted, in the publish's transaction."""
    document = version.document
    document.title, document.body = version.title, version.body
    document.save(update_fields=["title", "body", "updated_at"])  # updated_at: the passage index's stamp
    # The next shopper's quote comes from the new text: embed its passages now, once the commit is visible.
    store_id = document.store_id
    transaction.on_commit(lambda: embed_store_documents.delay(store_id))


DOCUMENTS = VersionedText(
    model=DocumentVersion, owner="document", texts=("title", "body"), store_id=lambda v: v.document.store_id,
    conflict=DocumentConflict, check=lambda v: _check(v.document, v.title, v.body), on_publish=_write_the_document,
    related=("document",),
)  # fmt: skip


def published_version(document: StoreDocument) -> DocumentVersion | None:
    return DOCUMENTS.published(document.pk)


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
        return DOCUMENTS.create(
            current.pk, title=current.title, body=current.body, status=DocumentVersion.Status.PUBLISHED,
            published_at=timezone.now(), note=OUTSIDE_NOTE if published is not None else FIRST_OUTSIDE_NOTE,
        )  # fmt: skip

    return in_store_transaction(document.store_id, work)


def create_document(store: Store, kind: str, title: str, user=None) -> DocumentVersion:
    """A new, empty document (not quoted until a version is published) and its first draft."""
    if kind not in StoreDocument.Kind.values:
        raise PromptError("choose the kind of document")
    document = StoreDocument(store=store, kind=kind, title=title.strip()[:200], body="")
    _check(document, document.title, "")

    def work() -> DocumentVersion:
        document.save()
        return DOCUMENTS.create(document.pk, user, title=document.title, body="", note="new document")

    return in_store_transaction(store.pk, work)


def create_draft(document: StoreDocument, source: DocumentVersion | None = None, user=None) -> DocumentVersion:
    """A draft from ``source`` (default: the published version, or the document's text). A text changed behind
    the studio's back (a queryset update, which sends no signal) is recorded first, so the draft starts from what
    shoppers are quoted now."""
    recorded = record_outside_change(document)
    source = source or recorded
    title, body = (source.title, source.body) if source else (document.title, document.body)
    note = f"from v{source.version}" if source else ""
    return in_store_transaction(
        document.store_id, lambda: DOCUMENTS.create(document.pk, user, title=title, body=body, note=note)
    )


def update_draft(draft: DocumentVersion, title: str, body: str, note: str = "") -> DocumentVersion:
    _check(draft.document, title, body)
    return DOCUMENTS.update_draft(draft, note, title=title.strip()[:200], body=body)


def discard_draft(draft: DocumentVersion) -> None:
    DOCUMENTS.discard_draft(draft)


def publish(version: DocumentVersion, user=None, expected_published: int | None = UNSET) -> DocumentVersion:
    """Publish a draft; ``expected_published`` as in ``versioning.VersionedText.publish`` (a conflict is refused).
    An unrecorded outside change is kept in the history before it is replaced, in its own transaction: with
    ``expected_published`` the publish is then refused as a conflict, and the record stays."""
    record_outside_change(version.document)
    return DOCUMENTS.publish(version, user, expected_published)


def rollback(target: DocumentVersion, user=None, expected_published: int | None = UNSET) -> DocumentVersion:
    """Publish an earlier version's text again, as a new version (an outside change recorded first, as in
    ``publish``)."""
    record_outside_change(target.document)
    return DOCUMENTS.rollback(target, user, expected_published)


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
