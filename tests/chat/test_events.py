"""What the chat mirrors to the console: the answer's frames, quotes included (the agent sees what the shopper saw)."""

from __future__ import annotations

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
