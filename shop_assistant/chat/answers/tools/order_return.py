"""``order_return``: a return or an exchange of items of the shopper's order, checked against the store's returns
policy (the window from delivery, worn footwear and the other exclusions, sale items), the deciding sentence
quoted; what passes becomes a request for agents (``OrderRequest``), never a change to the order."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shop_assistant.orders import returns
from shop_assistant.orders.conversations import EXCHANGE_WANTED
from shop_assistant.orders.policy import return_rules

from ..composition import Composition
from .order_access import OrderArguments, answered, order_for
from .registry import Context, register


class OrderReturnArguments(OrderArguments):
    kind: Literal["return", "exchange"] = Field("return", description="exchange: for another size or colour")
    wanted: str = Field(None, max_length=100, description="for an exchange: the size or colour wanted")  # type: ignore[assignment]


@register(
    "order_return",
    "The shopper wants to return or exchange items of their own order.",
    OrderReturnArguments,
    examples=(("I want to return the boots from order 1003", {"order_number": "1003"}),
              ("can I exchange the jacket from my order for a size L?", {"kind": "exchange", "wanted": "size L"})),
)
def order_return(context: Context, arguments: OrderReturnArguments) -> Composition:
    access = order_for(context, "order_return", arguments.order_number, arguments.email)
    if access.order is None:
        return access.composition
    rules = return_rules(context.store)
    # The message that asked for the return names the items; a reply giving only the email (or the size) does not.
    state = context.order_state
    if state and state.waiting_for == EXCHANGE_WANTED and state.pending_text:
        text = f"{state.pending_text} {context.text}"
    elif state and state.waiting_for:
        text = f"{context.previous} {context.text}"
    else:
        text = context.text
    decision = returns.check(access.order, text, rules, arguments.kind, arguments.wanted or "")
    quotes = [{"title": rules.title, "text": sentence} for sentence in dict.fromkeys(decision.policy)]
    return answered(access, " ".join(decision.sentences), quotes, decision.effects)
