"""The store page's signed customer, page and cart: only a valid signature makes the customer; a forged or
altered one is refused and the chat goes on anonymously."""

from __future__ import annotations

import hashlib
import hmac
import json
from urllib.parse import urlencode

import pytest

from catalog.models import Store
from shop_assistant.chat.protocol import identity
from shop_assistant.chat.log.conversations import draft_conversation, new_conversation
from shop_assistant.chat.models import Conversation
from shop_assistant.chat.log.writes import MessageRecord, write_message

CUSTOMER = json.dumps({"id": "c-42", "name": "Ada Lovelace", "email": "ada@example.com"})


@pytest.fixture
def store(db) -> Store:
    return Store.objects.create(slug="alpha", name="Alpha")


def test_a_store_signs_with_hmac_sha256_of_the_exact_json_the_way_the_docs_show(store):
    # What docs/console/README.md tells a store's server to run, with the secret the console shows its owners.
    signature = hmac.new(identity.store_secret(store).encode(), CUSTOMER.encode(), hashlib.sha256).hexdigest()
    assert identity.verified_customer(store, CUSTOMER, signature) == {
        "id": "c-42", "name": "Ada Lovelace", "email": "ada@example.com"
    }
    assert identity.verified_customer(store, CUSTOMER, signature.upper()) != {}  # hex in either case


def test_a_forged_or_tampered_identity_is_refused(store):
    other = Store.objects.create(slug="beta", name="Beta")
    signature = identity.sign(store, CUSTOMER)
    tampered = CUSTOMER.replace("ada@example.com", "grace@example.com")
    assert identity.verified_customer(store, tampered, signature) == {}  # the e-mail changed after signing
    assert identity.verified_customer(store, CUSTOMER, "0" * 64) == {}  # a made-up signature
    assert identity.verified_customer(store, CUSTOMER, identity.sign(other, CUSTOMER)) == {}  # another store's key
    assert identity.verified_customer(store, CUSTOMER, "") == {}
    assert identity.verified_customer(store, CUSTOMER, None) == {}
    # Signed, but nothing to know the customer by, or not an object: nothing kept.
    for text in (json.dumps({"name": "Nobody"}), "[1, 2]", "not json"):
        assert identity.verified_customer(store, text, identity.sign(store, text)) == {}
    assert identity.store_secret(store) != identity.store_secret(other)


def test_page_and_cart_are_cleaned():
    assert identity.page_url("https://shop.example.com/p/boots?size=42") == "https://shop.example.com/p/boots?size=42"
    assert identity.page_url("javascript:alert(1)") == ""
    assert identity.page_url("/relative") == ""
    cart = json.dumps([{"title": "Boots", "quantity": "2", "price": "89.9", "currency": "eur"},
                       {"title": ""}, "junk", {"title": "Socks", "quantity": "lots", "price": "cheap"}])
    assert identity.cart(cart) == [
        {"title": "Boots", "quantity": 2, "price": "89.90", "currency": "EUR"},
        {"title": "Socks", "quantity": 1},
    ]
    assert identity.cart("{}") == [] and identity.cart("nope") == []


def test_a_draft_carries_the_context_into_the_row_its_first_message_creates(store):
    draft, _ = draft_conversation(store)
    context = identity.PageContext.from_query(store, {
        "customer": CUSTOMER, "customer_sig": identity.sign(store, CUSTOMER),
        "page": "https://shop.example.com/p/boots", "cart": json.dumps([{"title": "Boots", "quantity": 1}]),
    })
    assert identity.remember(draft, context) == ["page_url", "cart", "customer"]
    assert not Conversation.objects.filter(pk=draft.pk).exists()  # nothing said yet: no row
    write_message(MessageRecord(draft.pk, "user", "Do these boots run small?").payload())
    row = Conversation.objects.get(pk=draft.pk)
    assert row.customer["email"] == "ada@example.com" and row.page_url == "https://shop.example.com/p/boots"
    assert row.cart == [{"title": "Boots", "quantity": 1}]


def test_a_forged_identity_is_not_stored_and_does_not_clear_a_signed_one(store):
    conversation, _ = new_conversation(store)
    forged = identity.PageContext.from_query(store, {"customer": CUSTOMER, "customer_sig": "f" * 64})
    assert forged.refused and forged.customer == {}
    identity.remember(conversation, forged)
    assert Conversation.objects.get(pk=conversation.pk).customer == {}
    signed = identity.PageContext.from_query(store, {"customer": CUSTOMER,
                                                     "customer_sig": identity.sign(store, CUSTOMER)})
    identity.remember(conversation, signed)
    identity.remember(conversation, forged)  # a later page with a forged identity changes nothing
    assert Conversation.objects.get(pk=conversation.pk).customer["id"] == "c-42"


async def test_the_widget_socket_keeps_a_signed_customer_and_refuses_a_forged_one(ws, demo_store):
    from channels.db import database_sync_to_async

    def start() -> tuple[Conversation, str, str]:
        conversation, token = new_conversation(demo_store)
        return conversation, token, identity.sign(demo_store, CUSTOMER)

    conversation, token, signature = await database_sync_to_async(start)()
    page = "https://shop.example.com/p/boots"

    def query(sig: str) -> str:
        return "/ws/chat/?" + urlencode({"store": "demo", "resume": token, "customer": CUSTOMER,
                                         "customer_sig": sig, "page": page})

    forged = await ws(query("0" * 64))  # the chat still opens, anonymously
    assert forged.ready["conversation"] == str(conversation.pk)
    await forged.close()
    row = await database_sync_to_async(Conversation.objects.get)(pk=conversation.pk)
    assert row.customer == {} and row.page_url == page

    signed = await ws(query(signature))
    assert signed.ready["conversation"] == str(conversation.pk)
    await signed.close()
    row = await database_sync_to_async(Conversation.objects.get)(pk=conversation.pk)
    assert row.customer == {"id": "c-42", "name": "Ada Lovelace", "email": "ada@example.com"}


async def test_the_chat_opens_when_the_context_cannot_be_saved(ws, demo_store, monkeypatch):
    from django.db import OperationalError

    def down(conversation, context):
        raise OperationalError("database is down")

    monkeypatch.setattr(identity, "remember", down)
    client = await ws("/ws/chat/?" + urlencode({"store": "demo", "page": "https://shop.example.com/"}))
    assert client.ready["type"] == "ready"
