"""A version's score report in an owner's words (``studio.scoring``), for the prompt, draft and compare pages."""

from __future__ import annotations

from typing import Any

from django import template

from shop_assistant.studio import scoring

register = template.Library()


@register.filter
def missed(report: dict[str, Any]) -> list[str]:
    return scoring.missed_in_words(report or {})


@register.filter
def failed_checks(checks: dict[str, bool]) -> list[str]:
    return scoring.failed_checks_in_words(checks or {})
