"""The answer pipeline, step by step: retrieve and compose, open, assemble the prompt, generate, (the session) record.

``plan`` does everything that blocks (database reads, embeddings, tokenizer) and runs on a worker thread; it writes
nothing, so the studio's preview and the evaluation plan exactly as the chat does. It decides
the answer's kind (``composition``), composes its opening from the store's data (``opening``) and assembles the
prompt with that opening as the start of the assistant's turn. ``generate`` streams the opening at once, then
the model's continuation as the store's ``model_text`` setting says: "checked" (the default) shows it sentence
by sentence, each one only after ``checker`` found it supported, and ends the answer at the first that is not;
"unchecked" streams it as it comes through the loop detector and the figure filter; "off" shows the opening alone.
Either way an answer never ends mid-sentence. The session (``session.py``) sends the frames and records.

The shopper's language is detected once per message (``catalog.language.detect``) and everything ``plan`` composes
(the tools' replies, the opening) is composed under ``translation.override`` of it: the fixed sentences come in the
shopper's language (``shop_assistant/locale``), the store's own words as they are. ``Plan.language`` keeps it.

The owner's prompt steers what is composed (``answers.owner``, its guidance read once per prompt text by
``prompts.guidance``): its language, when it names one, replaces the shopper's for the composed sentences; its
suggestions and what it says to avoid change the cards; its greeting, sign-off and brevity the text.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from django.utils import translation

from catalog import freshness, passages
from catalog import language as shopper_language
from catalog.grounding import product_types
from catalog.models import Store
from shop_assistant.prompts import guidance as owner_guidance
from shop_assistant.prompts.models import PromptVersion, published_prompt

from . import continuation
from shop_assistant.runtime import engine_service, metrics
from .checker import Evidence
from ..answers import owner
from ..answers.composition import HANDOFF, Composition
from ..answers.understanding import Understood, understand
from .decoding import (
    FINISH_FIXED,
    FINISH_REPETITION,
    FINISH_UNSUPPORTED_FIGURE,
    QUOTED_ANSWER_MAX_TOKENS,
    Decoding,
    FigureFilter,
    LoopDetector,
    allowed_figures,
    decoding_for,
)
from ..answers.opening import Opening, opening_for
from ..answers.prompting import Turn, assemble, user_turn_content
from ..answers.retrieval import retrieve
from .sentences import SentenceSplitter
from ..models import AnswerSettings

logger = logging.getLogger(__name__)

FINISH_UNSUPPORTED = continuation.FINISH_UNSUPPORTED
MODEL_TEXT_OFF, MODEL_TEXT_CHECKED, MODEL_TEXT_UNCHECKED = (choice.value for choice in AnswerSettings.ModelText)
__all__ = ["FINISH_FIXED", "FINISH_REPETITION", "FINISH_UNSUPPORTED", "FINISH_UNSUPPORTED_FIGURE", "HANDOFF"]


@dataclass(frozen=True)
class Plan:
    """Everything known before the model's first token."""

    composition: Composition
    user_content: str  # the user turn as the model sees it (kept for byte-identical replay)
    decoding: Decoding
    token_ids: list[int] = field(default_factory=list)  # empty for a fixed reply or with model text off
    max_tokens: int = 0
    # The figures the answer may state: every number the model was given (see ``figures_for``).
    figures: frozenset[Decimal] = frozenset()
    opening: Opening | None = None  # None for a fixed reply
    evidence: Evidence | None = None  # what the model's sentences are checked against
    model_text: str = MODEL_TEXT_CHECKED
    understood: Understood | None = None  # the planner's calls and time (evaluation, logs)
    language: str = shopper_language.DEFAULT  # the language the composed sentences are in (the shopper's or the owner's)
    sign_off: str = ""  # the owner's words after the model's (``generate``); already in the text of a fixed reply

    @property
    def generates(self) -> bool:
        """The engine is asked for a continuation of the opening."""
        return bool(self.token_ids)


@dataclass
class Generated:
    """The answer so far; filled while it streams, so a cancelled answer still has its partial text."""

    parts: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    timing: dict[str, float] | None = None
    model_sentences: int = 0  # the model's sentences shown after the opening
    # The model's sentences not shown, with the checker's reason (the studio preview shows them to the owner).
    dropped: list[dict[str, str]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def answer_budget(decoding: Decoding, composition: Composition, brief: bool = False) -> int:
    """A policy answer next to its quote gets a short budget: the quote carries the fact, and a small model
    given room drifts from it into made-up rules and figures. ``brief``: the owner asked for brevity, half."""
    budget = decoding.max_tokens
    if composition.quotes and not composition.cards:
        budget = min(decoding.max_tokens, QUOTED_ANSWER_MAX_TOKENS)
    return max(1, budget // 2) if brief else budget


def figures_for(
    system_prompt: str, turns: Sequence[Turn], content: str, composition: Composition
) -> frozenset[Decimal]:
    """What the answer may quote: the store's prompt and policies, the earlier turns (each user turn keeps its
    catalog results; earlier answers passed this filter), this turn's facts and the shopper's own words (a
    "$150" budget), the cards' prices and the quotes shown."""
    return allowed_figures(
        system_prompt,
        content,
        *(turn.content for turn in turns),
        *(str(card.get("price") or "") for card in composition.cards),
        *(quote["text"] for quote in composition.quotes),
    )


def evidence_for(
    store: Store,
    text: str,
    composition: Composition,
    opening: Opening,
    turns: Sequence[Turn],
    system_prompt: str,
    documents: Sequence[str],
    language: str = shopper_language.DEFAULT,
) -> Evidence:
    """``documents``: the bodies of the store's documents (its passages' index keeps them); ``language``: the
    answer's (``Plan.language``)."""
    return Evidence(
        question=text,
        opening=opening.text,
        products=tuple(composition.products),
        quotes=tuple(quote["text"] for quote in composition.quotes),
        documents=(*documents, system_prompt),
        store_name=store.name,
        history=tuple(turn.content for turn in turns[-6:]),
        language=language,
    )


class NoPublishedPromptError(Exception):
    """The store has no published prompt: every store gets one when it is created (``studio.receivers``), so
    someone removed it; the owner publishes one in the studio."""

    def __init__(self, store: Store) -> None:
        super().__init__(f"the store {store.slug!r} has no published prompt; publish one in the studio")


def plan(
    engine: Any,
    store: Store,
    turns: Sequence[Turn],
    text: str,
    previous: str = "",
    version: PromptVersion | None = None,
    shown: Sequence[dict[str, Any]] = (),
    conversation: Any = None,
) -> Plan:
    """Steps 1 and 2, blocking and read-only: compose the answer from the catalog, open, assemble the prompt.

    ``previous``: the shopper's message before this one, for follow-ups ("anything cheaper?"); ``shown``: the
    cards of the latest answer that had some, for follow-ups about them ("which of those is lighter?").
    ``version``: the prompt version to answer under (default: the published one; the studio's preview passes a
    draft). A handoff the composition asks for is the caller's to record (``handoff.request_handoff``).

    The catalog is one snapshot for the whole plan: its stamp is read once (``catalog.freshness``) and the indexes
    built from it (products, passages, the documents' bodies) are the process's, rebuilt only when it changes.
    Everything is composed in the language ``text`` is written in, or the one the version's prompt says to answer
    in (``Plan.language``).
    """
    if version is None:
        version = published_prompt(store)
        if version is None:
            raise NoPublishedPromptError(store)
    guidance = owner_guidance.for_version(version)  # read once per prompt text, not per message
    # One language per message: every sentence composed for it is in the same one.
    lang = guidance.language or shopper_language.detect(text, earlier=previous)
    with freshness.one_read(), translation.override(lang):
        planned = _plan(engine, store, turns, text, previous, version, shown, conversation, guidance, lang)
        return replace(planned, language=lang)


def _plan(
    engine: Any,
    store: Store,
    turns: Sequence[Turn],
    text: str,
    previous: str,
    version: PromptVersion | None,
    shown: Sequence[dict[str, Any]],
    conversation: Any,
    guidance: owner_guidance.Guidance,
    lang: str,
) -> Plan:
    # The store's documents are the only source of a quote: the prompt is never searched (one copy of a policy).
    understood = understand(store, text, retrieve, previous, shown, engine=engine, prompt=version.full_text(),
                            conversation=conversation)
    composition = understood.composition
    # The owner's guidance, one step over whatever tool answered: avoided cards out, suggested cards in.
    steered = owner.steer(guidance, store, composition)
    decoding = decoding_for(store)
    content = user_turn_content(text, composition.facts)
    if composition.fixed:
        composition.reply = owner.finish(guidance, composition.reply, steered.after)
        return Plan(composition, content, decoding, understood=understood)
    types = product_types(store, limit=3) if not (composition.products or composition.answers) else []
    # The passages' index, built once per catalog change (retrieval has just looked it up).
    index = passages.store_index(store)
    described = index.described_words if composition.products else frozenset()
    opening = opening_for(store, understood.reading or text, composition.products, composition.answers, types, described)
    if composition.lead:  # the other tools' sentences (a total) before the products or the quote
        opening = Opening(" ".join([*composition.lead, opening.text]), opening.kind)
    mode = AnswerSettings.of(store).model_text or MODEL_TEXT_CHECKED
    # Without model text the opening is the whole answer: the owner's sign-off closes it here.
    opening = Opening(owner.finish(guidance, opening.text, steered.after, closing=mode == MODEL_TEXT_OFF), opening.kind)
    sign_off = guidance.tone.sign_off if mode != MODEL_TEXT_OFF else ""
    system_prompt = version.full_text()
    evidence = evidence_for(store, text, composition, opening, turns, system_prompt, index.documents, lang)
    figures = figures_for(system_prompt, turns, content, composition)
    if mode == MODEL_TEXT_OFF:
        return Plan(composition, content, decoding, figures=figures, opening=opening, evidence=evidence, model_text=mode,
                    understood=understood)
    with engine.tokenizer_held():
        assembled = assemble(
            engine.tokenizer,
            system_prompt,
            turns,
            content,
            max_model_len=engine.max_model_len,
            max_tokens=answer_budget(decoding, composition, guidance.tone.brief),
            answer_prefix=opening.text,
        )
    return Plan(
        composition, content, decoding, assembled.token_ids, assembled.max_tokens, figures, opening, evidence, mode,
        understood, sign_off=sign_off,
    )


async def generate(
    engine: Any,
    request_id: str,
    prepared: Plan,
    result: Generated,
    *,
    session_id: str | None,
    cache_salt: str,
) -> AsyncIterator[str]:
    """Step 3: stream the answer into ``result``, yielding each piece of text as it may be shown: the opening,
    then what the store's ``model_text`` setting lets through of the model's continuation.

    When the checker or a filter ends the answer, the engine request is aborted at once (its KV blocks freed on the
    engine's next turn); a cancel or an error closes the stream, which aborts it too.
    """
    assert prepared.opening is not None, "a fixed reply has nothing to generate"
    result.parts.append(prepared.opening.text)
    yield prepared.opening.text
    if not prepared.generates:
        result.finish_reason = "stop"
        return
    # aclosing: the caller closing this stream (a stop, a cancel) closes the continuation now, which aborts it.
    async with contextlib.aclosing(_continued(engine, request_id, prepared, result, session_id, cache_salt)) as pieces:
        async for piece in pieces:
            yield piece
    if prepared.sign_off and result.finish_reason != "abort":
        # The owner's sign-off closes the answer, after the model's last kept sentence.
        piece = " " + prepared.sign_off
        result.parts.append(piece)
        yield piece


async def _continued(
    engine: Any, request_id: str, prepared: Plan, result: Generated, session_id: str | None, cache_salt: str
) -> AsyncIterator[str]:
    """The model's continuation of the opening, as the store's ``model_text`` setting lets it through."""
    candidates = prepared.decoding.candidates if prepared.model_text == MODEL_TEXT_CHECKED else 1
    stream = engine.stream(
        request_id,
        prepared.token_ids,
        prepared.decoding.sampling_params(prepared.max_tokens, n=candidates),
        session_id=session_id,
        cache_salt=cache_salt,
        priority=engine_service.CHAT_PRIORITY,  # before the /v1 API's requests
    )
    continuation = _checked if prepared.model_text == MODEL_TEXT_CHECKED else _unchecked
    # aclosing: a cancel or an error closes the stream now, which aborts the request and frees its blocks.
    async with contextlib.aclosing(stream):
        async for piece in continuation(stream, prepared, result):
            yield piece
        if not getattr(stream, "finished", True):
            # The checker or a filter ended the answer: the request is aborted, and its last delta still read for
            # the usage (cached tokens) and timing the `end` frame reports. It comes with the engine's next turn.
            engine.abort(request_id)
            async for delta in stream:
                _account(delta, result)


def _observe(delta: Any, result: Generated) -> None:
    """The engine's bookkeeping of a delta: finish reason, usage and timing."""
    if delta.finish_reason:
        result.finish_reason = delta.finish_reason
    _account(delta, result)


def _account(delta: Any, result: Generated) -> None:
    """Usage and timing, from the request's last delta."""
    if delta.usage is not None:
        result.usage = delta.usage.as_dict()
        metrics.observe_request(delta.metrics, delta.usage, delta.finish_reason)
    if delta.metrics is not None:
        result.timing = delta.metrics.timing_ms()


async def _checked(stream: AsyncIterator[Any], prepared: Plan, result: Generated) -> AsyncIterator[str]:
    """The model's sentences, each shown once the checker found it supported (``continuation``)."""
    assert prepared.evidence is not None and prepared.opening is not None
    pieces = continuation.checked(
        stream, prepared.evidence, prepared.opening.text, prepared.decoding.candidates, lambda d: _observe(d, result)
    )
    async with contextlib.aclosing(pieces):
        async for piece in pieces:
            if isinstance(piece, continuation.Candidate):
                result.finish_reason = piece.finish_reason
                result.model_sentences = piece.sentences
                result.dropped = piece.dropped
            else:
                result.parts.append(piece)
                yield piece


async def _unchecked(stream: AsyncIterator[Any], prepared: Plan, result: Generated) -> AsyncIterator[str]:
    """The model's text as it comes, through the loop detector and the figure filter; a sentence cut by the budget
    is taken back at the end (``end.text``)."""
    loops = LoopDetector()
    figures = FigureFilter(prepared.figures)
    opening = result.text
    async for delta in stream:
        if delta.text:
            shown = figures.feed(delta.text)
            if shown:
                result.parts.append(shown)
                yield shown
            if figures.tripped:
                _refused(result, figures, opening)
                return
            if loops.feed(delta.text):
                # The held tail (a figure still forming) is checked as it stands: it may be shown.
                tail = _finish_figures(result, figures, opening)
                if tail:
                    yield tail
                if not figures.tripped:
                    result.finish_reason = FINISH_REPETITION
                _end_on_a_sentence(result, opening)
                return
        _observe(delta, result)
    tail = _finish_figures(result, figures, opening)
    if tail:
        yield tail
    _end_on_a_sentence(result, opening)


def _finish_figures(result: Generated, figures: FigureFilter, opening: str) -> str:
    """The filter's held tail, checked now that no more text comes: what of it may be shown ("" if nothing)."""
    tail = figures.finish()
    if tail:
        result.parts.append(tail)
    if figures.tripped:
        _refused(result, figures, opening)
    return tail


def _refused(result: Generated, figures: FigureFilter, opening: str) -> None:
    """The answer ends before the refused figure; what was streamed of its sentence is taken back."""
    # Logged so that a store owner's question "why did the answer stop?" has an answer, and made-up figures can
    # be counted per store.
    logger.info("answer cut before a figure nobody gave the model: %r", figures.refused)
    result.finish_reason = FINISH_UNSUPPORTED_FIGURE
    kept = opening + (figures.kept or "")
    # What was streamed of the refused figure's sentence is taken back: ``end.text`` is the answer as kept.
    result.parts = [kept]


def _end_on_a_sentence(result: Generated, opening: str) -> None:
    """Take back the tail of a sentence the answer stopped in (the budget ran out, a filter tripped)."""
    splitter = SentenceSplitter()
    kept = [sentence.separator + sentence.text for sentence in splitter.feed(result.text[len(opening) :] + " ")]
    last, _ = splitter.finish(ended_by_model=result.finish_reason == "stop")
    if last is not None:
        kept.append(last.separator + last.text)
    result.parts = [opening + "".join(kept)]
