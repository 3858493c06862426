"""The views of a studio page that takes forms (the catalog, the orders, the synonyms): the page itself (a GET),
and the action for a form posted from it (an upload, a synonym, the orders' webhook): the form is read from the
POST and its files; a refused one is shown again on its page with its errors (a 400), and an accepted one's
cleaned data is the page's to act on. Owners of the store only, as every studio page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET, require_POST

from catalog.models import Store

from .views import owners_only

Page = Callable[..., HttpResponse]  # the page: (request, store), or again with (<its form>=form, status=400)
Accept = Callable[[HttpRequest, Store, dict[str, Any]], HttpResponse]  # what the page does with valid data


def page_view(page: Page) -> Callable[..., HttpResponse]:
    """The view that shows ``page`` (with its forms empty)."""

    @require_GET
    @owners_only
    def view(request: HttpRequest, store: Store) -> HttpResponse:
        return page(request, store)

    return view


def form_view(form_class: type[forms.Form], page: Page, accept: Accept, field: str) -> Callable[..., HttpResponse]:
    """The view that reads ``form_class`` from a POST: a valid one's data goes to ``accept``; a refused one is
    ``page``'s argument ``field`` (the form it shows), with a 400."""

    @require_POST
    @owners_only
    def view(request: HttpRequest, store: Store) -> HttpResponse:
        form = form_class(request.POST, request.FILES)
        if not form.is_valid():
            return page(request, store, status=400, **{field: form})
        return accept(request, store, form.cleaned_data)

    return view
