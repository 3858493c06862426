"""The views of a studio page that takes forms (shop_assistant/studio/form_views.py): the page on a GET, a posted
form's data to the page's action when valid, and the page again with the refused form (a 400) when not; owners
only, one method each."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from shop_assistant.studio.form_views import form_view, page_view

from .conftest import make_user


class NameForm(forms.Form):
    name = forms.CharField(max_length=5)


def page(request, store, name_form=None, status: int = 200) -> HttpResponse:
    errors = name_form.errors.as_json() if name_form is not None else ""
    return HttpResponse(f"page of {store.slug} {errors}", status=status)


def accept(request, store, data: dict) -> HttpResponse:
    return HttpResponse(f"saved {data['name']} for {store.slug}", status=201)


def ask(method: str, user, data: dict | None = None) -> HttpRequest:
    request = getattr(RequestFactory(), method)("/studio/corner/", data or {})
    request.user = user
    return request


def test_the_page_is_shown_on_a_get_only(store, owner):
    view = page_view(page)
    response = view(ask("get", owner), slug="corner")
    assert response.status_code == 200 and response.content.decode().startswith("page of corner")
    assert view(ask("post", owner), slug="corner").status_code == 405


def test_a_valid_form_goes_to_the_action_and_a_refused_one_back_to_its_page(store, owner):
    view = form_view(NameForm, page, accept, "name_form")
    saved = view(ask("post", owner, {"name": "tent"}), slug="corner")
    assert saved.status_code == 201 and saved.content == b"saved tent for corner"
    refused = view(ask("post", owner, {"name": "too long a name"}), slug="corner")
    assert refused.status_code == 400 and "name" in refused.content.decode()
    assert view(ask("get", owner), slug="corner").status_code == 405


def test_anyone_but_an_owner_is_refused(store):
    agent = make_user("adam", store, "agent")
    assert page_view(page)(ask("get", agent), slug="corner").status_code == 403
    view = form_view(NameForm, page, accept, "name_form")
    assert view(ask("post", agent, {"name": "tent"}), slug="corner").status_code == 403
