"""The outcome of a request told to the shopper (shop_assistant/orders/notify.py, through the console's
``order_requests.decide``): in the widget always, and by email to the order's address when no connection of the
shopper's is open; in the conversation's language."""

from __future__ import annotations

from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.core import mail
from django.utils import timezone

from shop_assistant.chat.models import Message
from shop_assistant.console.order_requests import decide
from shop_assistant.orders import notify
from shop_assistant.orders.models import Order, OrderRequest
from tests.chat.conftest import asgi_app, ws  # noqa: F401
from tests.console.conftest import add_message, build_world, make_conversation


@pytest.fixture(autouse=True)
def in_line(settings):
    settings.ORDERS_TASKS_IN_THREAD = False  # the email task runs in the test, not on the background thread
    settings.DEFAULT_FROM_EMAIL = "help@corner.example"


def _request(store, conversation=None, kind: str = "return") -> OrderRequest:
    order = Order.objects.create(store=store, number="1003", email="sam@example.com", placed_at=timezone.now(),
                                 fulfillment_status="delivered", delivered_at=timezone.now())
    order.lines.create(title="Cascade Fleece Jacket", variant="M", quantity=1, price=Decimal("79.00"))
    return OrderRequest.objects.create(store=store, order=order, conversation=conversation or make_conversation(store),
                                       kind=kind, lines=["Cascade Fleece Jacket (M)"])


def test_a_shopper_who_left_gets_the_outcome_by_email(transactional_db):
    world = build_world()
    request = _request(world.store_a)
    add_message(request.conversation, "user", "I want to return the fleece jacket from order 1003")
    decide(world.users["agent"], request.pk, True, "The label is in the parcel.")

    assert len(mail.outbox) == 1
    email = mail.outbox[0]
    assert email.to == ["sam@example.com"] and email.from_email == "help@corner.example"
    assert email.subject == "Alpha: your request for order #1003"
    assert email.body.startswith("Your return request for order #1003 was accepted. The label is in the parcel.")
    # The widget has it too, waiting in the conversation for the shopper's return.
    told = Message.objects.get(conversation=request.conversation, role="agent")
    assert told.text == "Your return request for order #1003 was accepted. The label is in the parcel."
    assert OrderRequest.objects.get(pk=request.pk).emailed_at is not None
    # A task run twice (a worker's restart) mails nothing more.
    assert notify.send_outcome_email(request.pk, "en") is False and len(mail.outbox) == 1


def test_the_email_and_the_widget_speak_the_conversations_language(transactional_db):
    world = build_world()
    request = _request(world.store_a, kind="cancel")
    add_message(request.conversation, "user", "Hola, quiero cancelar mi pedido 1003 porque lo compré por error")
    decide(world.users["agent"], request.pk, False, "")
    email = mail.outbox[0]
    assert email.subject == "Alpha: tu solicitud del pedido #1003"
    assert email.body.startswith("Tu solicitud para cancelar el pedido #1003 ha sido rechazada.")
    assert "el chat también lo muestra" in email.body
    told = Message.objects.get(conversation=request.conversation, role="agent")
    assert told.text == "Tu solicitud para cancelar el pedido #1003 ha sido rechazada."


def test_a_request_without_a_conversation_mails_nobody(transactional_db):
    world = build_world()
    request = _request(world.store_a)
    OrderRequest.objects.filter(pk=request.pk).update(conversation=None)
    decide(world.users["agent"], request.pk, True, "")
    assert mail.outbox == []


async def test_a_shopper_still_in_the_chat_is_told_there_and_not_mailed(asgi_app, ws):  # noqa: F811
    """The shopper's open socket answers the presence probe; an agent watching the conversation in the console
    does not count as the shopper. Once the shopper closes the widget, the next outcome goes by email. (``decide``
    runs on a thread of its own, as a view's request does under daphne: the sockets' database calls share the other.)"""
    from shop_assistant.chat.log.conversations import new_conversation
    from tests.console.test_consumer import console_for

    world = await database_sync_to_async(build_world)()
    conversation, token = await database_sync_to_async(new_conversation)(world.store_a)
    first = await database_sync_to_async(_request)(world.store_a, conversation)
    watcher = await console_for(asgi_app, world.users["owner"])
    assert (await watcher.connect())["type"] == "hello"
    await watcher.send({"type": "watch", "conversation": str(conversation.pk)})
    await watcher.receive_until(lambda f: f["type"] == "watching")
    shopper = await ws(f"/ws/chat/?store=alpha&resume={token}")

    await sync_to_async(decide, thread_sensitive=False)(world.users["agent"], first.pk, True, "See you soon.")
    frame = await shopper.receive()
    while frame["type"] != "agent_message":
        frame = await shopper.receive()
    assert frame["text"] == "Your return request for order #1003 was accepted. See you soon."
    assert mail.outbox == []

    await shopper.close()
    second = await database_sync_to_async(OrderRequest.objects.create)(
        store=world.store_a, order=first.order, conversation=conversation, kind="exchange", wanted="size L")
    await sync_to_async(decide, thread_sensitive=False)(world.users["agent"], second.pk, False, "Size L is sold out.")
    assert [m.subject for m in mail.outbox] == ["Alpha: your request for order #1003"]
    assert "Your exchange request for order #1003 was declined. Size L is sold out." in mail.outbox[0].body
    await watcher.close()
