"""The owner's prompt over the real chat path (websocket, consumer, pipeline, the bundled model): a published
instruction changes what a shopper reads."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from catalog import language

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("chat_engine", "chat_settings")]


def publish_with(store, instruction: str) -> None:
    from shop_assistant.studio import services

    current = services.published_prompt(store)
    services.publish(services.create_draft(store, f"{current.system_prompt}\n{instruction}"))


async def test_a_store_that_says_always_answer_in_spanish_answers_an_english_question_in_spanish(ws, demo_store):
    client = await ws("/ws/chat/?store=demo")
    before = await client.ask("Do you have a rain jacket?")
    await database_sync_to_async(publish_with)(demo_store, "- Always answer in Spanish.")
    after = await client.ask("Do you have a rain jacket?")  # the next message already gets the published version
    await client.close()
    assert before.text.startswith("Yes!") and language.detect(before.text) == "en"
    assert after.text.startswith("¡Sí!") and language.detect(after.text) == "es"
    assert [p["sku"] for p in after.products] == [p["sku"] for p in before.products]  # the same catalog rows


async def test_suggest_the_cookset_with_any_stove_adds_its_card_to_a_stove_answer(ws, demo_store):
    await database_sync_to_async(publish_with)(demo_store, "- Suggest the cookset with any stove.")
    client = await ws("/ws/chat/?store=demo")
    stove = await client.ask("Do you have a stove?")
    jacket = await client.ask("Do you have a rain jacket?")
    await client.close()
    assert [p["title"] for p in stove.products] == ["Micro Backpacking Stove", "Camp Cookset (4 Pieces)"]
    assert "The Camp Cookset (4 Pieces) (64.00 USD) goes well with the Micro Backpacking Stove." in stove.text
    assert all("Cookset" not in p["title"] for p in jacket.products) and "Cookset" not in jacket.text
