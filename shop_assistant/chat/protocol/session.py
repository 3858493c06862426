"""One shopper's chat connection: the protocol of docs/chat-protocol.md, independent of the transport.

The Channels consumer hands frames in and gives a ``send`` coroutine for frames out. The session holds the
connection's state (its conversation, turns, limits, the answer in progress) and turns frames into actions; an
answer's life (keep, plan, stream through the guard, record) is ``answers.service``'s. Model work runs in the
engine's thread, blocking work (database, retrieval, tokenizer) and checking on worker threads, so the event
loop only ever moves frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from catalog.models import Store

from shop_assistant.runtime import engine_service, nodes
from shop_assistant.runtime.limits import SlidingWindowLimiter, Throttle
from shop_assistant.runtime.text import clean_text
from shop_assistant.prompts.models import SampleQuestion
from ..log import closing, feedback, handoff, keeping
from ..answers import composition, service as answering
from ..answers.service import Answer
from . import events, frames
from .frames import Frame, ProtocolError
from ..log.conversations import default_store, draft_conversation, recent_messages, resume_conversation
from ..models import AnswerSettings, Conversation, Message, WidgetSettings
from ..answers.prompting import Turn
from ..log.writes import MessageRecord, client_message_id

logger = logging.getLogger(__name__)

SendFrame = Callable[[Frame], Awaitable[None]]
GroupSend = Callable[[Frame], Awaitable[None]]

# How long a closing connection waits for its aborted answer to wind down (and be logged) before cancelling it.
CLOSE_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class Limits:
    """A session's limits; the message limits come from settings.CHAT (their one source)."""

    max_message_chars: int
    messages_per_minute: int
    history_messages: int = 50  # sent with `ready` and replayed into the prompt (then trimmed to fit)
    typing_interval: float = 1.0

    @classmethod
    def from_settings(cls) -> Limits:
        chat = settings.CHAT
        return cls(**{name: chat[name] for name in cls.__dataclass_fields__ if chat.get(name) is not None})

    @property
    def max_frame_chars(self) -> int:
        # JSON escaping can grow text up to 6x (\uXXXX); anything beyond that is not a message frame.
        return self.max_message_chars * 6 + 1024


# What the widget shows under an answer its node's death cut (the history item carries ``interrupted``).
INTERRUPTED_NOTICE = "The answer was interrupted. Ask again?"
# The store's sample questions offered as buttons before the shopper has said anything.
MAX_SUGGESTIONS = 4
EMAIL_SAVED_NOTICE = "Thanks! We'll email you at {email} if we can't answer you here."



def _end_interrupted(message_ids: list[uuid.UUID]) -> None:
    """Blocking (database). Only rows still pending: an answer whose own write got there first keeps it."""
    Message.objects.filter(pk__in=message_ids, finish_reason="").update(
        finish_reason=Message.FinishReason.INTERRUPTED
    )


def _history_frame(message: Message) -> Frame:
    # ``at``: when it was said (the server's clock, ISO 8601 with its offset); the widget shows it in local time.
    item: Frame = {"role": message.role, "text": message.text, "at": message.created_at.isoformat()}
    if message.client_id is not None:  # the widget's outbox: this message is kept, its entry may go
        item["client_id"] = str(message.client_id)
    if message.role == Message.Role.ASSISTANT:
        item["message_id"] = str(message.id)  # for thumbs (`rate`) and card clicks after a reload
        if message.rating is not None:
            item["rating"] = message.rating
    if message.finish_reason == Message.FinishReason.INTERRUPTED:
        item.update(interrupted=True, notice=INTERRUPTED_NOTICE)
    if message.products:
        item["products"] = message.products
    if message.quotes:
        item["quotes"] = message.quotes
    if message.role == Message.Role.AGENT:
        item["agent"] = message.agent
    return item


def _turn(message: Message) -> Turn | None:
    if message.role == Message.Role.USER:
        return Turn("user", message.model_text or message.text)
    if message.text:  # assistant and agent replies; an empty (aborted at once) answer adds nothing
        return Turn("assistant", message.text)
    return None


def _open_conversation(
    store_slug: str | None, token: str | None, history_limit: int
) -> tuple[Store | None, Conversation | None, str | None, list[Message]]:
    """(store, conversation, token, history); store None when there is no store to chat with."""
    conversation = resume_conversation(token, store_slug) if token else None
    if conversation is not None:
        _load_settings(conversation.store)
        return conversation.store, conversation, token, recent_messages(conversation, history_limit)
    store = default_store(store_slug)
    if store is None:
        return None, None, None, []
    _load_settings(store)
    conversation, token = draft_conversation(store)  # saved with its first message
    return store, conversation, token, []


def _load_settings(store: Store) -> None:
    """Blocking (database). The store's settings, read once here and kept on the store object: the session reads
    them on the event loop (the greeting, when agents are back, the identity's key), where no query may run."""
    AnswerSettings.of(store)
    WidgetSettings.of(store)


def _suggestions(store: Store) -> list[str]:
    """Blocking (database). The questions the owner previews in the studio double as the widget's suggestions."""
    rows = SampleQuestion.objects.filter(store=store).values_list("text", flat=True)[:MAX_SUGGESTIONS]
    return [text.strip() for text in rows if text.strip()]


def _asks_for_email(store: Store, conversation: Conversation) -> str | None:
    """Blocking (clock, conversation row as read). When a handoff waits while nobody is there and no email is
    known yet: when agents are back (the widget offers an email field); else None."""
    if conversation.status != Conversation.Status.HANDOFF or conversation.shopper_email:
        return None
    return handoff.agents_back(store)


class ChatSession:
    guard: Any = None  # admission.ConnectionGuard: limits per client IP and store, set by the consumer

    def __init__(
        self,
        *,
        store: Store,
        conversation: Conversation,
        resume_token: str,
        history: list[Message],
        send: SendFrame,
        group_send: GroupSend | None = None,
        limits: Limits | None = None,
        suggestions: list[str] | None = None,
    ) -> None:
        self.store = store
        self.suggestions = suggestions or []
        self.conversation = conversation
        self.resume_token = resume_token
        self.history = history
        self.turns: list[Turn] = [turn for turn in map(_turn, history) if turn is not None]
        # The shopper's last words, for retrieving follow-ups ("anything cheaper?") together with them.
        self.last_shopper_text = next((m.text for m in reversed(history) if m.role == Message.Role.USER), "")
        # The cards of the latest answer that had some: "which of those is lighter?" is about them.
        self.shown_cards: list[dict[str, Any]] = next(
            (list(m.products) for m in reversed(history) if m.role == Message.Role.ASSISTANT and m.products), []
        )
        self.agents_back: str | None = None  # set on open: a handoff waits out of hours, an email is welcome
        self.limits = limits or Limits.from_settings()
        self._send = send
        self._group_send = group_send
        self._rate = SlidingWindowLimiter(self.limits.messages_per_minute, 60.0)
        self._typing = Throttle(self.limits.typing_interval)
        self._answer: Answer | None = None  # the latest (it may still be logging after its `end`)
        self._tasks: set[asyncio.Task[None]] = set()  # every answer not finished, logging included
        self.closed = False
        self._told_ended = False  # this connection's End chat sent `conversation_ended` itself

    # --- lifecycle ----------------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        *,
        store_slug: str | None,
        resume_token: str | None,
        send: SendFrame,
        group_send: GroupSend | None = None,
        limits: Limits | None = None,
    ) -> ChatSession | None:
        """Resume the token's conversation or start a new one; None when there is no such store."""
        limits = limits or Limits.from_settings()
        store, conversation, token, history = await database_sync_to_async(_open_conversation)(
            store_slug, resume_token, limits.history_messages
        )
        if store is None:
            return None
        said = any(message.role == Message.Role.USER for message in history)
        suggestions = [] if said else await database_sync_to_async(_suggestions)(store)
        session = cls(
            store=store,
            conversation=conversation,
            resume_token=token,
            history=history,
            send=send,
            group_send=group_send,
            limits=limits,
            suggestions=suggestions,
        )
        session.agents_back = _asks_for_email(store, conversation)
        return session

    def ready_frame(self) -> Frame:
        return {
            "type": "ready",
            "conversation": str(self.conversation.id),
            "resume_token": self.resume_token,
            "node": nodes.node_name(),  # which node behind the load balancer serves this socket (operations)
            # The greeting is owner text: the widget shows it as text, never as HTML.
            "store": {
                "slug": self.store.slug,
                "name": self.store.name,
                "greeting": composition.greeting(self.store),
            },
            # An answer still being written by another connection is not history yet (as before it was stored).
            "history": [_history_frame(message) for message in self.history if not message.is_pending],
            # Only before the shopper's first message: the store's sample questions, as buttons.
            "suggestions": self.suggestions,
            # bot, handoff, agent or closed: what the status line said before the reload.
            "status": self.conversation.status,
            "csat": feedback.csat_state(self.conversation),
            # A handoff out of hours with no email yet: when agents are back (the widget offers an email field).
            "ask_email": self.agents_back,
        }

    async def settle_answers(self) -> None:
        """End, as interrupted, the answers the history shows in progress that nobody is writing any more: their
        node died (or restarted) mid-answer. Only the latest can still be live (on another tab's connection,
        on any node): that one is asked about over the channel layer (``events.answer_alive``)."""
        pending = [message for message in self.history if message.is_pending]
        if not pending:
            return
        latest = pending[-1]
        if latest is self.history[-1] and await events.answer_alive(self.conversation.id, str(latest.id)):
            pending.pop()
        if not pending:
            return
        try:
            # Within the writes' deadline: a hung database must not hold up this connection's `ready`.
            await keeping.within_deadline(functools.partial(_end_interrupted, [message.id for message in pending]))
        except Exception:  # noqa: BLE001 - shown as interrupted anyway; the next resume tries again
            logger.warning("could not end %d interrupted answers", len(pending), exc_info=True)
        for message in pending:
            message.finish_reason = Message.FinishReason.INTERRUPTED

    def writing(self, message_id: str) -> bool:
        """This session is writing the answer ``message_id`` now (see ``events.answer_alive``)."""
        return self.generating and self._answer is not None and self._answer.id == message_id

    async def close(self) -> None:
        """The socket is gone: abort the answer in progress now, so its KV blocks are freed at once.

        The answer's task is not cancelled but left to finish (the engine ends the aborted stream on its next
        turn), so the partial answer is still logged; only a task that does not finish in time is cancelled.
        """
        self.closed = True
        if self._answer is not None:
            self._answer.stop()
        engine = engine_service.running_engine()
        if engine is not None:
            # Its cached turns stop outranking other traffic; a reconnect makes the session live again.
            engine.end_session(str(self.conversation.id))
        for task in list(self._tasks):
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=CLOSE_GRACE_SECONDS)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def wait_idle(self) -> None:
        """Until every answer of this session has ended and been recorded (evaluation, tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    @property
    def generating(self) -> bool:
        """From an accepted message until its `end` (or error) frame."""
        return self._answer is not None and not self._answer.ended

    # --- frames in ----------------------------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            frame = frames.parse(frames.decode(text_data, self.limits.max_frame_chars))
            if isinstance(frame, frames.MessageFrame):
                await self._on_message(frame)
            elif isinstance(frame, frames.StopFrame):
                self._on_stop()
            elif isinstance(frame, frames.TypingFrame):
                await self._on_typing()
            elif isinstance(frame, frames.EndFrame):
                await self._on_end()
            else:
                await self._on_feedback(frame)
        except ProtocolError as error:
            await self.send(error.frame())
        except feedback.FeedbackError as error:
            await self.send({"type": "error", "code": error.code, "message": error.message})
        except Exception:  # never a silent 1011: the shopper is told and the socket stays open
            logger.exception("handling a frame failed")
            await self.send({"type": "error", "code": "internal", "message": "something went wrong; try again"})

    async def _on_message(self, frame: frames.MessageFrame) -> None:
        client_id = frame.client_id
        try:
            text = await self._accept(frame.text)
        except ProtocolError as error:
            if client_id is not None:  # the widget's outbox learns which message was refused
                error.extra["client_id"] = str(client_id)
            raise
        # Whether a person has the conversation is read when the message is kept (see _generate).
        answer = self._answer = Answer(text, timezone.now(), client_id=client_id)
        if client_id is not None:  # the same row on every node and every resend: stored once per client id
            answer.user_id = client_message_id(self.conversation.id, client_id)
        task = asyncio.create_task(answering.run(self, answer), name=f"chat-answer-{self.conversation.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, text: str) -> str:
        """The message's text, checked against the limits; ProtocolError when it is refused."""
        text = clean_text(text).strip()  # no NUL, no lone surrogates: what the database and tokenizer take
        if not text:
            raise ProtocolError("empty_message", "the message is empty")
        if len(text) > self.limits.max_message_chars:
            raise ProtocolError(
                "message_too_long",
                f"messages are limited to {self.limits.max_message_chars} characters; this one has {len(text)}",
                limit=self.limits.max_message_chars,
            )
        if self.generating:
            raise ProtocolError("busy", "an answer is still being written; wait for it or send stop first")
        if not self._rate.allow():
            retry_after = round(self._rate.retry_after(), 1)
            raise ProtocolError(
                "rate_limited",
                f"at most {self.limits.messages_per_minute} messages a minute; try again in {retry_after:.0f} s",
                retry_after=retry_after,
            )
        refused = await self.guard.check_message() if self.guard is not None else None
        if refused is not None:
            _, wait = refused
            raise ProtocolError(
                "rate_limited",
                f"too many messages from this address or to this store; try again in {wait:.0f} s",
                retry_after=round(wait, 1),
            )
        return text

    async def _on_feedback(self, frame: frames.InFrame) -> None:
        """`rate`, `csat`, `email`, `card_click` (shapes checked by their schemas), the writes in ``feedback``. Each
        is acknowledged (`rated`, `csat_saved`, `email_saved`) except card clicks, which the page follows away."""
        conversation_id = self.conversation.id
        # On the chat's writer threads: a hung database holds these, never the threads that plan answers.
        write = functools.partial(database_sync_to_async, thread_sensitive=False, executor=keeping.WRITERS)
        if isinstance(frame, frames.RateFrame):
            message_id, value = frame.message_id, frame.value
            await write(feedback.rate_answer)(conversation_id, message_id, value)
            await self.send({"type": "rated", "message_id": str(message_id), "value": value})
        elif isinstance(frame, frames.CsatFrame):
            rating, comment = frame.rating, frame.comment
            await write(feedback.rate_conversation)(conversation_id, rating, comment)
            await self.send({"type": "csat_saved", "rating": rating, "comment": comment})
        elif isinstance(frame, frames.EmailFrame):
            email = feedback.clean_email(frame.email)
            await write(feedback.save_email)(conversation_id, email)
            self.conversation.shopper_email = email
            self.agents_back = None
            await self.send(
                {"type": "email_saved", "email": email, "message": EMAIL_SAVED_NOTICE.format(email=email)}
            )
        else:
            assert isinstance(frame, frames.CardClickFrame), frame
            await write(feedback.record_card_click)(conversation_id, frame.message_id, frame.sku)

    async def _on_end(self) -> None:
        """The shopper ended the chat ("End chat"): resolved exactly as an agent's resolve is (``closing.close``),
        then `conversation_ended` here (every other tab hears it through the conversation's group)."""
        if self.generating:
            self._on_stop()  # the shopper is leaving: the answer being written is not wanted any more
        close = database_sync_to_async(closing.close, thread_sensitive=False, executor=keeping.WRITERS)
        try:
            conversation, closed_now = await close(self.conversation.id)
        except Conversation.DoesNotExist:  # a draft (saved with its first message): nothing was said to end
            raise ProtocolError("not_started", "there is no conversation to end yet; say something first") from None
        self.conversation.status = conversation.status
        self.conversation.csat_rating = conversation.csat_rating
        self.conversation.csat_comment = conversation.csat_comment
        self._told_ended = closed_now  # the group's echo of this close is not sent twice (``on_conversation_closed``)
        await self.send(self._ended_frame(closing.SHOPPER))

    def _ended_frame(self, by: str) -> Frame:
        return {"type": "conversation_ended", "csat": feedback.csat_state(self.conversation), "by": by}

    def on_conversation_closed(self, by: str = closing.AGENT) -> Frame | None:
        """The conversation was resolved (``closing.close``: an agent in the console, or the shopper in another
        tab): the widget says so and asks for a rating. None for this connection's own End chat, answered already."""
        self.conversation.status = Conversation.Status.CLOSED
        if self._told_ended:
            self._told_ended = False
            return None
        return self._ended_frame(by)

    def _on_stop(self) -> None:
        # Stop with nothing in progress is not an error: the answer may have ended while the frame was in flight.
        if self._answer is not None and self.generating:
            self._answer.stop()

    async def _on_typing(self) -> None:
        if self._group_send is not None and self._typing.allow():
            await self._group_send({"type": "chat.shopper_typing", "conversation": str(self.conversation.id)})

    async def on_agent_message(self, event: Frame) -> None:
        """A human agent wrote into this conversation (the console sends it to the conversation's group)."""
        text = str(event.get("text", ""))
        self.turns.append(Turn("assistant", text))
        await self.send({"type": "agent_message", "text": text, "agent": str(event.get("agent", ""))})

    # --- frames out ---------------------------------------------------------------------------------------

    async def send(self, frame: Frame) -> None:
        if not self.closed:
            await self._send(frame)

    # --- answering ----------------------------------------------------------------------------------------

    async def record(self, record: MessageRecord) -> bool:
        """The one place a message of this conversation is logged (Celery, else the database, else the spool),
        within the writes' deadline. False when it could be saved nowhere: the caller tells the shopper."""
        return await keeping.record(record)

    async def record_or_report(self, record: MessageRecord) -> bool:
        """Record a message that gets no answer (a person has the conversation): when it cannot be saved the
        shopper is told at once, since no `end` will follow."""
        saved = await self.record(record)
        if not saved:
            await self.send(frames.not_saved(record.text, client_id=record.client_id))
        return saved

    async def emit_token(self, message_id: str, text: str) -> None:
        """The one place answer text goes out (the console may hook in here to mirror it)."""
        await self.send({"type": "token", "message_id": message_id, "text": text})

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` alongside; ``close`` and ``wait_idle`` wait for it as for an answer."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
