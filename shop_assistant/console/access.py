"""Refusing a staff page: the console and the studio answer the same way."""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

# Pages that are safe to come back to after logging in; an action (POST) is not replayed, so it stays a 403.
_PAGE_METHODS = {"GET", "HEAD"}


def refuse(request: HttpRequest, template: str) -> HttpResponse:
    """Logged out, asking for a page: the login page, which comes back here. Logged in without the role (or
    posting an action): the 403 page ``template``, which says why."""
    if not request.user.is_authenticated and request.method in _PAGE_METHODS:
        return redirect_to_login(request.get_full_path())
    return render(request, template, status=403)
