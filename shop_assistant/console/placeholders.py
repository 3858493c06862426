"""The ``{first_name}``-style placeholders of canned replies, filled from what the console knows of the conversation.

One implementation: the conversation page gets ``values_for`` (the console fills a canned reply as it is inserted
and tells the agent which placeholders it cannot fill), and ``services.reply`` fills and checks every reply again
before it is sent: a reply with a placeholder nobody could fill is refused, never sent word for word.
"""

from __future__ import annotations

import re
from typing import Any

from shop_assistant.chat.protocol.events import agent_display_name
from shop_assistant.chat.models import Conversation

# What each placeholder stands for, as the agent is told when it is unknown.
PLACEHOLDERS = {
    "name": "the shopper's name",
    "first_name": "the shopper's first name",
    "email": "the shopper's e-mail",
    "agent_name": "your name",
    "store_name": "the store's name",
}
PATTERN = re.compile(r"\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}")


class UnfilledPlaceholder(ValueError):
    """A placeholder of the text is unknown, or known but empty for this conversation (an anonymous shopper)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        what = "; ".join(
            f"{{{name}}} ({PLACEHOLDERS[name]} is not known in this conversation)" if name in PLACEHOLDERS
            else f"{{{name}}} (not a placeholder the console fills)"
            for name in names
        )
        super().__init__(f"replace {what} before sending")


def values_for(conversation: Conversation, agent: Any) -> dict[str, str]:
    """Every placeholder's value for this conversation and agent; "" where it is not known. The shopper's name is
    the customer the store signed (chat.identity): a name the shopper typed is never shown back as theirs."""
    customer = conversation.customer or {}
    name = str(customer.get("name") or "").strip()
    return {
        "name": name,
        "first_name": name.split()[0] if name else "",
        "email": str(customer.get("email") or conversation.shopper_email or "").strip(),
        "agent_name": agent_display_name(agent) if agent is not None else "",
        "store_name": conversation.store.name.strip(),
    }


def unknown_names(text: str) -> list[str]:
    """The placeholders of ``text`` that the console never fills (a typo such as ``{frist_name}``)."""
    return sorted({name for name in PATTERN.findall(text) if name not in PLACEHOLDERS})


def fill(text: str, values: dict[str, str]) -> str:
    """``text`` with every placeholder filled; raises UnfilledPlaceholder naming those that cannot be."""
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        value = values.get(match.group(1), "")
        if not value and match.group(1) not in missing:
            missing.append(match.group(1))
        return value

    filled = PATTERN.sub(replace, text)
    if missing:
        raise UnfilledPlaceholder(missing)
    return filled
