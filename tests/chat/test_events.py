"""What the chat mirrors to the console: the answer's frames, quotes included (the agent sees what the shopper saw)."""

from __future__ import annotations

import asyncio
import uuid

from channels.layers import get_channel_layer

from shop_assistant.chat.protocol import events


async def test_the_feed_mirrors_cards_and_quotes_but_not_the_shoppers_own_frames():
    layer = get_channel_layer()
    conversation = uuid.uuid4()
    channel = await layer.new_channel()
    await layer.group_add(events.group_name(conversation), channel)
    feed = events.ConversationFeed(conversation)
    quotes = {"type": "sources", "message_id": "m1", "items": [{"title": "Returns", "text": "Free for 30 days."}]}
    for frame in ({"type": "start", "message_id": "m1"}, {"type": "products", "message_id": "m1", "items": []},
                  quotes, {"type": "ready"}, {"type": "error", "code": "x"},
                  {"type": "end", "message_id": "m1", "finish_reason": "stop"}):
        feed.push(frame)
    await feed.aclose()
    received = [(await layer.receive(channel))["frame"]["type"] for _ in range(4)]
    assert received == ["start", "products", "sources", "end"]
    await layer.group_discard(events.group_name(conversation), channel)


async def test_a_shoppers_new_order_request_is_announced_to_the_stores_consoles(transactional_db):
    """The chat records the request (``_record_order_effects``) and every console of the store hears of it: the
    inbox refreshes, the order requests page says a new one came in."""
    from types import SimpleNamespace

    from asgiref.sync import sync_to_async
    from django.utils import timezone

    from catalog.models import Store
    from shop_assistant.chat.answers import service
    from shop_assistant.chat.models import Conversation, hash_token, new_resume_token
    from shop_assistant.orders.conversations import Requested
    from shop_assistant.orders.models import Order, OrderRequest

    def setup():
        store = Store.objects.create(slug="evt", name="Events")
        order = Order.objects.create(store=store, number="1042", email="sam@example.com", placed_at=timezone.now())
        conversation = Conversation.objects.create(store=store, resume_token_hash=hash_token(new_resume_token()))
        return store, order, conversation

    store, order, conversation = await sync_to_async(setup)()
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(events.store_group(store.pk), channel)
    session = SimpleNamespace(conversation=conversation)
    await service._record_order_effects(session, [Requested("return", order.pk, ("Boots (US 9)",), "", "return them")])
    request = await OrderRequest.objects.aget(order=order)
    frame = await asyncio.wait_for(layer.receive(channel), 5)
    assert frame["type"] == "console.inbox" and frame["kind"] == "order_request"
    assert frame["conversation"] == str(conversation.pk) and frame["request"] == request.pk
    assert frame["text"] == "asked to return order #1042"
    # Asked twice: one request, and no second announcement.
    await service._record_order_effects(session, [Requested("return", order.pk, ("Boots (US 9)",), "", "again")])
    assert await OrderRequest.objects.filter(order=order).acount() == 1
    await layer.group_discard(events.store_group(store.pk), channel)
    from django.db import connections

    from shop_assistant.chat.log import keeping

    # The connections of the writer thread and of sync_to_async's, closed there: the test database is dropped.
    await keeping.within_deadline(connections.close_all)
    await sync_to_async(connections.close_all)()
