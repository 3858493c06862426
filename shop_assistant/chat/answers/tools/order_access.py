"""What every order tool does first: find the order the shopper may hear about, or say what is missing.

The order is the one verified earlier in this conversation, or the one the number and email given now (or the
store-signed customer's email) verify (``orders.verification``). Until then the reply asks for what is missing,
and a wrong email and an unknown number get the same reply: nothing says whether an order exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _
from pydantic import BaseModel, ConfigDict, Field

from shop_assistant.orders import replies, verification
from shop_assistant.orders.conversations import Verified, Waiting
from shop_assistant.orders.models import Order

from ..composition import ORDER, Composition
from .registry import Context

_OUTCOME_REPLIES = {verification.NEED_NUMBER: replies.NEED_NUMBER, verification.NOT_FOUND: replies.NOT_FOUND,
                    verification.LIMITED: replies.LIMITED}  # fmt: skip


# The arguments every order tool takes, each when the shopper gave it; a tool's own come after them. (No
# docstring: a model's docstring is its schema's description, which the model planner reads.)
class OrderArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_number: str = Field(  # type: ignore[assignment]
        None, max_length=40, description="the order number, if the shopper gave one")
    email: str = Field(  # type: ignore[assignment]
        None, max_length=200, description="the email address on the order, if the shopper gave one")


@dataclass
class Access:
    order: Order | None
    composition: Composition | None = None  # the reply when there is no order to speak of
    effects: list[Any] | None = None  # an order verified now


def order_for(context: Context, intent: str, number: str | None, email: str | None) -> Access:
    """The verified order for this message, or the composition that asks for what is missing."""
    state = context.order_state
    number = (number or "").lstrip("#").strip()
    if not number and state is not None and state.waiting_for:
        number = state.number_given
    if state is not None and state.order is not None and (not number or number == state.order.number) and not email:
        return Access(state.order)
    if context.conversation is None:  # the studio's preview: no shopper to verify
        return Access(None, Composition(ORDER, reply=_(replies.NEED_NUMBER)))
    found = verification.verify(context.store, str(context.conversation.pk), number, (email or "").strip().lower(),
                                verification.signed_email(context.conversation))
    if found.outcome == verification.VERIFIED:
        return Access(found.order, effects=[Verified(found.order.pk, found.via, intent)])
    if found.outcome == verification.NEED_EMAIL:
        reply = _(replies.NEED_EMAIL).format(number=found.number)
        return Access(None, Composition(ORDER, reply=reply, effects=[Waiting(intent, found.number)]))
    # A wrong email keeps the number asked about: the next message may be the right email.
    waiting = [Waiting(intent, found.number)] if found.outcome != verification.LIMITED else []
    return Access(None, Composition(ORDER, reply=_(_OUTCOME_REPLIES[found.outcome]), effects=waiting))


def answered(access: Access, reply: str, quotes: list[dict[str, str]] | None = None,
             effects: list[Any] | None = None) -> Composition:
    return Composition(ORDER, reply=reply, quotes=quotes or [], effects=[*(access.effects or []), *(effects or [])])
