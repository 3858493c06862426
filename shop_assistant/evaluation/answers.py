"""Answer-quality evaluation: shopper questions through the websocket's own pipeline, one fresh session each.

Every question runs in a new ``ChatSession`` (the object the consumer drives), so retrieval, composition,
decoding, the sentence checker and recording are exactly what a shopper gets; only the transport is left out. The
checks are plain text rules, the same for every model, so a run can be compared with an earlier one: the facts on
screen (cards, quotes, fixed replies), and the words (``words``: unsupported, disowning, narrating, contradicting a
quote, cut or empty), judged by rules of the evaluation's own, apart from the checker that chose them.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from catalog.text import any_word

from shop_assistant.chat.guard.decoding import words_of
from . import instructions
from . import words as word_rules

QUESTIONS_PATH = Path(__file__).resolve().parent / "questions.json"
SAMPLES_DIR = Path(__file__).resolve().parents[2] / "catalog" / "samples" / "shopify"
SAMPLE_STORES = {f"shopify-{path.stem}": path for path in sorted(SAMPLES_DIR.glob("*.csv"))}

# The bar ("Done when"); the CI test fails under it.
THRESHOLDS = {
    "loops": 0,
    "human_claims": 0,
    "unsupported_figures": 0,
    "unsupported_shown": 0,
    "checker_flags": 0,
    "disowning": 0,
    "narrating": 0,
    "contradicting": 0,
    "cut": 0,
    "empty": 0,
    "median_words": 80,
    "product_in_cards": 0.90,
    "fact_on_screen": 0.95,
    "no_match_handled": 0.90,
    "handoff_recorded": 1.0,
}
LOOP_NGRAM = 5
LOOP_REPEATS = 3
HUMAN_CLAIM = any_word(
    r"(?:i\s*am|i['’]m|im)\s+(?:a\s+|an\s+|your\s+|the\s+)?(?:real\s+|actual\s+|live\s+)?(?:human|person)",
    "human agent here",
    r"i\s*am\s+not\s+a\s+(?:bot|robot|machine|ai)",
    r"i['’]m\s+not\s+a\s+(?:bot|robot|ai)",
)
# Money and percentages as a shopper reads them; written apart from the figure filter (decoding.FigureFilter), so
# the evaluation checks the guard instead of repeating it.
_SHOWN_FIGURE = re.compile(
    r"[$€£]\s?(\d[\d,]*(?:\.\d+)?)|(\d[\d,]*(?:\.\d+)?)\s?(?:%|percent\b|(?:usd|eur|gbp|dollars?|euros?)\b)",
    re.IGNORECASE,
)
_PLAIN_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_NO_MATCH_WORDS = re.compile(r"\b(?:don['’]t|do not|doesn['’]t|couldn['’]t|could not|can['’]t|cannot)\s+"
                             r"(?:carry|sell|have|stock|find)\b|\bno (?:product|match)", re.IGNORECASE)


@dataclass
class Question:
    store: str
    text: str
    expect: dict[str, Any]
    subset: bool = False


@dataclass
class Outcome:
    store: str
    question: str
    answer: str = ""
    finish_reason: str = ""
    reply: str = ""  # "no_match" / "handoff" for a fixed reply, "" for a model answer
    cards: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    words: int = 0
    loop: bool = False
    human_claim: bool = False
    unsupported_figures: list[str] = field(default_factory=list)  # money/percent figures nobody gave the model
    product_in_cards: bool | None = None  # None: not asked of this question
    fact_on_screen: bool | None = None
    no_match_handled: bool | None = None
    handoff_recorded: bool | None = None
    # The words, judged from the final on-screen text (``words``).
    model_sentences: int = 0  # the model's sentences kept after the opening
    unsupported_shown: list[str] = field(default_factory=list)
    checker_flags: list[str] = field(default_factory=list)  # shown sentences the chat's own checker rejects
    disowning: list[str] = field(default_factory=list)
    narrating: list[str] = field(default_factory=list)
    contradicting: list[str] = field(default_factory=list)
    cut: bool = False
    empty: bool = False
    first_token_ms: float | None = None  # from sending the message to the first text on screen
    # The owner's prompt followed (``instructions.checks``: language, suggestions, avoided things, tone), when the
    # answer was given under a prompt version (the studio's score).
    instructions: dict[str, bool] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""


def load_questions(path: str | Path | None = None, *, subset: bool = False) -> list[Question]:
    raw = json.loads(Path(path or QUESTIONS_PATH).read_text())
    questions = [Question(**item) for item in raw]
    return [q for q in questions if q.subset] if subset else questions


def is_loop(text: str, n: int = LOOP_NGRAM, repeats: int = LOOP_REPEATS) -> bool:
    """The issue's definition of a looping answer: some n-word phrase three or more times."""
    words = words_of(text)
    counts = Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return any(count >= repeats for count in counts.values())


def claims_human(text: str) -> bool:
    return bool(HUMAN_CLAIM.search(text))


def _value(number: str) -> Decimal:
    return Decimal(number.replace(",", "").rstrip("."))


def unsupported_figures(answer: str, allowed_texts: list[str]) -> list[str]:
    """The money and percent figures of ``answer`` whose value is in none of ``allowed_texts`` (the cards'
    prices, the quotes, the facts the model was given, the store's prompt and the shopper's question)."""
    allowed = {_value(number) for text in allowed_texts for number in _PLAIN_NUMBER.findall(text)}
    return [
        match.group().strip()
        for match in _SHOWN_FIGURE.finditer(answer)
        if _value(match.group(1) or match.group(2)) not in allowed
    ]


def ensure_stores(slugs: set[str]) -> None:
    """Create the stores the questions need: the demo store and the Shopify samples (idempotent)."""
    from shop_assistant.demo.store import load_demo_store
    from catalog.embeddings import embed_products
    from catalog.ingest import read_source
    from catalog.ingest.upsert import apply_catalog
    from catalog.models import Store

    if "demo" in slugs and not Store.objects.filter(slug="demo").exists():
        load_demo_store()
    for slug in sorted(slugs & SAMPLE_STORES.keys()):
        if Store.objects.filter(slug=slug).exists():
            continue
        title = SAMPLE_STORES[slug].stem.replace("-", " ").title()
        store = Store.objects.create(slug=slug, name=f"Sample {title}", currency="USD",
                                     base_url=f"https://{slug}.example")
        apply_catalog(store, read_source("shopify", str(SAMPLE_STORES[slug])))
        embed_products(store)


class FrameListener:
    """The ``send`` a ``ChatSession`` is opened with: it keeps the frames of the answer being waited for and when
    its first text came. One answer at a time (``say``), as the widget sends a message only after the last `end`."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.first_text_ms: float | None = None  # from sending the message to the first text on screen
        self._done = asyncio.Event()
        self._sent_at: float | None = None

    async def send(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)
        if frame["type"] == "token" and self.first_text_ms is None and self._sent_at is not None:
            self.first_text_ms = round((time.perf_counter() - self._sent_at) * 1000, 1)
        if frame["type"] in {"end", "error"}:
            self._done.set()

    async def say(self, session: Any, text: str, timeout: float = 600) -> list[dict[str, Any]]:
        """Send the shopper's ``text`` and wait until its answer ended and was recorded; its frames."""
        self.frames, self.first_text_ms = [], None
        self._done.clear()
        self._sent_at = time.perf_counter()
        await session.receive(json.dumps({"type": "message", "text": text}))
        await asyncio.wait_for(self._done.wait(), timeout=timeout)
        await session.wait_idle()  # the answer is recorded (and a handoff saved) before anyone looks
        return self.frames


async def ask(question: Question) -> Outcome:
    """One question in a fresh session; the outcome holds what the shopper would have seen."""
    from channels.db import database_sync_to_async

    from shop_assistant.chat.models import Conversation, Message
    from shop_assistant.prompts.models import published_prompt

    from shop_assistant.chat.protocol.session import ChatSession

    listener = FrameListener()
    outcome = Outcome(store=question.store, question=question.text)
    started = time.perf_counter()
    session = await ChatSession.open(store_slug=question.store, resume_token=None, send=listener.send)
    if session is None:
        outcome.error = f"no store {question.store!r}"
        return outcome
    frames = await listener.say(session, question.text)
    outcome.seconds = round(time.perf_counter() - started, 2)
    outcome.first_token_ms = listener.first_text_ms
    allowed = read_frames(outcome, frames)

    def given_to_model() -> list[str]:
        conversation = Conversation.objects.get(pk=session.conversation.pk)
        prompt = published_prompt(conversation.store)
        facts = Message.objects.filter(conversation=conversation, role="user").values_list("model_text", flat=True)
        return [conversation, prompt.full_text() if prompt else "", *facts]

    conversation, *given = await database_sync_to_async(given_to_model)()
    outcome.unsupported_figures = unsupported_figures(outcome.answer, allowed + given)
    _judge(question, outcome, conversation)
    if not outcome.error:
        await database_sync_to_async(_judge_words)(question, outcome, frames)
    await session.close()
    return outcome


def read_frames(outcome: Outcome, frames: list[dict[str, Any]]) -> list[str]:
    """Fill ``outcome`` with what the frames put on the shopper's screen; returns the texts whose figures the
    answer may state (the question, the cards' prices, the quotes)."""
    parts = []
    allowed = [outcome.question]
    for frame in frames:
        kind = frame["type"]
        if kind == "token":
            parts.append(frame["text"])
        elif kind == "products":
            outcome.cards = [item["title"] for item in frame["items"]]
            allowed += [str(item.get("price") or "") for item in frame["items"]]
        elif kind == "sources":
            outcome.sources = [item["text"] for item in frame["items"]]
            allowed += outcome.sources
        elif kind == "end":
            outcome.finish_reason = frame["finish_reason"]
            outcome.reply = frame.get("reply", "")
            outcome.model_sentences = int(frame.get("model_sentences", 0))
        elif kind == "error":
            outcome.error = f"{frame['code']}: {frame['message']}"
    # What stays on screen: the `end` frame's text is the answer as kept.
    outcome.answer = next((f["text"] for f in frames if f["type"] == "end" and "text" in f), "".join(parts))
    return allowed


def judge_version_answer(question: Question, frames: list[dict[str, Any]], version: Any, facts: str) -> Outcome:
    """An answer given under one prompt version without a conversation (the studio's scoring of a draft), judged
    by the same rules as ``ask``'s. ``facts``: the user turn as the model saw it. Blocking (database, tokenizer).

    Nothing is recorded, so a handoff counts as handled when the answer was the handoff reply."""
    outcome = Outcome(store=question.store, question=question.text)
    allowed = read_frames(outcome, frames)
    outcome.unsupported_figures = unsupported_figures(outcome.answer, [*allowed, version.full_text(), facts])
    _judge(question, outcome, None)
    if not outcome.error:
        _judge_words(question, outcome, frames, version=version)
        from catalog.models import Store
        from shop_assistant.prompts.guidance import for_version

        store = Store.objects.get(slug=question.store)
        outcome.instructions = instructions.checks(for_version(version), store, question.text, frames, outcome.answer)
    return outcome


def checks(outcome: Outcome) -> dict[str, bool]:
    """The evaluation's rules for one answer, each passed or not (the thresholds of ``failures`` that apply to a
    single answer; an answer that failed to come passes none). Expectations a question does not have are left out."""
    results = {
        "answered": not outcome.error,
        "no_loop": not outcome.loop,
        "no_human_claim": not outcome.human_claim,
        "no_unsupported_figures": not outcome.unsupported_figures,
        "no_unsupported_shown": not outcome.unsupported_shown,
        "no_checker_flags": not outcome.checker_flags,
        "no_disowning": not outcome.disowning,
        "no_narrating": not outcome.narrating,
        "no_contradicting": not outcome.contradicting,
        "not_cut": not outcome.cut,
        "not_empty": not outcome.empty,
        "short": outcome.words <= 150,  # ``summarize``'s over_150_words
    }
    for name in ("product_in_cards", "fact_on_screen", "no_match_handled", "handoff_recorded"):
        value = getattr(outcome, name)
        if value is not None:
            results[name] = bool(value)
    results.update(outcome.instructions)
    if outcome.error:
        return {name: False for name in results}
    return results


def _judge_words(question: Question, outcome: Outcome, frames: list[dict[str, Any]], version: Any = None) -> None:
    """The words on screen, by the evaluation's own rules (``words``) and by the chat's checker."""
    from catalog.grounding import product_types
    from catalog.models import Store, StoreDocument, Variant
    from shop_assistant.prompts.models import published_prompt

    store = Store.objects.get(slug=question.store)
    prompt = version or published_prompt(store)
    cards = next((f["items"] for f in frames if f["type"] == "products"), [])
    variants = Variant.objects.filter(store=store, sku__in=[card["sku"] for card in cards]).select_related("product")
    products = [_catalog_row(variant) for variant in variants]
    documents = list(StoreDocument.objects.filter(store=store).values_list("body", flat=True))
    evidence = "\n".join(
        [question.text, store.name, " ".join(product_types(store)), prompt.full_text() if prompt else "",
         *(f"{c['title']} {c['price']} {c['currency']}" for c in cards), *outcome.sources, *products, *documents]
    )  # fmt: skip
    titles = [variant.product.title for variant in variants]
    judgement = word_rules.judge(outcome.answer, evidence, outcome.sources, fixed=bool(outcome.reply), titles=titles)
    outcome.unsupported_shown = judgement.unsupported
    outcome.disowning = judgement.disowning
    outcome.narrating = judgement.narrating
    outcome.contradicting = judgement.contradicting
    outcome.cut = judgement.cut
    outcome.empty = judgement.empty
    if not outcome.reply:
        outcome.checker_flags = checker_flags(store, question.text, outcome.answer, version)


def _catalog_row(variant: Any) -> str:
    """A card's catalog rows in words: what the product page would say, prices and stock included."""
    product = variant.product
    regular = variant.compare_at_price if variant.compare_at_price and variant.compare_at_price > variant.price else None
    price = f"price {variant.price} {variant.currency}" + (
        f" on sale down from {regular}" if regular else " regular prices"
    )
    stock = "in stock now" if variant.in_stock else "out of stock sold out"
    return " ".join((product.title, variant.title, price, stock, product.description, product.tags,
                     product.product_type, product.vendor, " ".join(variant.option_values)))  # fmt: skip


def checker_flags(store: Any, text: str, answer: str, version: Any = None) -> list[str]:
    """The model's sentences on screen that the chat's own checker rejects (none, unless something bypassed it).

    The opening and the evidence come from planning the question again (the same data gives the same ones)."""
    from shop_assistant.chat.guard import checker, pipeline
    from shop_assistant.runtime import engine_service
    from shop_assistant.chat.guard.sentences import SentenceSplitter

    plan = pipeline.plan(engine_service.get_engine(), store, [], text, version=version)
    if plan.opening is None or plan.evidence is None or not answer.startswith(plan.opening.text):
        return [answer] if plan.opening is not None else []
    splitter = SentenceSplitter()
    model = splitter.feed(answer[len(plan.opening.text) :] + " ")
    last, _ = splitter.finish(ended_by_model=True)
    shown, flagged = [plan.opening.text], []
    for sentence in [*model, *([last] if last else [])]:
        if not checker.check(sentence.text, plan.evidence, shown).ok:
            flagged.append(sentence.text)
        shown.append(sentence.text)
    return flagged


def _judge(question: Question, outcome: Outcome, conversation: Any) -> None:
    expect = question.expect
    text = outcome.answer
    outcome.words = len(text.split())
    outcome.loop = is_loop(text)
    outcome.human_claim = claims_human(text)
    if "product" in expect:
        wanted = expect["product"].lower()
        outcome.product_in_cards = any(wanted in title.lower() for title in outcome.cards[:3])
    if "fact" in expect:
        fact = expect["fact"].lower()
        outcome.fact_on_screen = fact in text.lower() or any(fact in source.lower() for source in outcome.sources)
    if expect.get("no_match"):
        outcome.no_match_handled = handles_no_match(outcome.reply, text, outcome.cards)
    if expect.get("handoff"):
        if conversation is None:  # nothing recorded (a studio score): the answer must be the handoff reply
            outcome.handoff_recorded = outcome.reply == "handoff"
        else:
            outcome.handoff_recorded = handoff_recorded(conversation)


def handles_no_match(reply: str, text: str, cards: list[Any]) -> bool:
    """A request the catalog has nothing for: no cards, and the fixed no-match reply or words saying so."""
    return not cards and (reply == "no_match" or bool(_NO_MATCH_WORDS.search(text)))


def handoff_recorded(conversation: Any) -> bool:
    """The conversation (as read from the database) waits for a person: the request was recorded."""
    return conversation.status == "handoff" and conversation.handoff_requested_at is not None


def _rate(values: list[bool | None]) -> float | None:
    asked = [value for value in values if value is not None]
    return round(sum(asked) / len(asked), 3) if asked else None


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    words = [o.words for o in outcomes if o.answer]
    firsts = [o.first_token_ms for o in outcomes if o.first_token_ms is not None]
    model = [o for o in outcomes if not o.reply and not o.error]
    return {
        "questions": len(outcomes),
        "errors": sum(bool(o.error) for o in outcomes),
        "loops": sum(o.loop for o in outcomes),
        "loop_rate": round(sum(o.loop for o in outcomes) / len(outcomes), 3) if outcomes else 0.0,
        "guard_stops": sum(o.finish_reason == "repetition" for o in outcomes),
        "human_claims": sum(o.human_claim for o in outcomes),
        "unsupported_figures": sum(bool(o.unsupported_figures) for o in outcomes),
        "figure_stops": sum(o.finish_reason == "unsupported_figure" for o in outcomes),
        "median_words": statistics.median(words) if words else 0,
        "over_150_words": sum(o.words > 150 for o in outcomes),
        "product_in_cards": _rate([o.product_in_cards for o in outcomes]),
        "fact_on_screen": _rate([o.fact_on_screen for o in outcomes]),
        "no_match_handled": _rate([o.no_match_handled for o in outcomes]),
        "handoff_recorded": _rate([o.handoff_recorded for o in outcomes]),
        "unsupported_shown": sum(bool(o.unsupported_shown) for o in outcomes),
        "checker_flags": sum(bool(o.checker_flags) for o in outcomes),
        "disowning": sum(bool(o.disowning) for o in outcomes),
        "narrating": sum(bool(o.narrating) for o in outcomes),
        "contradicting": sum(bool(o.contradicting) for o in outcomes),
        "cut": sum(o.cut for o in outcomes),
        "empty": sum(o.empty for o in outcomes),
        "model_sentences": sum(o.model_sentences for o in model),
        "answers_with_model_text": sum(o.model_sentences > 0 for o in model),
        "first_token_ms_median": round(statistics.median(firsts), 1) if firsts else None,
        "seconds": round(sum(o.seconds for o in outcomes), 1),
    }


RATES = ("product_in_cards", "fact_on_screen", "no_match_handled", "handoff_recorded")
WORD_CHECKS = ("unsupported_shown", "checker_flags", "disowning", "narrating", "contradicting", "cut", "empty")


def misses(summary: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The thresholds a summary misses, as (name, value, threshold): counts and the median length over their
    threshold, rates (``RATES``) under it. Empty: it passes."""
    missed: list[tuple[str, Any, Any]] = []
    if summary["errors"]:
        missed.append(("errors", summary["errors"], 0))
    for name in ("loops", "human_claims", "unsupported_figures", *WORD_CHECKS, "median_words"):
        if summary[name] > THRESHOLDS[name]:
            missed.append((name, summary[name], THRESHOLDS[name]))
    for name in RATES:
        if summary[name] is not None and summary[name] < THRESHOLDS[name]:
            missed.append((name, summary[name], THRESHOLDS[name]))
    return missed


def failures(summary: dict[str, Any]) -> list[str]:
    """The thresholds a summary misses, one line each ("loops 1 > 0"); empty: it passes."""
    return [f"{name} {value} {'<' if name in RATES else '>'} {bar}" for name, value, bar in misses(summary)]


async def evaluate(questions: list[Question], progress: Any = None) -> tuple[list[Outcome], dict[str, Any]]:
    outcomes = []
    for question in questions:
        outcome = await ask(question)
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome)
    return outcomes, summarize(outcomes)


def report_json(outcomes: list[Outcome], summary: dict[str, Any]) -> dict[str, Any]:
    return {"summary": summary, "failures": failures(summary), "questions": [asdict(o) for o in outcomes]}
