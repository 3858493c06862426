"""The owner's studio: pages and actions. Thin: versioning lives in ``services``, costs in ``budget``, the preview
in ``preview``. Every page and action is for owners of the store only: a logged-out visitor asking for a page goes
to the login page, everyone else gets a 403."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from functools import wraps
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from catalog.models import Store
from shop_assistant.chat.models import AnswerSettings, WidgetSettings
from shop_assistant.console.access import refuse
from shop_assistant.console.roles import Role, can_work_on, stores_for
from shop_assistant.prompts.models import PromptVersion, SampleQuestion
from shop_assistant.runtime.params import parse_id

from . import budget, scoring, services, tasks
from .forms import (
    AnswerSettingsForm,
    DraftForm,
    SampleQuestionsForm,
    StoreSettingsForm,
    WidgetSettingsForm,
    sample_questions,
)
from .prewarm import node_status
from .preview import preview_events
from .versioning import PromptError

T = TypeVar("T")


def forbidden(request: HttpRequest) -> HttpResponse:
    return refuse(request, "studio/forbidden.html")


def owner_store(request: HttpRequest, slug: str) -> Store:
    """The store named by ``slug`` if the user owns it; 403 otherwise (also for a store that does not exist, so
    the studio does not tell strangers which stores exist)."""
    store = Store.objects.filter(slug=slug).first()
    if store is None or not can_work_on(request.user, store, Role.OWNER):
        raise PermissionDenied
    return store


def owners_only(view):
    """Resolve ``slug`` to the owned store and pass it as ``store``; render the 403 page for anyone else."""

    @wraps(view)
    def wrapper(request: HttpRequest, slug: str, *args, **kwargs) -> HttpResponse:
        try:
            store = owner_store(request, slug)
        except PermissionDenied:
            return forbidden(request)
        return view(request, store, *args, **kwargs)

    return wrapper


def _versions(store: Store):
    return PromptVersion.objects.filter(store=store).select_related("created_by", "published_by", "restored_from")


# --- pages ------------------------------------------------------------------------------------------------


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    stores = list(stores_for(request.user, Role.OWNER).order_by("name"))
    if not stores:
        return forbidden(request)
    if len(stores) == 1:
        return redirect("studio:store", slug=stores[0].slug)
    return render(request, "studio/index.html", {"stores": stores})


@require_GET
@owners_only
def store_home(request: HttpRequest, store: Store) -> HttpResponse:
    versions = list(_versions(store))
    published = next((v for v in versions if v.status == PromptVersion.Status.PUBLISHED), None)
    return render(
        request,
        "studio/store.html",
        {
            "store": store,
            "published": published,
            "published_budget": budget.prompt_budget(published.full_text()) if published else None,
            "node_status": node_status(published) if published else None,
            "drafts": [v for v in versions if v.status == PromptVersion.Status.DRAFT],
            "history": [v for v in versions if v.status != PromptVersion.Status.DRAFT],
            "questions_form": SampleQuestionsForm(initial={"questions": "\n".join(sample_questions(store))}),
        },
    )


@require_POST
@owners_only
def new_draft(request: HttpRequest, store: Store) -> HttpResponse:
    raw_source = request.POST.get("from", "")
    source_id = parse_id(raw_source)
    if raw_source and source_id is None:
        return HttpResponseBadRequest("from must be the id of a version of this store's prompt")
    source = (
        get_object_or_404(PromptVersion, store=store, pk=source_id) if source_id else services.published_prompt(store)
    )
    if source is None:
        source = services.ensure_default_prompt(store)
    # Not an old version's policies: a policy's one copy is its knowledge document.
    draft = services.create_draft(store, source.system_prompt, user=request.user, note=f"from v{source.version}")
    return redirect("studio:draft", slug=store.slug, version_id=draft.pk)


@owners_only
def draft(request: HttpRequest, store: Store, version_id: int) -> HttpResponse:
    version = get_object_or_404(PromptVersion, store=store, pk=version_id)
    if version.status != PromptVersion.Status.DRAFT:
        return redirect("studio:version", slug=store.slug, version_id=version.pk)
    form = DraftForm(request.POST or None, instance=version)
    if request.method == "POST":
        if form.is_valid():
            try:
                services.update_draft(version, form.cleaned_data["system_prompt"], "", form.cleaned_data["note"])
            except PromptError as exc:
                messages.error(request, str(exc))
            else:
                if "publish" in request.POST:
                    return publish(request, store.slug, version.pk)
                messages.success(request, f"Draft v{version.version} saved.")
                return redirect("studio:draft", slug=store.slug, version_id=version.pk)
        version.refresh_from_db()
    published = services.published_prompt(store)
    return render(
        request,
        "studio/draft.html",
        {
            "store": store,
            "version": version,
            "form": form,
            "published": published,
            "budget": budget.prompt_budget(version.full_text()),
            "published_budget": budget.prompt_budget(published.full_text()) if published else None,
            "diff": budget.line_diff(published.full_text() if published else "", version.full_text()),
            "questions": sample_questions(store),
            "worse": scoring.worse_than_published(version, published),
            **services.understood(version),
        },
    )


@require_GET
@owners_only
def version_nodes(request: HttpRequest, store: Store, version_id: int) -> JsonResponse:
    """Which live nodes hold ``version`` pre-warmed: the prompt page follows it for a moment after a publish."""
    version = get_object_or_404(_versions(store), pk=version_id)
    status = node_status(version)
    if status is None:
        return JsonResponse({"error": "the node board cannot be read"}, status=503)
    return JsonResponse(status.as_json())


@require_GET
@owners_only
def version_detail(request: HttpRequest, store: Store, version_id: int) -> HttpResponse:
    version = get_object_or_404(_versions(store), pk=version_id)
    previous = _versions(store).filter(version__lt=version.version).exclude(status=PromptVersion.Status.DRAFT).first()
    return render(
        request,
        "studio/version.html",
        {
            "store": store,
            "version": version,
            "previous": previous,
            "published": (published := services.published_prompt(store)),
            "worse": scoring.worse_than_published(version, published),
            "budget": budget.prompt_budget(version.full_text()),
            "diff": budget.line_diff(previous.full_text() if previous else "", version.full_text()),
            **services.understood(version),
        },
    )


def expected_published(request: HttpRequest) -> int | None:
    """The version the owner saw published when the page was loaded (the forms send it): a publish or rollback
    is refused when another one has been published since (``versioning``)."""
    return parse_id(request.POST.get("expected_published", ""))


def attempt(request: HttpRequest, change: Callable[[], T], done: Callable[[T], str]) -> T | None:
    """Make a change to a versioned text; the owner reads the outcome as a message: ``done``'s words, or the
    refusal's own (None is returned then)."""
    try:
        result = change()
    except PromptError as exc:
        messages.error(request, str(exc))
        return None
    messages.success(request, done(result))
    return result


@require_POST
@owners_only
def publish(request: HttpRequest, store: Store, version_id: int) -> HttpResponse:
    version = get_object_or_404(PromptVersion, store=store, pk=version_id)
    if version.status == PromptVersion.Status.DRAFT and _held_back(request, store, version):
        return redirect("studio:draft", slug=store.slug, version_id=version.pk)
    published = attempt(
        request, lambda: services.publish(version, user=request.user, expected_published=expected_published(request)),
        lambda p: f"Published v{p.version}; shoppers get it from their next message.",
    )  # fmt: skip
    if published is None:
        return redirect("studio:draft", slug=store.slug, version_id=version.pk)
    _score_in_background(published)
    return redirect("studio:store", slug=store.slug)


def _score_in_background(published: PromptVersion) -> None:
    """A newly published version is scored after the publish, on the scoring thread: the request returns at once
    and the prompt page follows the score until it is in."""
    if settings.STUDIO_SCORE_ON_PUBLISH and scoring.needs_score(published):
        tasks.start_scoring(published.pk)


def _held_back(request: HttpRequest, store: Store, version: PromptVersion) -> bool:
    """True, with a message for the owner, while the draft's score (asked for on its page) is still coming, or
    when it scores worse than the published version and the owner has not confirmed. Nothing is scored here."""
    if not settings.STUDIO_SCORE_ON_PUBLISH:
        return False
    if version.score_running:
        messages.info(request, f"Scoring v{version.version} before publishing; publish again when its score is in.")
        return True
    published = services.published_prompt(store)
    if scoring.worse_than_published(version, published) and not request.POST.get("publish_worse"):
        messages.warning(
            request,
            f"v{version.version} scores {version.score:g} / 100, worse than the published "
            f"v{published.version} ({published.score:g}). Check the failed checks, or publish anyway.",
        )
        return True
    return False


@require_POST
@owners_only
def rollback(request: HttpRequest, store: Store, version_id: int) -> HttpResponse:
    target = get_object_or_404(PromptVersion, store=store, pk=version_id)
    published = attempt(
        request, lambda: services.rollback(target, user=request.user, expected_published=expected_published(request)),
        lambda p: f"Rolled back: v{p.version} publishes the text of v{target.version}.",
    )  # fmt: skip
    if published is not None:
        _score_in_background(published)
    return redirect("studio:store", slug=store.slug)


@require_POST
@owners_only
def discard(request: HttpRequest, store: Store, version_id: int) -> HttpResponse:
    version = get_object_or_404(PromptVersion, store=store, pk=version_id)
    attempt(request, lambda: services.discard_draft(version), lambda _: f"Draft v{version.version} discarded.")
    return redirect("studio:store", slug=store.slug)


@require_POST
@owners_only
def save_questions(request: HttpRequest, store: Store) -> HttpResponse:
    form = SampleQuestionsForm(request.POST)
    if form.is_valid():
        SampleQuestion.objects.filter(store=store).delete()
        SampleQuestion.objects.bulk_create(
            SampleQuestion(store=store, text=text, position=i) for i, text in enumerate(form.cleaned_data["questions"])
        )
        messages.success(request, "Sample questions saved.")
    else:
        messages.error(request, " ".join(form.errors.get("questions", ["Check the questions."])))
    return redirect(f"{reverse('studio:store', kwargs={'slug': store.slug})}#questions")


@require_POST
@owners_only
def count_tokens(request: HttpRequest, store: Store) -> JsonResponse:
    """Live token count while the owner types (the draft is not saved)."""
    text = PromptVersion(system_prompt=request.POST.get("system_prompt", ""))
    result = budget.prompt_budget(text.full_text())
    if result is None:
        return JsonResponse({"ready": False})
    return JsonResponse(
        {
            "ready": True,
            "tokens": result.tokens,
            "blocks": result.blocks,
            "full_blocks": result.full_blocks,
            "block_size": result.block_size,
            "max_model_len": result.max_model_len,
            "room": result.room,
            "too_long": result.too_long,
        }
    )


@owners_only
def store_settings(request: HttpRequest, store: Store) -> HttpResponse:
    data = request.POST or None
    # One page, three owners: the store's own fields, the chat's answer settings and its widget's.
    form = StoreSettingsForm(data, instance=store)
    answers = AnswerSettingsForm(data, instance=AnswerSettings.of(store))
    widget = WidgetSettingsForm(data, instance=WidgetSettings.of(store))
    if request.method == "POST" and all([each.is_valid() for each in (form, answers, widget)]):  # every error shown
        with transaction.atomic():
            for each in (form, answers, widget):
                each.save()
        messages.success(request, "Settings saved.")
        return redirect("studio:settings", slug=store.slug)
    script = request.build_absolute_uri(static("widget/widget.js"))
    snippet = f'<script src="{script}" data-store="{store.slug}" async></script>'
    context = {"store": store, "form": form, "answers": answers, "widget": widget, "snippet": snippet}
    return render(request, "studio/settings.html", context)


# --- preview stream ---------------------------------------------------------------------------------------


def _preview_target(request: HttpRequest, slug: str) -> tuple[Store, PromptVersion, str]:
    store = owner_store(request, slug)
    version_id = parse_id(request.POST.get("version"))
    version = PromptVersion.objects.filter(store=store, pk=version_id).first() if version_id else None
    question = request.POST.get("question", "").strip()
    if version is None or not question or len(question) > 2000:
        raise ValueError("name a version of this store and a question")
    return store, version, question


async def _sse(events: AsyncIterator[dict]) -> AsyncIterator[bytes]:
    async for event in events:
        yield f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()


@require_POST
async def preview(request: HttpRequest, slug: str) -> HttpResponse:
    """Server-sent events of one preview answer (POST: it runs the model, and carries the CSRF token)."""
    try:
        store, version, question = await sync_to_async(_preview_target)(request, slug)
    except PermissionDenied:
        return await sync_to_async(forbidden)(request)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    response = StreamingHttpResponse(_sse(preview_events(store, version, question)), content_type="text/event-stream")
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # nginx: pass events on as they come
    return response
