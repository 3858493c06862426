"""``policy_lookup``: the store documents' sentences that answer a question about shipping, returns, warranty,
payment or the store itself, quoted word for word. Products found by the same words are left out: the question
is about the store."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..composition import MODEL, NO_ANSWER, POLICY, Composition, no_answer_reply
from .registry import Context, register


class PolicyArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, max_length=200, description="the question about the store, in English")


@register(
    "policy_lookup",
    "Answer a question about the store's policies (shipping, returns, exchanges, warranty, payment, cancelling an "
    "order, contact) from its own documents.",
    PolicyArguments,
    examples=(
        ("Do you offer gift wrapping?", {"question": "Do you offer gift wrapping?"}),
        ("Akzeptiert ihr PayPal?", {"question": "Do you accept PayPal?"}),
    ),
    topic=POLICY,
)
def policy_lookup(context: Context, arguments: PolicyArguments) -> Composition:
    retrieved = context.retrieve(context.store, arguments.question)
    if not retrieved.answers:
        return Composition(NO_ANSWER, reply=no_answer_reply())
    return Composition(MODEL, facts=retrieved.facts, quotes=retrieved.quotes, answers=retrieved.answers)
