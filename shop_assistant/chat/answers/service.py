"""An answer's life, from the shopper's accepted message to its recorded row: keep the message, plan (retrieve,
compose, assemble the prompt), send what is known, stream the model's continuation through the guard, record.

Plain functions over the session (``protocol.session.ChatSession``), which keeps the protocol's state and frames;
blocking work (database, retrieval, tokenizer) runs on worker threads and checking in ``guard.continuation``'s,
so the event loop only moves frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from shop_assistant.orders import conversations
from shop_assistant.runtime import engine_service

from ..guard import pipeline
from ..guard.pipeline import Generated, Plan
from ..log import handoff, keeping
from ..log.writes import MessageRecord, NotSavedError
from ..protocol import events, frames
from ..protocol.frames import Frame
from .prompting import PromptTooLongError, Turn, user_turn_content

if TYPE_CHECKING:
    from inference import AsyncLLM

    from ..protocol.session import ChatSession

logger = logging.getLogger(__name__)


@dataclass
class Answer:
    """One answer, from the shopper's accepted message to its `end` frame and its logging (which may end later).

    The session keeps only the latest; what belongs to the conversation (turns, history, limits) stays on the session.
    """

    text: str  # the shopper's message it answers
    received_at: datetime  # the message's time in the log
    received: float = field(default_factory=time.perf_counter)  # the same moment, for the `prepare_ms` timing
    first_token: float | None = None  # when its first `token` frame went out (perf_counter)
    id: str = field(default_factory=lambda: str(uuid.uuid4()))  # the `message_id` of its frames and engine request
    plan: Plan | None = None  # what is known before the model's first token (cards, quotes, the checker's evidence)
    result: Generated = field(default_factory=Generated)  # the text so far, finish reason, usage and timings
    engine: AsyncLLM | None = None  # set while the engine streams it, so a stop can abort the request
    stop_requested: bool = False
    ended: bool = False  # its `end` (or error) frame is out: the session takes the next message
    # Whether the shopper's message was kept (the database or the spool has it): the first thing done with it
    # (``keeping.keep``), before its `ack` and before anything of the answer, so a node dying at any moment after
    # the `ack` never loses it, and the widget sends again what was not acknowledged.
    user_saved: bool = False
    client_id: uuid.UUID | None = None  # the widget's id of the shopper's message (`message.client_id`)
    user_id: uuid.UUID = field(default_factory=uuid.uuid4)  # the shopper's message's row

    def stop(self) -> None:
        """Stop it: the engine request, if one runs, is aborted now, so its KV blocks are freed at once."""
        self.stop_requested = True
        if self.engine is not None:
            self.engine.abort(self.id)


async def run(session: ChatSession, answer: Answer) -> None:
    """The answer to an accepted message, from its keep to its `end` frame (the session's task for it)."""
    try:
        await _generate(session, answer)
    finally:
        answer.ended = True  # also when preparing failed or the task was cancelled


async def _generate(session: ChatSession, answer: Answer) -> None:
    """Keep the message, retrieve and assemble, send what is known at once, generate, then end and record."""
    kept = await _keep(session, answer)
    if kept is not None and not kept.new and kept.answered:
        return  # sent again after its answer had ended: acknowledged, not answered twice
    planned = await _plan(session, answer)
    if planned is None:  # the shopper has the error frame; the console still sees the message
        with contextlib.suppress(Exception):
            await _hold_for_agent(session, answer)
        return
    engine, prepared = planned
    # The console sees the message; when a person has taken the conversation the bot stays silent.
    if await _hold_for_agent(session, answer, held=prepared is None) or prepared is None:
        return
    if prepared.composition.kind == pipeline.HANDOFF:
        await _record_handoff(session)
    if prepared.composition.effects:
        await _record_order_effects(session, prepared.composition.effects)
    answer.plan = prepared
    # What the model saw of the message, with its answer's row (pending until the answer's own write), so a
    # node dying mid-answer leaves both: written before `start`, as a node may die after any token (the
    # failover test kills one right after the first). Only when the keep had to spool (the database did not
    # answer in time) is it not waited for: the message is durable already, and the shopper waited once.
    record = session.record(_user_record(session, answer, prepared.user_content, pending=True))
    if kept is not None and kept.stored:
        await record
    else:
        session.spawn(record)
    session.turns.append(Turn("user", prepared.user_content))
    session.last_shopper_text = answer.text
    if prepared.composition.cards:
        session.shown_cards = list(prepared.composition.cards)
    await _send_known_parts(session, answer.id, prepared)
    if prepared.composition.kind == pipeline.HANDOFF:
        await events.announce_handoff(session.conversation)  # every console of the store hears it now
    answer.result.usage = {"prompt_tokens": len(prepared.token_ids), "completion_tokens": 0, "cached_tokens": 0}
    try:
        await _write(session, engine, answer)
    finally:
        await _finish(session, answer)


async def _keep(session: ChatSession, answer: Answer) -> keeping.Kept | None:
    """Step 0: make the shopper's message durable (the database, or the spool when the database does not
    answer in time) and acknowledge it (`ack`) before anything else; None when it could be saved nowhere
    (then it is answered anyway, and `not_saved` follows its `end`)."""
    try:
        kept = await keeping.keep(_user_record(session, answer, model_text=""))
    except NotSavedError:
        logger.exception("chat message %s could not be saved", answer.user_id)
        return None
    answer.user_saved = True
    if not kept.new:
        # Sent again (the widget did not get the `ack`): the row is there. Its earlier answer ended: nothing
        # more; it was never answered (or that answer was cut): it is answered now, as the same row.
        logger.info("chat message %s sent again; stored once", answer.user_id)
        if session.turns and session.turns[-1] == Turn("user", kept.content):
            session.turns.pop()  # the history already holds it: the prompt must not say it twice
    if answer.client_id is not None:
        answers = kept.new or not kept.answered
        await session.send(
            {
                "type": "ack",
                "client_id": str(answer.client_id),
                "message_id": answer.id if answers and not kept.held else None,
                "duplicate": not kept.new,
            }
        )
    return kept


def _user_record(session: ChatSession, answer: Answer, model_text: str, pending: bool = False) -> MessageRecord:
    """The shopper's message of ``answer`` as a row: always the same id, so each write of it is the same row."""
    return MessageRecord(
        session.conversation.id,
        "user",
        answer.text,
        id=answer.user_id,
        model_text=model_text,
        created_at=answer.received_at,
        client_id=answer.client_id,
        answer_id=uuid.UUID(answer.id) if pending else None,
    )


async def _plan(session: ChatSession, answer: Answer) -> tuple[Any, Plan | None] | None:
    """Steps 1-2 on a worker thread; None (after an error frame) when there is nothing to answer with, a
    None plan when a person has the conversation."""
    try:
        engine = await engine_service.aget_engine()
        started = time.perf_counter()
        prepared = await database_sync_to_async(_plan_unless_held, thread_sensitive=False)(
            session, engine, answer, list(session.turns), session.last_shopper_text, list(session.shown_cards)
        )
        logger.debug("planning the answer took %.0f ms", (time.perf_counter() - started) * 1000)
        return engine, prepared
    except PromptTooLongError as exc:
        error: Frame = {"type": "error", "code": "prompt_too_long", "message": str(exc), "limit": exc.limit}
    except engine_service.EngineUnavailableError as exc:
        error = {"type": "error", "code": "engine_unavailable", "message": str(exc)}
    except Exception:
        logger.exception("preparing an answer failed")
        error = {"type": "error", "code": "internal", "message": "something went wrong; try again"}
    answer.ended = True
    await session.send(error)
    return None


def _plan_unless_held(
    session: ChatSession, engine: Any, answer: Answer, turns: list[Turn], previous: str, shown: list[dict[str, Any]]
) -> Plan | None:
    """On a worker thread: None when a person has the conversation, else the plan (and a handoff it asks for,
    recorded on the conversation by ``_record_handoff``). Reads only: the message was kept before (``_keep``).

    One trip to a worker for all of it. Twenty shoppers writing at once queued for the status read on the
    shared sync thread (up to 180 ms for the last, measured with the load test) before their planning began.
    """
    if events.is_held(session.conversation.id):
        return None
    return pipeline.plan(engine, session.store, turns, answer.text, previous, shown=shown,
                         conversation=session.conversation)


async def _hold_for_agent(session: ChatSession, answer: Answer, held: bool | None = None) -> bool:
    """A shopper's (valid) message: shown to the console; True when a person has the conversation, and then
    the bot stays silent: the message is logged and kept in the transcript the bot will see after a hand back.

    ``held``: ``events.is_held`` as already read (on the thread that plans the answer, so a message costs one
    trip to a worker thread, not two); None reads it here.
    """
    text = answer.text
    if held is None:
        held = await database_sync_to_async(events.is_held)(session.conversation.id)
    await events.shopper_message(session.conversation, text, held)
    if held:
        content = user_turn_content(text, "")
        session.turns.append(Turn("user", content))
        await session.record_or_report(_user_record(session, answer, model_text=content))
    return held


async def _record_handoff(session: ChatSession) -> None:
    """The shopper asked for a person: recorded on the conversation within the writes' deadline (a hung
    database delays the reply that long at most; the write goes on and lands when the database is back)."""
    try:
        await keeping.within_deadline(functools.partial(handoff.request_handoff, session.conversation))
    except Exception:  # noqa: BLE001 - the reply still goes out; the object holds the request for what follows
        logger.warning("conversation %s: handoff request not recorded in time", session.conversation.id, exc_info=True)
    # Out of hours the reply says when agents are back; the widget then offers to take an email.
    session.agents_back = None if session.conversation.shopper_email else handoff.agents_back(session.store)


async def _record_order_effects(session: ChatSession, effects: list[Any]) -> None:
    """What the order tools asked for (an order verified, a return request for agents), recorded before the reply
    goes out: the shopper's next message reads it ("and when will it arrive?"), and a request said to be sent is."""
    try:
        made = await keeping.within_deadline(functools.partial(conversations.apply, session.conversation, effects))
    except Exception:  # noqa: BLE001 - the reply still goes out; the shopper can ask again
        logger.warning("conversation %s: order effects not recorded", session.conversation.id, exc_info=True)
        return
    for request in made:  # its order is loaded with it (``apply``): no query here, on the event loop
        await events.order_request_created(request)


async def _send_known_parts(session: ChatSession, message_id: str, prepared: Plan) -> None:
    """`start`, the product cards and the policy quotes: from the catalog, before the model's first token."""
    composition = prepared.composition
    await session.send({"type": "start", "message_id": message_id})
    if composition.cards:
        await session.send({"type": "products", "message_id": message_id, "items": composition.cards})
    if composition.quotes:
        await session.send({"type": "sources", "message_id": message_id, "items": composition.quotes})


async def _write(session: ChatSession, engine: Any, answer: Answer) -> None:
    """Step 3: the fixed reply, or the model's answer streamed through the checker or the filters."""
    prepared, result = answer.plan, answer.result
    assert prepared is not None
    if prepared.composition.fixed:
        result.parts.append(prepared.composition.reply)
        result.finish_reason = pipeline.FINISH_FIXED
        await _answer_token(session, answer, prepared.composition.reply)
        return
    if answer.stop_requested:  # stop arrived while retrieval ran: never start the request
        result.finish_reason = "abort"
        return
    answer.engine = engine
    # What the web side spent before the engine got the request (retrieval, assembly, thread hops).
    prepare_ms = round((time.perf_counter() - answer.received) * 1000, 1)
    try:
        pieces = pipeline.generate(
            engine, answer.id, prepared, result, session_id=str(session.conversation.id), cache_salt=session.store.cache_salt
        )
        async with contextlib.aclosing(pieces):
            async for piece in pieces:
                await _answer_token(session, answer, piece)
    except asyncio.CancelledError:
        result.finish_reason = "abort"
        raise
    except Exception:
        logger.exception("generation failed for %s", answer.id)
        result.finish_reason = "error"
    finally:
        answer.engine = None
        result.timing = {**(result.timing or {}), "prepare_ms": prepare_ms}


async def _answer_token(session: ChatSession, answer: Answer, text: str) -> None:
    await session.emit_token(answer.id, text)
    if answer.first_token is None:
        answer.first_token = time.perf_counter()


async def _finish(session: ChatSession, answer: Answer) -> None:
    """Step 4: record the answer, then send the `end` frame.

    In that order so that an answer the shopper has seen end is in the history: a server stopped right after
    `end` (a deploy, a restart) lost the answer when the write came second. The write is one row (or one
    Celery message), a few milliseconds after the last token.
    """
    prepared, result = answer.plan, answer.result
    assert prepared is not None
    finish = result.finish_reason or ("abort" if answer.stop_requested else "error")
    text = result.text
    if text:
        session.turns.append(Turn("assistant", text))
    record = MessageRecord(
        session.conversation.id,
        "assistant",
        text,
        id=uuid.UUID(answer.id),
        products=prepared.composition.cards,
        quotes=prepared.composition.quotes,
        finish_reason=finish,
        usage=result.usage,
        first_token_ms=None if answer.first_token is None else round((answer.first_token - answer.received) * 1000),
        kind=prepared.composition.answer_kind,
    )
    answer_saved = await asyncio.shield(session.record(record))
    end: Frame = {"type": "end", "message_id": answer.id, "finish_reason": finish, "usage": result.usage}
    if prepared.composition.fixed:
        end["reply"] = prepared.composition.kind
        if prepared.composition.kind == pipeline.HANDOFF and session.agents_back:
            end["ask_email"] = session.agents_back  # nobody is there: the widget offers an email field
    else:
        # The answer as kept (it replaces what was streamed), and how much of it the model wrote.
        end.update(text=text, model_sentences=result.model_sentences, model_text=prepared.model_text)
    if result.timing:
        end["timing"] = result.timing
    answer.ended = True  # the next message may come as soon as the shopper sees `end`
    await session.send(end)
    if not (answer.user_saved and answer_saved):
        # After `end`, so a client's answer is complete and its input free; the text lets it offer a resend.
        await session.send(frames.not_saved(answer.text, answer.id, answer.client_id))
