"""The studio's catalog pages: upload a file, save sources with a schedule, follow runs, browse products.

Thin: imports are ``catalog.sync`` (which queues ``catalog.ingest``'s task), products come from the catalog's
rows, and a product's preview is the chat's own retrieval. Owners of the store only, as every studio page.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Prefetch, Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from catalog import sync
from catalog.models import ImportRun, ImportSource, Product, Store, Variant
from shop_assistant.chat.answers.retrieval import retrieve

from .catalog_forms import ProductSearchForm, SourceForm, UploadForm
from .form_views import form_view, page_view
from .views import owners_only

PRODUCTS_PER_PAGE = 50
RUNS_SHOWN = 15


def _catalog_url(store: Store, anchor: str = "") -> str:
    return reverse("studio:catalog", kwargs={"slug": store.slug}) + (f"#{anchor}" if anchor else "")


def search_products(store: Store, query: str):
    """The store's products whose title, type, tags or a variant's SKU hold ``query``, with their variants."""
    products = Product.objects.filter(store=store)
    query = query.strip()
    if query:
        products = products.filter(
            Q(title__icontains=query) | Q(product_type__icontains=query) | Q(tags__icontains=query)
            | Q(variants__sku__icontains=query)
        ).distinct()
    return products.order_by("title", "pk").prefetch_related(
        Prefetch("variants", queryset=Variant.objects.order_by("position", "pk"))
    )


def run_banner(run: ImportRun) -> tuple[str, str]:
    """(level, text) of the banner over the page after an import is started: what the run is doing now, not
    what it did when the button was pressed (with Celery eager a run is over before the page loads)."""
    name = run.import_source.name if run.import_source_id else run.source
    what = f"Import #{run.pk} of {name}"
    if run.status == ImportRun.Status.FAILED:
        return "error", f"{what} failed" + (f": {run.message}" if run.message else ".")
    if run.embedding:
        return "info", f"{what}: {run.label}."
    if run.finished:
        c = run.counts
        return "success", (f"{what} finished: {c['added']} added, {c['updated']} updated, {c['archived']} archived, "
                           f"{c['rejected']} rejected.")
    return "info", f"{what} is running: {run.label}."


def run_state(run: ImportRun, store: Store) -> dict:
    """What the progress endpoint answers and the page shows for one run."""
    done, total = run.progress
    level, banner = run_banner(run)
    return {
        "id": run.pk,
        "status": run.status,
        "phase": run.phase,
        "done": done,
        "total": total,
        "percent": run.percent,
        "label": run.label,
        # Followed until its products are embedded too: only then does the assistant find them by meaning.
        "finished": run.finished and not run.embedding,
        "counts": run.counts if run.status == ImportRun.Status.SUCCEEDED else None,
        "message": run.message,
        "banner": banner,
        "banner_level": level,
        "errors_url": reverse("studio:catalog_run_errors", kwargs={"slug": store.slug, "run_id": run.pk})
        if run.errors else None,
    }


def _page(request: HttpRequest, store: Store, upload_form=None, source_form=None, status: int = 200) -> HttpResponse:
    search = ProductSearchForm(request.GET or None)
    query = search.cleaned_data["q"] if search.is_valid() else ""
    products = Paginator(search_products(store, query), PRODUCTS_PER_PAGE).get_page(request.GET.get("page"))
    runs = list(ImportRun.objects.filter(store=store).select_related("import_source")[:RUNS_SHOWN])
    states = [run_state(run, store) for run in runs]
    return render(
        request,
        "studio/catalog.html",
        {
            "store": store,
            "upload_form": upload_form or UploadForm(),
            "source_form": source_form or SourceForm(store=store),
            "sources": [(source, sync.display_location(source))
                        for source in ImportSource.objects.filter(store=store).select_related("last_run")],
            "runs": list(zip(runs, states)),
            "search": search,
            "query": query,
            "products": products,
            "product_count": Product.objects.filter(store=store).count(),
            "watch": request.GET.get("run", ""),
            "watched": next((state for run, state in zip(runs, states) if str(run.pk) == request.GET.get("run")),
                            None),
        },
        status=status,
    )


catalog = page_view(_page)


def _start_upload(request: HttpRequest, store: Store, data: dict) -> HttpResponse:
    run = sync.start_upload(store, data["format"], data["file"].name, data["text"], user=request.user)
    # No "started" message: the page's banner follows the run (``run_banner``), polled while it runs.
    return redirect(f"{reverse('studio:catalog', kwargs={'slug': store.slug})}?run={run.pk}#runs")


upload = form_view(UploadForm, _page, _start_upload, "upload_form")


@require_POST
@owners_only
def add_source(request: HttpRequest, store: Store) -> HttpResponse:
    form = SourceForm(request.POST, store=store, instance=ImportSource(store=store, created_by=request.user))
    if not form.is_valid():
        return _page(request, store, source_form=form.shown_again(), status=400)
    source = form.save(commit=False)
    sync.schedule(source)
    source.save()
    messages.success(request, f"Source {source.name} saved.")
    return redirect(_catalog_url(store, "sources"))


def _source(store: Store, source_id: int) -> ImportSource:
    return get_object_or_404(ImportSource, store=store, pk=source_id)


@require_POST
@owners_only
def sync_source(request: HttpRequest, store: Store, source_id: int) -> HttpResponse:
    source = _source(store, source_id)
    if source.last_run is not None and not source.last_run.finished:
        messages.error(request, f"Import #{source.last_run.pk} of {source.name} is still running.")
        return redirect(_catalog_url(store, "sources"))
    run = sync.start_sync(source, user=request.user)
    return redirect(f"{reverse('studio:catalog', kwargs={'slug': store.slug})}?run={run.pk}#runs")


@require_POST
@owners_only
def source_schedule(request: HttpRequest, store: Store, source_id: int) -> HttpResponse:
    source = _source(store, source_id)
    schedule = request.POST.get("schedule", "")
    if schedule not in ImportSource.Schedule.values:
        messages.error(request, "Choose off, hourly or daily.")
    else:
        source.schedule = schedule
        sync.schedule(source)
        source.save(update_fields=["schedule", "next_due_at"])
        messages.success(request, f"{source.name}: {source.get_schedule_display().lower()}.")
    return redirect(_catalog_url(store, "sources"))


@require_POST
@owners_only
def delete_source(request: HttpRequest, store: Store, source_id: int) -> HttpResponse:
    source = _source(store, source_id)
    source.delete()
    messages.success(request, f"Source {source.name} deleted (its past imports stay listed).")
    return redirect(_catalog_url(store, "sources"))


@require_GET
@owners_only
def run_progress(request: HttpRequest, store: Store, run_id: int) -> JsonResponse:
    run = get_object_or_404(ImportRun, store=store, pk=run_id)
    return JsonResponse(run_state(run, store))


@require_GET
@owners_only
def run_errors(request: HttpRequest, store: Store, run_id: int) -> HttpResponse:
    run = get_object_or_404(ImportRun, store=store, pk=run_id)
    response = HttpResponse(sync.error_report_csv(run), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="import-{run.pk}-errors.csv"'
    return response


@require_GET
@owners_only
def product_preview(request: HttpRequest, store: Store, product_id: int) -> HttpResponse:
    """What the assistant shows a shopper who asks for the product by name: the chat's retrieval, as is."""
    product = get_object_or_404(
        Product.objects.prefetch_related(Prefetch("variants", queryset=Variant.objects.order_by("position", "pk"))),
        store=store, pk=product_id,
    )
    question = request.GET.get("q", "").strip()[:500] or f"Do you have the {product.title}?"
    retrieved = retrieve(store, question)
    skus = {variant.sku for variant in product.variants.all()}
    return render(
        request,
        "studio/catalog_product.html",
        {
            "store": store,
            "product": product,
            "question": question,
            "retrieved": retrieved,
            "shown": any(card["sku"] in skus for card in retrieved.cards),
        },
    )
