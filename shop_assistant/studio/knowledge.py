"""The studio's knowledge pages: the store's policy and FAQ documents, edited as drafts and published like the
prompt (``documents``), with what a shopper is quoted for each published sentence. Owners only."""

from __future__ import annotations

from functools import wraps

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from catalog.models import DocumentVersion, Store, StoreDocument
from shop_assistant.runtime.params import parse_id

from . import documents
from .versioning import PromptError
from .views import attempt, expected_published, owners_only


def _document(store: Store, document_id: int) -> StoreDocument:
    return get_object_or_404(StoreDocument.objects.select_related("store"), store=store, pk=document_id)


def _version(document: StoreDocument, version_id: int) -> DocumentVersion:
    return get_object_or_404(DocumentVersion.objects.select_related("document__store"), document=document,
                             pk=version_id)


def of_a_version(view):
    """Resolve ``document_id`` and ``version_id`` to the store's document and one of its versions (404 for
    anything else) and pass them as ``doc`` and ``version``; under ``owners_only``."""

    @wraps(view)
    def wrapper(request: HttpRequest, store: Store, document_id: int, version_id: int) -> HttpResponse:
        doc = _document(store, document_id)
        return view(request, store, doc, _version(doc, version_id))

    return wrapper


def _document_url(store: Store, document: StoreDocument) -> str:
    return reverse("studio:document", kwargs={"slug": store.slug, "document_id": document.pk})


def _beside_published(
    request: HttpRequest, template: str, store: Store, doc: StoreDocument, name: str, version: DocumentVersion
) -> HttpResponse:
    """A page about ``version`` (``name`` in ``template``) beside the document's published version, with what
    would change for shoppers: a draft before it is published, an earlier version before it is rolled back to."""
    published = documents.published_version(doc)
    context = {"store": store, "document": doc, name: version, "published": published}
    return render(request, template, {**context, "diff": documents.diff(published, version)})


@require_GET
@owners_only
def knowledge(request: HttpRequest, store: Store) -> HttpResponse:
    # Reads only: a text changed outside the studio was recorded when it was saved (``receivers``); one changed
    # behind its back (a queryset update) is shown as not recorded, and the studio's next write records it.
    rows = []
    for document in StoreDocument.objects.filter(store=store).order_by("kind", "title"):
        published = documents.published_version(document)
        drafts = DocumentVersion.objects.filter(document=document, status=DocumentVersion.Status.DRAFT).count()
        rows.append((document, published, drafts, not documents.in_step(document, published)))
    return render(request, "studio/knowledge.html", {"store": store, "rows": rows, "kinds": StoreDocument.Kind.choices})


@require_POST
@owners_only
def new_document(request: HttpRequest, store: Store) -> HttpResponse:
    try:
        draft = documents.create_document(
            store, request.POST.get("kind", ""), request.POST.get("title", ""), user=request.user
        )
    except PromptError as exc:
        messages.error(request, str(exc))
        return redirect("studio:knowledge", slug=store.slug)
    return redirect("studio:document_draft", slug=store.slug, document_id=draft.document_id, version_id=draft.pk)


@require_GET
@owners_only
def document(request: HttpRequest, store: Store, document_id: int) -> HttpResponse:
    doc = _document(store, document_id)
    published = documents.published_version(doc)  # reads only, as the list
    versions = list(DocumentVersion.objects.filter(document=doc).select_related("created_by", "published_by"))
    return render(
        request,
        "studio/document.html",
        {
            "store": store,
            "document": doc,
            "published": published,
            "unrecorded": not documents.in_step(doc, published),
            "drafts": [v for v in versions if v.status == DocumentVersion.Status.DRAFT],
            "history": [v for v in versions if v.status != DocumentVersion.Status.DRAFT],
            # The sentences of the text shoppers are quoted now: the document's, recorded or not.
            "checks": documents.sentence_checks(doc) if doc.body.strip() else [],
        },
    )


@require_POST
@owners_only
def document_questions(request: HttpRequest, store: Store, document_id: int) -> HttpResponse:
    doc = _document(store, document_id)
    # The form sends each sentence next to its question: s-N and q-N.
    pairs = {}
    for key, sentence in request.POST.items():
        if key.startswith("s-"):
            pairs[sentence] = request.POST.get("q-" + key[2:], "")
    documents.save_questions(doc, pairs)
    messages.success(request, "Questions saved.")
    return redirect(_document_url(store, doc) + "#sentences")


@require_POST
@owners_only
def document_new_draft(request: HttpRequest, store: Store, document_id: int) -> HttpResponse:
    doc = _document(store, document_id)
    source_id = parse_id(request.POST.get("from", ""))
    source = _version(doc, source_id) if source_id else None
    draft = documents.create_draft(doc, source, user=request.user)
    return redirect("studio:document_draft", slug=store.slug, document_id=doc.pk, version_id=draft.pk)


@owners_only
@of_a_version
def document_draft(request: HttpRequest, store: Store, doc: StoreDocument, version: DocumentVersion) -> HttpResponse:
    if version.status != DocumentVersion.Status.DRAFT:
        return redirect(_document_url(store, doc))
    if request.method == "POST":
        title, body, note = (request.POST.get(name, "") for name in ("title", "body", "note"))
        try:
            version = documents.update_draft(version, title, body, note)
        except PromptError as exc:
            messages.error(request, str(exc))
            version.title, version.body, version.note = title, body, note
        else:
            if "publish" in request.POST:
                return document_publish(request, store.slug, doc.pk, version.pk)
            messages.success(request, f"Draft v{version.version} saved.")
            return redirect("studio:document_draft", slug=store.slug, document_id=doc.pk, version_id=version.pk)
    return _beside_published(request, "studio/document_draft.html", store, doc, "version", version)


@require_POST
@owners_only
@of_a_version
def document_publish(request: HttpRequest, store: Store, doc: StoreDocument, version: DocumentVersion) -> HttpResponse:
    published = attempt(
        request, lambda: documents.publish(version, user=request.user, expected_published=expected_published(request)),
        lambda p: f"Published v{p.version} of {p.title}; shoppers are quoted it now.",
    )  # fmt: skip
    if published is None:
        return redirect("studio:document_draft", slug=store.slug, document_id=doc.pk, version_id=version.pk)
    return redirect(_document_url(store, doc))


@require_GET
@owners_only
@of_a_version
def document_confirm_rollback(
    request: HttpRequest, store: Store, doc: StoreDocument, target: DocumentVersion
) -> HttpResponse:
    """What a rollback would change for shoppers, before the owner confirms it: the prompt's confirm step
    (``studio/rollback.html``); the POST goes to ``studio:document_rollback``."""
    if target.status != DocumentVersion.Status.ARCHIVED:
        messages.error(
            request, f"v{target.version} is not an earlier published version: there is nothing to roll back to."
        )
        return redirect(_document_url(store, doc))
    return _beside_published(request, "studio/rollback.html", store, doc, "target", target)


@require_POST
@owners_only
@of_a_version
def document_rollback(request: HttpRequest, store: Store, doc: StoreDocument, target: DocumentVersion) -> HttpResponse:
    attempt(
        request, lambda: documents.rollback(target, user=request.user, expected_published=expected_published(request)),
        lambda p: f"Rolled back: v{p.version} publishes the text of v{target.version}.",
    )  # fmt: skip
    return redirect(_document_url(store, doc))


@require_POST
@owners_only
@of_a_version
def document_discard(request: HttpRequest, store: Store, doc: StoreDocument, version: DocumentVersion) -> HttpResponse:
    attempt(request, lambda: documents.discard_draft(version), lambda _: f"Draft v{version.version} discarded.")
    return redirect(_document_url(store, doc))


@require_GET
@owners_only
@of_a_version
def document_version(request: HttpRequest, store: Store, doc: StoreDocument, version: DocumentVersion) -> HttpResponse:
    previous = (
        DocumentVersion.objects.filter(document=doc, version__lt=version.version)
        .exclude(status=DocumentVersion.Status.DRAFT).first()
    )
    return render(
        request,
        "studio/document_version.html",
        {"store": store, "document": doc, "version": version, "previous": previous,
         "diff": documents.diff(previous, version)},
    )
