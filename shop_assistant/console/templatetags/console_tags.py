"""Template filters of the console."""

from __future__ import annotations

from urllib.parse import urlsplit

from django import template

register = template.Library()


@register.filter
def http_url(value: object) -> str:
    """The value when it is an http(s) URL, else "": an href or src from stored data is never ``javascript:``."""
    text = str(value or "").strip()
    parts = urlsplit(text)
    return text if parts.scheme in ("http", "https") and parts.netloc else ""


@register.filter
def agent_name(user: object) -> str:
    """A staff member as the console names them everywhere (live frames included): the display name."""
    from shop_assistant.chat.protocol.events import agent_display_name

    return agent_display_name(user) if user is not None else "?"
