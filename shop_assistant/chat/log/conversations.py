"""Finding and starting conversations: the store asked for, a new conversation, a resumed one and its history.

A new conversation is a draft until its first message: the row is created together with that message (see
``writes.MessageRecord.payload``), so a connection where nothing is said leaves nothing in the database. Until
then the draft lives in its resume token: the token is signed (``django.core.signing``) and carries the draft's
id and store, so any node holding the same ``SECRET_KEY`` rebuilds the draft from the token alone. Nothing is
stored on connect and nothing is written on resume; a node that dies takes nothing with it. ``drafts`` only lets
the sessions of one process share the same draft object (a second tab) until the row exists.
"""

from __future__ import annotations

import secrets
import uuid
import weakref

from django.core import signing
from django.utils import timezone

from catalog.models import Store

from ..models import Conversation, Message, hash_token, new_resume_token

# Separates draft tokens from every other signed value of the site (sessions, password resets).
DRAFT_TOKEN_SALT = "shop_assistant.chat.draft"


class Drafts:
    """The draft conversations this process's sessions hold, by id and by resume-token hash (a cache: the token
    itself is the draft, see ``draft_from_token``).

    Held weakly: the session holds the conversation object while the connection is open; once it is gone, so is
    the entry. By hash, so that a second tab resuming a draft joins it (within this process).
    """

    def __init__(self) -> None:
        self._by_id: weakref.WeakValueDictionary[uuid.UUID, Conversation] = weakref.WeakValueDictionary()
        self._by_hash: weakref.WeakValueDictionary[str, Conversation] = weakref.WeakValueDictionary()

    def add(self, conversation: Conversation) -> None:
        self._by_id[conversation.id] = conversation
        self._by_hash[conversation.resume_token_hash] = conversation

    def get(self, conversation_id: uuid.UUID) -> Conversation | None:
        return self._by_id.get(conversation_id)

    def by_token_hash(self, token_hash: str) -> Conversation | None:
        return self._by_hash.get(token_hash)

    def __contains__(self, conversation_id: uuid.UUID) -> bool:
        return conversation_id in self._by_id


# The one registry of this process: the chat's sessions and the writes of their messages must see the same drafts.
drafts = Drafts()


def default_store(slug: str | None) -> Store | None:
    """The store named by ``slug``, or the first store when no slug is given; None if there is no such store."""
    stores = Store.objects.order_by("pk")
    return stores.filter(slug=slug).first() if slug else stores.first()


def new_conversation(store: Store) -> tuple[Conversation, str]:
    """A new conversation, saved now, and its resume token (returned once; only its hash is stored)."""
    token = new_resume_token()
    conversation = Conversation.objects.create(store=store, resume_token_hash=hash_token(token))
    return conversation, token


def draft_conversation(store: Store) -> tuple[Conversation, str]:
    """A new conversation that is saved with its first message (see ``writes.MessageRecord.payload``), and its
    token: signed, holding the draft's id and store and 32 random bytes (the secret part), so that any node
    can resume the draft (``draft_from_token``).
    """
    conversation_id = uuid.uuid4()
    token = signing.dumps([conversation_id.hex, store.pk, secrets.token_urlsafe(32)], salt=DRAFT_TOKEN_SALT)
    return _draft(conversation_id, store, token), token


def _draft(conversation_id: uuid.UUID, store: Store, token: str) -> Conversation:
    conversation = Conversation(
        id=conversation_id, store=store, resume_token_hash=hash_token(token), created_at=timezone.now()
    )
    drafts.add(conversation)
    return conversation


def draft_from_token(token: str) -> Conversation | None:
    """The draft a token was issued for (no row yet: nothing was said), rebuilt from the token alone; None when
    the token is not a draft token of this site (forged, or an older random token whose row is gone), or its
    store no longer exists. Reads only."""
    try:
        conversation_hex, store_id, _ = signing.loads(token, salt=DRAFT_TOKEN_SALT)
        conversation_id = uuid.UUID(hex=conversation_hex)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    store = Store.objects.filter(pk=store_id).first()
    return None if store is None else _draft(conversation_id, store, token)


def resume_conversation(token: str, store_slug: str | None) -> Conversation | None:
    """The conversation of ``token``, if it is one and belongs to the store asked for (or no store was named)."""
    if not token or len(token) > 200:
        return None
    token_hash = hash_token(token)
    conversation = Conversation.objects.select_related("store").filter(resume_token_hash=token_hash).first()
    if conversation is None:  # nothing said yet, so no row yet: the draft this process holds, or the token's
        conversation = drafts.by_token_hash(token_hash) or draft_from_token(token)
    if conversation is None or (store_slug and conversation.store.slug != store_slug):
        return None
    return conversation


def recent_messages(conversation: Conversation, limit: int) -> list[Message]:
    """The last ``limit`` messages in order (none for a draft)."""
    if conversation._state.adding:  # a draft: nothing was said
        return []
    newest = list(Message.objects.filter(conversation=conversation).order_by("-created_at", "-id")[:limit])
    newest.reverse()
    return newest
