"""The playground (any question, two versions side by side, streamed by the preview's path), the score of a
version (started here, run on the studio's scoring thread, ``tasks``), comparing two versions and the
confirmation page before a rollback. Owners of the store only, like every studio page."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from catalog.models import Store
from shop_assistant.prompts.models import PromptVersion
from shop_assistant.runtime.params import parse_id

from . import budget, scoring, services, tasks
from .forms import sample_questions
from .views import _versions, owners_only


@require_GET
@owners_only
def playground(request: HttpRequest, store: Store) -> HttpResponse:
    versions = list(_versions(store))
    published = next((v for v in versions if v.status == PromptVersion.Status.PUBLISHED), None)
    drafts = [v for v in versions if v.status == PromptVersion.Status.DRAFT]
    chosen = parse_id(request.GET.get("version"))
    left = next((v for v in versions if v.pk == chosen), None) or (drafts[0] if drafts else published)
    return render(
        request,
        "studio/playground.html",
        {"store": store, "versions": versions, "left": left, "published": published,
         "questions": sample_questions(store)},
    )  # fmt: skip


def _back(request: HttpRequest, store: Store, version: PromptVersion) -> str:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        return target
    if version.status == PromptVersion.Status.DRAFT:
        return reverse("studio:draft", kwargs={"slug": store.slug, "version_id": version.pk})
    return reverse("studio:version", kwargs={"slug": store.slug, "version_id": version.pk})


@require_POST
@owners_only
def score(request: HttpRequest, store: Store, version_id: int) -> HttpResponse:
    """Score a version now (the published one too, if it has no score yet)."""
    version = get_object_or_404(PromptVersion, store=store, pk=version_id)
    if not version.score_running:
        tasks.start_scoring(version.pk, force=True)  # in the background: the page follows it (score.json)
    messages.info(request, f"Scoring v{version.version}: its score shows here when it is in.")
    return redirect(_back(request, store, version))


@require_GET
@owners_only
def score_status(request: HttpRequest, store: Store, version_id: int) -> JsonResponse:
    """The scoring's progress, polled by the draft page while a worker scores."""
    version = get_object_or_404(PromptVersion, store=store, pk=version_id)
    return JsonResponse(
        {"state": version.score_state, "done": version.score_done, "total": version.score_total,
         "score": version.score_current}
    )  # fmt: skip


def _shown(row: dict | None) -> tuple[str, list[str]]:
    """An answer and the checks it failed; an answer that never came shows why (it failed every check)."""
    if row is None:
        return "", []
    if row.get("error"):
        return row["error"], [scoring.FAILED_CHECK_WORDS["answered"]]
    return row["answer"], scoring.failed_checks_in_words(row["checks"])


def _checks_table(a: PromptVersion, b: PromptVersion) -> list[dict]:
    """Per question, each version's answer and the checks it failed (in a's order, then b's own questions)."""
    ours = {row["question"]: row for row in a.score_report.get("questions", [])}
    theirs = {row["question"]: row for row in b.score_report.get("questions", [])}
    rows = []
    for question in [*ours, *(q for q in theirs if q not in ours)]:
        (a_answer, a_failed), (b_answer, b_failed) = _shown(ours.get(question)), _shown(theirs.get(question))
        rows.append({"question": question, "a_answer": a_answer, "a_failed": a_failed,
                     "b_answer": b_answer, "b_failed": b_failed})  # fmt: skip
    return rows


@require_GET
@owners_only
def compare(request: HttpRequest, store: Store) -> HttpResponse:
    versions = list(_versions(store))
    by_id = {v.pk: v for v in versions}
    raw_a, raw_b = request.GET.get("a", ""), request.GET.get("b", "")
    a, b = by_id.get(parse_id(raw_a) or 0), by_id.get(parse_id(raw_b) or 0)
    if (raw_a and a is None) or (raw_b and b is None):
        return HttpResponseBadRequest("a and b must be versions of this store's prompt")
    published = next((v for v in versions if v.status == PromptVersion.Status.PUBLISHED), None)
    a = a or published
    b = b or next((v for v in versions if v is not a), None)
    context = {"store": store, "versions": versions, "a": a, "b": b}
    if a is not None and b is not None:
        context["diff"] = budget.line_diff(a.full_text(), b.full_text())
        context["checks"] = _checks_table(a, b) if a.score_current is not None and b.score_current is not None else []
    return render(request, "studio/compare.html", context)


@require_GET
@owners_only
def confirm_rollback(request: HttpRequest, store: Store, version_id: int) -> HttpResponse:
    """What a rollback would change, before the owner confirms it (the POST goes to ``studio:rollback``)."""
    target = get_object_or_404(_versions(store), pk=version_id)
    published = services.published_prompt(store)
    if published is not None and published.pk == target.pk:
        messages.error(request, f"v{target.version} is already the published version.")
        return redirect("studio:store", slug=store.slug)
    return render(
        request,
        "studio/rollback.html",
        {"store": store, "target": target, "published": published,
         "diff": budget.line_diff(published.full_text() if published else "", target.full_text())},
    )  # fmt: skip
