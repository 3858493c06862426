"""shop_assistant.chat.guard.pipeline: the opening, the model's continuation as the store's setting says, what it may quote.

The engine here replays scripted text: the real model cannot be made to write a given sentence on demand, and what
is under test is what the pipeline does with the text, not the model (the consumer tests run the real engine).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import translation

from catalog import passages, search
from catalog.grounding import ProductFacts
from catalog.models import Store, StoreDocument, Variant
from inference.outputs import StreamDelta
from shop_assistant.chat.guard import pipeline
from shop_assistant.chat.guard.checker import Evidence
from shop_assistant.chat.answers.composition import MODEL, Composition
from shop_assistant.chat.guard.decoding import FINISH_UNSUPPORTED_FIGURE, QUOTED_ANSWER_MAX_TOKENS, Decoding
from shop_assistant.chat.answers.opening import Opening
from shop_assistant.chat.guard.pipeline import (
    FINISH_UNSUPPORTED,
    HANDOFF,
    Generated,
    NoPublishedPromptError,
    Plan,
    answer_budget,
    figures_for,
    generate,
)
from shop_assistant.chat.answers.prompting import Turn, user_turn_content
from shop_assistant.prompts.models import PromptVersion

FACTS = "Products from the catalog:\n1. Cascade Fleece Jacket - 79.00 USD - in stock [SKU DO-CFJ]"
CARD = {"sku": "DO-CFJ", "title": "Cascade Fleece Jacket", "price": "79.00", "currency": "USD", "url": "",
        "image": "", "in_stock": True}  # fmt: skip
FLEECE = ProductFacts(
    title="Cascade Fleece Jacket", variant="", price=Decimal("79.00"), currency="USD", compare_at_price=None,
    in_stock=True, others_in_stock=False, product_type="Jackets", vendor="Northpeak", tags=("fleece", "layering"),
    options="Size: S, M, L", description="A soft, warm mid layer made from recycled polyester fleece. Wear it on "
    "its own on cool evenings.",
)  # fmt: skip
SYSTEM = "You are the assistant of Demo.\n\nStore policies:\nShipping: orders over $50 ship free."
OPENING = "We have the Cascade Fleece Jacket for 79.00 USD."


class ScriptedEngine:
    """Streams ``pieces`` as the engine would, and notes whether the stream was closed early (an abort)."""

    def __init__(self, pieces: list[str], finish: str = "stop") -> None:
        self.pieces = pieces
        self.finish = finish
        self.sent = 0
        self.closed_early = False

    def stream(self, request_id: str, *args: Any, **kwargs: Any) -> AsyncIterator[StreamDelta]:
        async def deltas() -> AsyncIterator[StreamDelta]:
            try:
                for index, piece in enumerate(self.pieces):
                    self.sent += 1
                    last = index == len(self.pieces) - 1
                    yield StreamDelta(request_id, piece, finish_reason=self.finish if last else None)
            except GeneratorExit:
                self.closed_early = self.sent < len(self.pieces)
                raise

        return deltas()


def test_a_policy_answer_next_to_its_quote_gets_a_short_budget():
    decoding = Decoding(max_tokens=120, temperature=0.0, repetition_penalty=1.0, frequency_penalty=0.0,
                        presence_penalty=0.0)  # fmt: skip
    quote = [{"title": "Returns", "text": "You can return unused items within 30 days."}]
    assert answer_budget(decoding, Composition(MODEL, quotes=quote)) == QUOTED_ANSWER_MAX_TOKENS < 120
    assert answer_budget(decoding, Composition(MODEL, cards=[CARD], quotes=quote)) == 120
    assert answer_budget(decoding, Composition(MODEL, cards=[CARD])) == 120


def plan_for(shopper: str, model_text: str = "checked") -> Plan:
    composition = Composition(MODEL, facts=FACTS, cards=[CARD], products=[FLEECE])
    content = user_turn_content(shopper, FACTS)
    decoding = Decoding(max_tokens=64, temperature=0.0, repetition_penalty=1.0, frequency_penalty=0.0,
                        presence_penalty=0.0)  # fmt: skip
    evidence = Evidence(question=shopper, opening=OPENING, products=(FLEECE,), documents=(SYSTEM,),
                        store_name="Demo Outfitters")  # fmt: skip
    token_ids = [] if model_text == "off" else [1, 2, 3]
    return Plan(composition, content, decoding, token_ids, 64, figures_for(SYSTEM, [], content, composition),
                Opening(OPENING, "product"), evidence, model_text)  # fmt: skip


async def run(
    pieces: list[str], shopper: str = "Do you have a fleece?", model_text: str = "checked", finish: str = "stop"
) -> tuple[list[str], Generated, ScriptedEngine]:
    engine = ScriptedEngine(pieces, finish)
    result = Generated()
    plan = plan_for(shopper, model_text)
    shown = [piece async for piece in generate(engine, "r1", plan, result, session_id=None, cache_salt="")]
    return shown, result, engine


def test_the_answer_may_quote_the_catalog_the_store_and_the_shopper():
    composition = Composition(MODEL, facts=FACTS, cards=[CARD], quotes=[{"title": "FAQ", "text": "10% off for members."}])
    content = user_turn_content("Anything under $150?", FACTS)
    earlier = [Turn("user", "Catalog results: 2. Summit Backpack - 149.00 USD"), Turn("assistant", "It is $149.")]
    allowed = figures_for(SYSTEM, earlier, content, composition)
    assert {Decimal("79"), Decimal("50"), Decimal("150"), Decimal("10"), Decimal("149")} <= allowed
    assert Decimal("68.5") not in allowed


async def test_the_opening_comes_first_and_supported_sentences_follow_whole():
    pieces = [" It", " is", " a", " soft", ",", " warm", " mid", " layer", ".", " Let", " me", " know", " if", " you",
              " need", " anything", " else", "!"]  # fmt: skip
    shown, result, _ = await run(pieces)
    assert shown == [OPENING, " It is a soft, warm mid layer.", " Let me know if you need anything else!"]
    assert result.text == "".join(shown) and result.model_sentences == 2 and result.finish_reason == "stop"


async def test_an_unsupported_sentence_ends_the_answer_and_aborts_the_request():
    pieces = [" It", " is", " warm", ".", " It", " is", " sold", " on", " Amazon", " too", ".", " Order", " now", "."]
    shown, result, engine = await run(pieces)
    assert "".join(shown) == OPENING + " It is warm." == result.text
    assert result.finish_reason == FINISH_UNSUPPORTED and engine.closed_early
    assert result.dropped == [{"text": "It is sold on Amazon too.", "reason": "disowns the store: 'Amazon'"}]


async def test_an_invented_discount_never_shows_and_nothing_after_it():
    pieces = [" It", " is", " 68", ".", "5", "%", " off", "!", " It", " is", " warm", "."]
    shown, result, engine = await run(pieces)
    assert "68" not in "".join(shown) and result.text == OPENING
    assert result.finish_reason == FINISH_UNSUPPORTED and engine.closed_early


async def test_a_sentence_cut_by_the_budget_is_left_out():
    shown, result, _ = await run([" It", " is", " warm", ".", " It", " comes", " in"], finish="length")
    assert result.text == OPENING + " It is warm." and result.finish_reason == "length"
    assert result.dropped[-1]["text"] == "It comes in"


async def test_a_list_heading_waits_for_an_item_that_passes():
    shown, result, _ = await run([" Here", " are", " the", " sizes", ":", "\n", "-", " Size", " XXL", " only", ".\n"])
    assert result.text == OPENING and result.model_sentences == 0
    shown, result, _ = await run([" Here", " are", " the", " sizes", ":", "\n", "-", " S", ",", " M", " and", " L", ".\n"])
    assert result.text == OPENING + " Here are the sizes:\n- S, M and L."


async def test_the_shoppers_budget_may_be_repeated():
    pieces = [" Yes", ",", " it", " is", " under", " your", " $", "150", " budget", "."]
    shown, result, _ = await run(pieces, shopper="Do you have a fleece under $150?")
    assert result.text == OPENING + " Yes, it is under your $150 budget." and result.finish_reason == "stop"


class CandidatesEngine:
    """Streams several candidates' pieces interleaved, as the engine does for ``n > 1``."""

    def __init__(self, candidates: list[list[str]]) -> None:
        self.candidates = candidates
        self.n = None

    def stream(self, request_id: str, token_ids: Any, params: Any, **kwargs: Any) -> AsyncIterator[StreamDelta]:
        self.n = params.n

        async def deltas() -> AsyncIterator[StreamDelta]:
            longest = max(len(pieces) for pieces in self.candidates)
            for step in range(longest):
                for index, pieces in enumerate(self.candidates):
                    if step < len(pieces):
                        finish = "stop" if step == len(pieces) - 1 else None
                        yield StreamDelta(request_id, pieces[step], index=index, finish_reason=finish)

        return deltas()


async def test_of_several_candidates_the_one_with_most_checked_sentences_is_shown():
    import dataclasses

    engine = CandidatesEngine([
        [" It", " is", " warm", ".", " Buy", " it", " on", " Amazon", "."],
        [" It", " is", " warm", ".", " It", " is", " soft", ".", " Let", " me", " know", " if", " you", " need",
         " anything", " else", "!"],
        [" As", " a", " digital", " platform", " I", " sell", " nothing", "."],
    ])  # fmt: skip
    plan = plan_for("Do you have a fleece?")
    plan = dataclasses.replace(plan, decoding=dataclasses.replace(plan.decoding, candidates=3))
    result = Generated()
    shown = [piece async for piece in generate(engine, "r1", plan, result, session_id=None, cache_salt="")]
    assert engine.n == 3
    assert result.text == OPENING + " It is warm. It is soft. Let me know if you need anything else!"
    assert shown[0] == OPENING and result.model_sentences == 3 and result.finish_reason == "stop"


async def test_model_text_off_shows_the_opening_alone_and_never_asks_the_engine():
    shown, result, engine = await run([" It", " is", " warm", "."], model_text="off")
    assert shown == [OPENING] and result.text == OPENING and engine.sent == 0 and result.finish_reason == "stop"


async def test_unchecked_text_streams_as_it_comes_and_still_ends_on_a_sentence():
    pieces = [" Best", " jacket", " in", " town", ".", " You", " will", " love", " it", " because"]
    shown, result, _ = await run(pieces, model_text="unchecked", finish="length")
    assert "".join(shown).startswith(OPENING + " Best jacket in town. You will")  # streamed as it came
    assert result.text == OPENING + " Best jacket in town."  # kept: `end.text` takes the cut sentence back


async def test_unchecked_text_still_never_shows_an_invented_figure():
    pieces = [" We", " have", " it", " for", " $79", ".", " It", " is", " 68", ".", "5", "%", " off", "!"]
    shown, result, engine = await run(pieces, model_text="unchecked")
    assert "68" not in "".join(shown)
    assert result.finish_reason == FINISH_UNSUPPORTED_FIGURE and engine.closed_early
    assert result.text == OPENING + " We have it for $79."


class Writes:
    """Notes every statement that would change the database (``connection.execute_wrapper``)."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            self.statements.append(sql)
        return execute(sql, params, many, context)


def test_planning_only_reads_a_handoff_is_the_sessions_to_record(db):
    """The session records the handoff (``answers.service._plan_unless_held``); the plan itself writes nothing."""
    store = Store.objects.create(slug="corner", name="Corner Shop")
    writes = Writes()
    with connection.execute_wrapper(writes):
        planned = pipeline.plan(None, store, [], "Can I talk to a person?")  # a fixed reply: the engine is not needed
    assert planned.composition.kind == HANDOFF and planned.composition.fixed
    assert writes.statements == []


def test_a_store_without_a_published_prompt_is_a_clear_error_not_a_write(db):
    store = Store.objects.create(slug="corner", name="Corner Shop")
    PromptVersion.objects.filter(store=store).delete()  # someone removed it (every store gets one when created)
    writes = Writes()
    with connection.execute_wrapper(writes), pytest.raises(NoPublishedPromptError, match="'corner' has no published"):
        pipeline.plan(None, store, [], "Do you sell tents?")
    assert writes.statements == [] and not PromptVersion.objects.filter(store=store).exists()


# --- the process's catalog caches: used, invalidated by a change, and the plan the same with or without them ---


class TokenizingEngine:
    """What planning asks of the engine: its tokenizer (the bundled model's, real) and the context length."""

    max_model_len = 2048

    def __init__(self) -> None:
        from inference.worker.loader import load_tokenizer, resolve_model

        self.tokenizer = load_tokenizer(resolve_model(None))

    @contextlib.contextmanager
    def tokenizer_held(self):
        yield self.tokenizer


@pytest.fixture(scope="module")
def tokenizing_engine() -> TokenizingEngine:
    return TokenizingEngine()


QUESTIONS = [
    "Do you have a waterproof rain jacket?",
    "What is your return policy?",
    "Which backpack is good for a weekend hike?",
    "Do you sell trekking poles?",
    "Can I pay with PayPal?",
]


def _cold() -> None:
    search.clear_index()
    passages.clear()


def test_a_plan_is_the_same_from_the_caches_as_from_the_database(demo_store, tokenizing_engine):
    turns = [Turn("user", "Hi"), Turn("assistant", "Hello! How can I help?")]
    for question in QUESTIONS:
        _cold()
        cold = pipeline.plan(tokenizing_engine, demo_store, turns, question)
        warm = pipeline.plan(tokenizing_engine, demo_store, turns, question)
        assert warm == cold, question
        assert warm.token_ids and warm.evidence.documents  # a whole plan, the store's documents in its evidence


def test_a_warm_plan_reads_the_catalog_stamp_once_and_builds_nothing(demo_store, tokenizing_engine, monkeypatch):
    pipeline.plan(tokenizing_engine, demo_store, [], QUESTIONS[0])
    built = []
    monkeypatch.setattr(search, "_build", lambda *args: built.append("products") or pytest.fail("rebuilt"))
    monkeypatch.setattr(passages, "_build", lambda *args: built.append("passages") or pytest.fail("rebuilt"))
    with CaptureQueriesContext(connection) as queries:
        planned = pipeline.plan(tokenizing_engine, demo_store, [], QUESTIONS[0])
    sql = [query["sql"] for query in queries.captured_queries]
    assert planned.composition.cards and not built
    assert sum("COUNT(*)" in statement for statement in sql) == 1  # the stamp, once for search and passages
    # The documents' bodies come from the passages' index: only the stamp reads their table.
    assert not any("catalog_storedocument" in statement and "COUNT(*)" not in statement for statement in sql)
    assert len(sql) <= 6  # stamp, published prompt, the cards' products, variants and images


def test_a_catalog_change_is_seen_by_the_next_question(demo_store, tokenizing_engine):
    question = "Do you sell trekking poles?"
    before = pipeline.plan(tokenizing_engine, demo_store, [], question)
    sku = before.composition.cards[0]["sku"]
    variant = Variant.objects.get(sku=sku)
    variant.price = Decimal("12.34")
    variant.save()
    product = variant.product
    product.title = "Summit Carbon Trekking Poles"
    product.save()
    document = StoreDocument.objects.filter(store=demo_store, kind="returns").first()
    document.body += " Trekking poles can be returned for 60 days."
    document.save()
    after = pipeline.plan(tokenizing_engine, demo_store, [], question)
    card = next(card for card in after.composition.cards if card["sku"] == sku)
    assert card["price"] == "12.34" and card["title"].startswith("Summit Carbon Trekking Poles")
    assert "Summit Carbon Trekking Poles" in after.user_content  # the facts the model reads
    assert document.body in after.evidence.documents  # what its sentences are checked against
    _cold()
    assert pipeline.plan(tokenizing_engine, demo_store, [], question) == after


# --- one source for a policy: the store's published document (issue 40) ---

RETURN_QUESTIONS = ("What is your return policy?", "How many days do I have to return something?")


def _on_screen(plan: Plan) -> str:
    """What the shopper reads before the model's own words: the opening and the quotes next to it."""
    return " ".join([plan.opening.text, *(quote["text"] for quote in plan.composition.quotes)])


def test_a_published_policy_is_what_shoppers_are_quoted_and_nothing_else_says_otherwise(demo_store, tokenizing_engine):
    from shop_assistant.studio import documents

    for question in RETURN_QUESTIONS:  # the processes' indexes warm with v1
        assert "30 days" in _on_screen(pipeline.plan(tokenizing_engine, demo_store, [], question)), question
    returns = StoreDocument.objects.get(store=demo_store, kind="returns")
    draft = documents.create_draft(returns)
    draft = documents.update_draft(draft, draft.title, draft.body.replace("30 days", "60 days"), "60 days now")
    documents.publish(draft)
    for question in RETURN_QUESTIONS:
        plan = pipeline.plan(tokenizing_engine, demo_store, [], question)
        shown = _on_screen(plan)
        assert "60 days" in shown and "30 days" not in shown, (question, shown)
        assert [quote["title"] for quote in plan.composition.quotes] == ["Returns and refunds"], question
        # Nor can the model's own sentences say 30: its prompt has no second copy of the policy, and nothing its
        # sentences are checked against does either.
        assert "30 days" not in tokenizing_engine.tokenizer.decode(plan.token_ids), question
        assert not any("30 days" in text for text in plan.evidence.documents), question


# --- the shopper's language: detected once per message, kept on the plan, the fixed reply in it ---


def test_a_spanish_request_for_a_person_is_answered_in_spanish_and_the_plan_says_so(db):
    from catalog.language import detect
    from shop_assistant.chat.log.handoff import DEFAULT_REPLY

    store = Store.objects.create(slug="corner", name="Corner Shop")
    spanish = pipeline.plan(None, store, [], "Quiero hablar con una persona")
    assert spanish.language == "es" and spanish.composition.kind == HANDOFF
    assert spanish.composition.reply != DEFAULT_REPLY and detect(spanish.composition.reply) == "es"
    english = pipeline.plan(None, store, [], "Can I talk to a person?")
    assert english.language == "en" and english.composition.reply == DEFAULT_REPLY
    # The language is the message's own, not left over from the one before.
    assert pipeline.plan(None, store, [], "Quiero hablar con una persona").composition.reply == spanish.composition.reply


def test_a_follow_up_too_short_to_tell_is_answered_in_the_language_of_the_shopper_before_it(db):
    """"¿en azul?" has too few words to tell its language: after a Spanish message it is Spanish, and what the
    English rules cannot read of it is said in Spanish, not answered in English."""
    from shop_assistant.chat.answers.composition import NOT_UNDERSTOOD_REPLY

    store = Store.objects.create(slug="corner", name="Corner Shop")
    follow_up = pipeline.plan(None, store, [], "¿en azul?", previous="¿Tienen chaquetas impermeables?")
    assert follow_up.language == "es" and follow_up.composition.answer_kind == "not_understood"
    with translation.override("es"):
        assert follow_up.composition.reply == translation.gettext(NOT_UNDERSTOOD_REPLY) != NOT_UNDERSTOOD_REPLY
    assert pipeline.plan(None, store, [], "¿en azul?").language == "en"  # nothing before it: the default


def test_the_model_sentences_are_checked_in_the_language_of_the_answer(tokenizing_engine, demo_store):
    spanish = pipeline.plan(tokenizing_engine, demo_store, [], "¿Tienen linternas frontales recargables?")
    assert spanish.language == "es" and spanish.evidence.language == "es"
    english = pipeline.plan(tokenizing_engine, demo_store, [], "Do you have rechargeable headlamps?")
    assert english.evidence.language == "en"
