"""The studio's orders page: upload an orders file, save the store's database as the source (its column mapping),
test the connection, import now, and the last import's time and counts (the freshness). Owners only.

Thin: the forms check the input (the catalog's checks), ``orders.imports`` runs and records the imports. Order
imports run in the request: they write rows only (no embeddings), unlike the catalog's.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from catalog.ingest import describe_source
from catalog.models import Store
from shop_assistant.orders import imports, webhooks
from shop_assistant.orders.models import Order, OrderImport, OrderSource, OrderWebhook

from .form_views import form_view, page_view
from .order_forms import OrderScheduleForm, OrderSourceForm, OrderUploadForm, OrderWebhookForm
from .views import owners_only

IMPORTS_SHOWN = 10


def _orders_url(store: Store) -> str:
    return reverse("studio:orders", kwargs={"slug": store.slug})


def _page(request: HttpRequest, store: Store, upload_form=None, source_form=None, failed: OrderImport | None = None,
          status: int = 200, webhook_form=None, new_secret: str = "") -> HttpResponse:
    source = OrderSource.objects.filter(store=store).first()
    webhook = OrderWebhook.objects.filter(store=store, active=True).first()
    return render(request, "studio/orders.html", {
        "store": store,
        "upload_form": upload_form or OrderUploadForm(),
        "source_form": source_form or OrderSourceForm(),
        "source": source,
        "source_location": describe_source(source.location) if source else "",
        "last": imports.last_import(store),
        "imports": OrderImport.objects.filter(store=store)[:IMPORTS_SHOWN],
        "order_count": Order.objects.filter(store=store).count(),
        "failed": failed,
        "schedule_form": OrderScheduleForm(initial={"schedule": source.schedule if source else "off"}),
        "webhook": webhook,
        "webhook_form": webhook_form or OrderWebhookForm(initial={"url": webhook.url if webhook else ""}),
        "new_secret": new_secret,  # shown on this answer only: it is not kept anywhere a page reads it again
        "deliveries": webhooks.last_deliveries(store),
    }, status=status)


def _outcome(request: HttpRequest, store: Store, record: OrderImport) -> HttpResponse:
    if not record.succeeded:
        return _page(request, store, failed=record, status=400)
    messages.success(request, f"Imported {record.source}: {record.created} added, {record.updated} updated, "
                              f"{record.failed} refused.")
    return redirect(_orders_url(store))


orders_page = page_view(_page)


def _import_upload(request: HttpRequest, store: Store, data: dict) -> HttpResponse:
    return _outcome(request, store, imports.run_import(store, data["format"], data["file"].name, text=data["text"],
                                                       user=request.user))


upload = form_view(OrderUploadForm, _page, _import_upload, "upload_form")


@require_POST
@owners_only
def save_source(request: HttpRequest, store: Store) -> HttpResponse:
    form = OrderSourceForm(request.POST)
    if not form.is_valid():
        return _page(request, store, source_form=form.shown_again(), status=400)
    OrderSource.objects.update_or_create(store=store, defaults={"location": form.cleaned_data["location"],
                                                                "mapping": form.cleaned_data["mapping"]})
    messages.success(request, "The order database is saved: test the connection, then import.")
    return redirect(_orders_url(store))


def _saved(request: HttpRequest, store: Store) -> OrderSource | None:
    source = OrderSource.objects.filter(store=store).first()
    if source is None:
        messages.error(request, "Save the order database first.")
    return source


@require_POST
@owners_only
def test_source(request: HttpRequest, store: Store) -> HttpResponse:
    source = _saved(request, store)
    if source is not None:
        result = imports.test_connection(source)
        (messages.success if result.ok else messages.error)(request, result.text)
    return redirect(_orders_url(store))


@require_POST
@owners_only
def import_source(request: HttpRequest, store: Store) -> HttpResponse:
    source = _saved(request, store)
    if source is None:
        return redirect(_orders_url(store))
    return _outcome(request, store, imports.import_source(source, user=request.user))


@require_POST
@owners_only
def source_schedule(request: HttpRequest, store: Store) -> HttpResponse:
    source = _saved(request, store)
    form = OrderScheduleForm(request.POST)
    if source is not None and form.is_valid():
        source.schedule = form.cleaned_data["schedule"]
        imports.schedule(source)
        source.save(update_fields=["schedule", "next_due_at", "updated_at"])
        messages.success(request, f"Order imports: {source.get_schedule_display().lower()}.")
    elif source is not None:
        messages.error(request, "Choose one of the schedules.")
    return redirect(_orders_url(store))


def _save_webhook(request: HttpRequest, store: Store, data: dict) -> HttpResponse:
    """Save the URL; a new webhook's secret is shown on this answer, once (no redirect: it is not kept for a GET)."""
    _webhook, secret = webhooks.save(store, data["url"])
    if not secret:
        messages.success(request, "The webhook URL is saved; its secret is unchanged.")
        return redirect(_orders_url(store))
    return _page(request, store, new_secret=secret)


save_webhook = form_view(OrderWebhookForm, _page, _save_webhook, "webhook_form")


@require_POST
@owners_only
def rotate_webhook_secret(request: HttpRequest, store: Store) -> HttpResponse:
    webhook = OrderWebhook.objects.filter(store=store, active=True).first()
    if webhook is None:
        messages.error(request, "Save a webhook URL first.")
        return redirect(_orders_url(store))
    return _page(request, store, new_secret=webhooks.rotate(webhook))


@require_POST
@owners_only
def remove_webhook(request: HttpRequest, store: Store) -> HttpResponse:
    OrderWebhook.objects.filter(store=store).delete()  # a new one gets a new secret
    messages.success(request, "The webhook is off: no more events are sent.")
    return redirect(_orders_url(store))
