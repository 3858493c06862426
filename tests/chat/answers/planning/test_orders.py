"""The rule planner's order follow-ups (shop_assistant/chat/answers/planning/orders.py): the answer to "which size
would you like?" is read as the exchange's size, and an exchange asked before the email stays an exchange."""

from __future__ import annotations

import pytest

from catalog.models import Store
from shop_assistant.chat.answers.planning.orders import plan, wanted_answer
from shop_assistant.chat.answers.retrieval import retrieve
from shop_assistant.chat.answers.tools import Context
from shop_assistant.orders.conversations import EXCHANGE_WANTED, OrderState
from shop_assistant.orders.models import Order


@pytest.mark.parametrize(("text", "wanted"), [
    ("size 10", "size 10"), ("a 10", "size 10"), ("10", "size 10"), ("US 10.5, please", "US 10.5"),
    ("L", "size L"), ("an XL please", "size XL"), ("medium", "medium"), ("in black", "black"),
    ("I'd like a 9 then", "size 9"),
    ("I'm not sure", ""), ("what sizes do you have?", ""), ("size 10 and a refund", ""), ("thanks", ""),
])
def test_an_answer_that_says_only_a_size_or_a_colour_is_read_as_one(text, wanted):
    assert wanted_answer(text) == wanted


def _context(text: str, state: OrderState, previous: str = "") -> Context:
    return Context(Store(slug="s", name="S"), text, retrieve, previous, [], "en", conversation=object(),
                   order_state=state)


def _calls(text: str, state: OrderState, previous: str = "") -> list[tuple[str, dict]]:
    return [(c.name, c.arguments.model_dump(exclude_none=True)) for c in plan(_context(text, state, previous))]


def test_the_size_asked_for_makes_the_exchange_of_the_verified_order():
    state = OrderState(order=Order(number="1003"), via="email", waiting_for=EXCHANGE_WANTED, number_given="1003",
                       pending_text="I'd like to exchange the boots from order 1003")
    assert _calls("size 10", state) == [("order_return", {"order_number": "1003", "kind": "exchange",
                                                          "wanted": "size 10"})]
    assert _calls("a 10", state)[0][1]["wanted"] == "size 10"
    # Not an answer: read as any message is (here: nothing about the order).
    assert _calls("I'm not sure yet", state) == []
    # Nothing asked: "size 10" alone means nothing about an order.
    assert _calls("size 10", OrderState(order=Order(number="1003"), via="email")) == []


def test_an_exchange_asked_before_the_email_stays_an_exchange():
    state = OrderState(waiting_for="order_return", number_given="1003")
    assert _calls("sam@example.com", state, previous="I'd like to exchange the boots from order 1003") == [
        ("order_return", {"email": "sam@example.com", "kind": "exchange"})]
    assert _calls("sam@example.com", state, previous="exchange the boots from order 1003 for a size 10") == [
        ("order_return", {"email": "sam@example.com", "kind": "exchange", "wanted": "size 10"})]
    assert _calls("sam@example.com", state, previous="I want to return the boots from order 1003") == [
        ("order_return", {"email": "sam@example.com", "kind": "return"})]


def test_the_size_with_the_order_named_again_still_answers_the_exchange_question():
    """"size 10, order 1003" names the order ("order 1003" alone reads as a status question): while the chat waits
    for the size of that order's exchange, the size is the answer; another order's number is a new question."""
    state = OrderState(order=Order(number="1003"), via="email", waiting_for=EXCHANGE_WANTED, number_given="1003",
                       pending_text="I'd like to exchange the boots from order 1003")
    exchange = ("order_return", {"order_number": "1003", "kind": "exchange", "wanted": "size 10"})
    assert _calls("size 10, order 1003", state) == [exchange]
    assert _calls("a 10 for my order #1003 please", state) == [exchange]
    assert _calls("#1003: size 10", state) == [exchange]
    assert _calls("in black, for the order", state)[0][1]["wanted"] == "black"
    # Another order, or a question about this one, is read afresh.
    assert _calls("size 10, order 1002", state)[0][0] == "order_status"
    assert _calls("where is order 1003?", state)[0][0] == "order_status"
    # Nothing asked: "size 10, order 1003" stays what it was.
    assert _calls("size 10, order 1003", OrderState(order=Order(number="1003"), via="email"))[0][0] == "order_status"


def test_can_i_still_cancel_my_order_asks_for_the_order_and_a_policy_question_stays_the_policys():
    """The cancel tool quotes the store's sentence on cancelling and asks for the number and email (and waits for
    them); the next message giving them cancels that order."""
    assert _calls("Can I still cancel my order?", OrderState()) == [("order_cancel", {})]
    assert _calls("What's your policy on cancelling my order?", OrderState())[0][0] == "policy_lookup"
    assert _calls("it's 1004, riley@example.com", OrderState(waiting_for="order_cancel")) == [
        ("order_cancel", {"order_number": "1004", "email": "riley@example.com"})]


def test_an_order_not_placed_yet_is_no_look_up():
    """"When will my order ship if I buy today?" asked for an order number the shopper cannot have; the search
    answers it (the shipping policy). With a number, or an order verified in the chat, it is that order's."""
    assert _calls("When will my order ship if I buy today?", OrderState()) == []
    assert _calls("When will my order arrive if I order it now?", OrderState()) == []
    assert _calls("When will my order 1002 ship if I buy today?", OrderState())[0][0] == "order_status"
    assert _calls("When will my order ship?", OrderState())[0][0] == "order_status"
