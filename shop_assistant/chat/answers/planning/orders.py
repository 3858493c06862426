"""The rule planner's reading of a message about the shopper's own order: its status, a parcel that has not
arrived, its items, a return or exchange, a cancellation; and the follow-ups that only mean an order because the
conversation has one ("and when will it arrive?" after a verified order; "sam@example.com" after the chat asked
for the email). Policy questions that name no order ("can I return worn boots?") are left to the policy tool.
"""

from __future__ import annotations

import re

from catalog.text import any_word
from shop_assistant.orders import verification
from shop_assistant.orders.conversations import EXCHANGE_WANTED, OrderState

from ..composition import ORDER_STATUS_PATTERN
from ..tools.registry import Call, Context, call

_MY_ORDER = re.compile(
    r"\b(?:my|the|this|that|our) (?:order|parcel|package|delivery|purchase|shipment)\b"
    r"|\border\s*(?:#|no\.?|number)?\s*:?\s*#?\d{3,}|#\d{3,}",
    re.IGNORECASE,
)
_NOT_ARRIVED = any_word(
    r"(?:has(?:n't| not)|did(?:n't| not)|never|still (?:not|hasn't))\b[^.?!]{0,25}\b"
    r"(?:arriv\w*|c[oa]me|turned up|here|received|showed up)",
    "not (?:arrived|received|here)", "(?:is|got) (?:missing|lost)",
)
_STATUS = any_word(
    "when", "where", r"arriv\w*", "ship(?:ped|ping)?", r"deliver\w*", r"track\w*", "status", "come", "get here"
)
_ITEMS = any_word("what (?:was|is|'s|did i (?:order|buy|get))", "items?", "what did i (?:order|buy)")
_RETURN = any_word("return", r"send (?:\w+ )?back", "refund")
_EXCHANGE = any_word("exchange", "swap", "different (?:size|colou?r)")
_CANCEL = any_word(r"cancel\w*")
_POINTS_BACK = any_word("it", "its", "them", "they", "those", "that", "the order", "my order")
_WANTED = any_word(r"(?:for|in|to) (?:an? |the )?((?:size |us )?(?:\d{1,2}(?:\.5)?|xs|s|m|l|xl|xxl|small|medium|large)"
                   r"|(?:black|navy|blue|red|green|grey|gray|orange|sage|white|forest|charcoal|slate|rust))")
_FOLLOW_UP_WORDS = 12
# The answer to "which size or colour would you like instead?": "size 10", "a 10", "US 10.5, please", "L", "medium",
# "in black". Read only while the chat waits for it (``EXCHANGE_WANTED``), and only when nothing but a size or a
# colour is said besides these words: "I'm not sure" holds an "m" and is no size.
_SIZE_WORD = re.compile(r"\d{1,2}(?:\.5)?|xxs|xs|s|m|l|xl|xxl|xxxl|small|medium|large|x-large")
_COLOUR_WORD = re.compile(r"black|navy|blue|red|green|grey|gray|orange|sage|white|forest|charcoal|slate|rust|brown|tan|"
                          r"olive|khaki|beige|yellow|purple|pink")
_SIZE_SYSTEMS = {"us": "US", "eu": "EU", "uk": "UK"}
_ANSWER_FILLER = frozenset(
    "a an the size in for please pls thanks thank you one ones i i'd id like want take i'll ill make it how about "
    "maybe ok okay then instead would be great can get have colour color".split())
_ANSWER_WORDS = re.compile(r"[a-z0-9.'-]+")
# The order named again in such an answer ("size 10, order 1003", "for my order #1003"), taken out before reading it.
_ORDER_NAMED = re.compile(
    r"\b(?:(?:for|from|on|of|in) )?(?:(?:my|the|this|that|our) )?order\b(?:\s*(?:#|no\.?|number)?\s*:?\s*#?\d{3,})?"
    r"|#\d{3,}",
    re.IGNORECASE,
)
# "How do I return my order?", "What's your return policy for my order?": how the store does it, for any order;
# the policy answers, quoted. What points at one order ("I want to return order #1042", "return the boots from my
# order") is not matched: the order's tool asks for it and verifies it. Nor is "Can I still cancel my order?" (the
# one a shopper asks about is theirs, placed moments ago): ``order_cancel`` quotes the store's sentence on
# cancelling under its question for the number and email, and waits for them; "policy" still asks the policy.
_GENERAL = re.compile(
    r"\bpolic(?:y|ies)\b"
    r"|^\W*(?:how (?:do|can|would|should) i|how long do i have to|can i(?: still)?|is it (?:still )?possible to"
    r"|do you (?:let me|allow me to))\s+(?:return|cancel|exchange|refund|send back)\s+(?:my|an|the) order\b",
    re.IGNORECASE,
)
# "When will my order ship if I buy today?": an order not placed yet, so the store's shipping policy answers, not
# a look-up that asks for a number the shopper does not have.
_NOT_PLACED = any_word(r"if i (?:buy|order|place (?:it|an order|the order)|purchase|get) (?:it |them |one |this |that )?"
                       r"(?:today|now|tonight|tomorrow|this (?:morning|afternoon|evening|week))")
_POLICY_WORD = any_word("polic(?:y|ies)")
_POLICY_QUESTION_CHARS = 200  # policy_lookup's bound on its question


def _arguments(text: str, with_number: bool) -> dict[str, object]:
    found: dict[str, object] = {}
    number = verification.given_number(text) if with_number else ""
    email = verification.given_email(text)
    if number:
        found["order_number"] = number
    if email:
        found["email"] = email
    return found


def _intent(text: str, about_an_order: bool) -> list[Call]:
    arguments = _arguments(text, about_an_order)
    if _CANCEL.search(text):
        return [call("order_cancel", **arguments)]
    if _EXCHANGE.search(text):
        wanted = _WANTED.search(text)
        return [call("order_return", kind="exchange", **arguments, **({"wanted": wanted.group(1)} if wanted else {}))]
    if _RETURN.search(text):
        return [call("order_return", **arguments)]
    if _ITEMS.search(text) and not _STATUS.search(text):
        return [call("order_items", **arguments)]
    if ORDER_STATUS_PATTERN.search(text) or _NOT_ARRIVED.search(text) or _STATUS.search(text):
        return [call("order_status", **arguments, **({"not_arrived": True} if _NOT_ARRIVED.search(text) else {}))]
    return []


def wanted_answer(text: str) -> str:
    """The size or colour a short answer says, as the request will show it ("size 10", "US 10", "L", "black"),
    or "" when the message says anything else too."""
    words = [word.strip(".'") for word in _ANSWER_WORDS.findall(text.lower())]
    system = next((_SIZE_SYSTEMS[word] for word in words if word in _SIZE_SYSTEMS), "")
    said = [word for word in words if word and word not in _ANSWER_FILLER and word not in _SIZE_SYSTEMS]
    if len(said) != 1:
        return ""
    word = said[0]
    if _SIZE_WORD.fullmatch(word):
        if word[0].isdigit():
            return f"{system} {word}" if system else f"size {word}"
        return f"size {word.upper()}" if len(word) <= 4 and "-" not in word else word
    return word if _COLOUR_WORD.fullmatch(word) else ""


def _exchange_answer(text: str, state: OrderState | None) -> str:
    """The size or colour of a message answering "which size or colour would you like instead?", or "".

    Naming the order again ("size 10, order 1003", "a 10 for my order #1003") still answers it; naming another
    order, or saying anything else, does not (that message is read afresh)."""
    if state is None or state.waiting_for != EXCHANGE_WANTED or state.order is None:
        return ""
    if len(text.split()) > _FOLLOW_UP_WORDS:
        return ""
    number = verification.given_number(text)
    if number and number.lstrip("#") != state.order.number:
        return ""
    return wanted_answer(_ORDER_NAMED.sub(" ", text))


def _is_general(text: str, state: object) -> bool:
    """A question about the store's policy for orders, not about one: no number, no email, no order verified in
    the conversation (with one verified, "can I still cancel my order?" is about that one)."""
    if not _MY_ORDER.search(text) or getattr(state, "order", None) is not None or _arguments(text, True):
        return False  # naming no order at all, it is the catalog search's (which finds the policy's passages)
    if _CANCEL.search(text) and not _POLICY_WORD.search(text):
        return False
    return bool(_GENERAL.search(text) and (_RETURN.search(text) or _EXCHANGE.search(text) or _CANCEL.search(text)))


def plan(context: Context) -> list[Call]:
    """The order tool's call for ``context.text``, or [] when the message is not about the shopper's order."""
    text, state = context.text, context.order_state
    if _is_general(text, state):
        return [call("policy_lookup", question=text[:_POLICY_QUESTION_CHARS])]
    # Before the order's words: "size 10, order 1003" answers the question the chat asked, it asks no status. The
    # exchange is of the items the asking message named.
    wanted = _exchange_answer(text, state)
    if wanted and state is not None and state.order is not None:
        return [call("order_return", order_number=state.order.number, kind="exchange", wanted=wanted)]
    placed = not _NOT_PLACED.search(text) or getattr(state, "order", None) is not None or _arguments(text, True)
    if placed and (ORDER_STATUS_PATTERN.search(text) or _MY_ORDER.search(text)):
        return _intent(text, True) or [call("order_status", **_arguments(text, True))]
    if state is None:
        return []
    short = len(text.split()) <= _FOLLOW_UP_WORDS
    if state.waiting_for and short:
        given = _arguments(text, True)
        if given and state.waiting_for != EXCHANGE_WANTED:  # the number or email the chat asked for
            if state.waiting_for == "order_return" and _EXCHANGE.search(context.previous):
                wanted = _WANTED.search(context.previous)  # "exchange the boots": asked before the email was
                given.update(kind="exchange", **({"wanted": wanted.group(1)} if wanted else {}))
            return [call(state.waiting_for, **given)]
    if state.order is not None and short and _POINTS_BACK.search(text):
        return _intent(text, False)
    return []
