"""The fixed replies as tools: a person asked for (``handoff``), and
talk that asks nothing of the catalog (``small_talk``: greetings, thanks, "are you a bot?")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ...log import handoff
from ..composition import (
    HANDOFF,
    IDENTITY,
    MODEL,
    SMALL_TALK,
    Composition,
    identity_reply,
)
from .registry import Context, register


class HandoffArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(None, max_length=200, description="what the shopper needs a person for, if said")  # type: ignore[assignment]


class SmallTalkArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["greeting", "thanks", "identity", "other"] = Field(
        "other", description="identity: the shopper asks whether they talk to a bot or a person"
    )


@register(
    "handoff",
    "The shopper asks for a human: a person, an agent, support staff, in any words or language.",
    HandoffArguments,
    examples=(("Je voudrais parler à quelqu'un", {}), ("the strap snapped, can someone from customer service help me?", {"reason": "broken strap"})),
)
def request_person(context: Context, arguments: HandoffArguments) -> Composition:
    return Composition(HANDOFF, reply=handoff.reply_for(context.store))


@register(
    "small_talk",
    "Greetings, thanks, or asking what the assistant is; nothing to look up.",
    SmallTalkArguments,
    examples=(("hi there!", {"kind": "greeting"}), ("are you a real person?", {"kind": "identity"})),
    topic=SMALL_TALK,
)
def small_talk(context: Context, arguments: SmallTalkArguments) -> Composition:
    store = context.store
    if arguments.kind == "identity":
        return Composition(IDENTITY, reply=identity_reply(store))
    return Composition(MODEL, facts=context.retrieve(store, "").facts)
