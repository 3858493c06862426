"""The console's order requests page: returns, exchanges and cancellations the chat started, pending first, each
accepted or declined with a note (``order_requests.decide`` tells the shopper). Thin: the rules are there.

A request of a store the agent does not work for is a 404, as one that does not exist: its number is not told.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from . import order_requests
from .services import ConsoleError
from .views import _notifications, staff_only

DECISIONS = {"accept": True, "decline": False}


@require_GET
@staff_only
def queue_page(request: HttpRequest) -> HttpResponse:
    context = {"requests": order_requests.queue_for(request.user), **_notifications(request.user)}
    return render(request, "console/order_requests.html", context)


@require_POST
@staff_only
def decide(request: HttpRequest, pk: int) -> HttpResponse:
    decision = request.POST.get("decision", "")
    if decision not in DECISIONS:
        return HttpResponseBadRequest("decision must be accept or decline")
    try:
        done = order_requests.decide(request.user, pk, DECISIONS[decision], request.POST.get("note", ""))
    except ConsoleError as error:
        if str(error) == order_requests.NOT_FOUND:
            raise Http404(order_requests.NOT_FOUND) from None
        messages.error(request, str(error).capitalize() + ".")
    else:
        messages.success(request, f"{done.get_kind_display()} for order #{done.order.number} {done.status}; "
                                  "the shopper was told.")
    return redirect("console:order_requests")
