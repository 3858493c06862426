"""The analytics page and its CSV exports. Reads only (GET); owners of the store only, like every studio page."""

from __future__ import annotations

import csv

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from catalog import csvsafe
from catalog.models import Store

from . import analytics
from .charts import bar_chart
from .views import owners_only

TABLES = {
    "summary": (("Figure", "Value"), analytics.summary_rows),
    "daily": (analytics.DAILY_HEADER, analytics.daily_rows),
    "csat": (analytics.CSAT_HEADER, analytics.csat_rows),
    "no_match": (analytics.NO_MATCH_HEADER, analytics.no_match_rows),
    "not_understood": (analytics.NO_MATCH_HEADER, analytics.not_understood_rows),
}


def _report(request: HttpRequest, store: Store) -> analytics.Report:
    zone = analytics.store_zone(store)
    span = analytics.parse_range(request.GET.get("start"), request.GET.get("end"), zone=zone)
    return analytics.store_report(store, span)


@require_GET
@owners_only
def analytics_page(request: HttpRequest, store: Store) -> HttpResponse:
    report = _report(request, store)
    days = [d.day.strftime("%a %d") for d in report.days] if len(report.days) <= 14 else [
        d.day.strftime("%d/%m") for d in report.days
    ]
    charts = {
        "daily": bar_chart(
            days,
            [("Conversations", [d.conversations for d in report.days]),
             ("Answered without a person", [d.deflected for d in report.days]),
             ("Handoffs", [d.handoffs for d in report.days])],
            title="Conversations per day",
        ),
        "csat": bar_chart(
            [f"{score}★" for score in range(1, 6)], [("Ratings", [report.csat[s] for s in range(1, 6)])],
            title="CSAT ratings", width=320,
        ),
    }  # fmt: skip
    query = f"start={report.range.start.isoformat()}&end={report.range.end.isoformat()}"
    export = reverse("studio:analytics_csv", kwargs={"slug": store.slug, "table": "TABLE"})
    return render(
        request,
        "studio/analytics.html",
        {
            "store": store,
            "report": report,
            "summary": analytics.summary_rows(report),
            "figures": analytics.headline(report),
            "charts": charts,
            "exports": {name: f"{export.replace('TABLE', name)}?{query}" for name in TABLES},
        },
    )


@require_GET
@owners_only
def analytics_csv(request: HttpRequest, store: Store, table: str) -> HttpResponse:
    if table not in TABLES:
        return HttpResponseBadRequest("unknown table")
    report = _report(request, store)
    header, rows = TABLES[table]
    name = f"{store.slug}-{table}-{report.range.start.isoformat()}-{report.range.end.isoformat()}.csv"
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    writer = csv.writer(response)
    writer.writerow(header)
    for row in rows(report):
        # A cell a spreadsheet would run as a formula (a shopper's question starting with "=") is quoted.
        writer.writerow(csvsafe.row(row))
    return response
