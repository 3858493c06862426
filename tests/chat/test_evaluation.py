"""The answer-quality evaluation: its checks, and a CI run of the question subset that must meet the issue's bar."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command

from shop_assistant.chat import evaluation
from shop_assistant.chat.evaluation import (
    Outcome,
    claims_human,
    failures,
    is_loop,
    load_questions,
    summarize,
    unsupported_figures,
)


def test_the_question_set_covers_every_kind_of_check():
    questions = load_questions()
    assert len(questions) >= 40
    assert {q.store for q in questions} == {"demo", *evaluation.SAMPLE_STORES}
    kinds = {key for q in questions for key in q.expect}
    assert {"product", "fact", "no_match", "handoff"} <= kinds
    subset = load_questions(subset=True)
    assert {key for q in subset for key in q.expect} >= {"product", "fact", "no_match", "handoff"}


def test_loops_and_human_claims_are_recognised():
    assert is_loop("I'm happy to help you find it. " * 3)
    assert not is_loop("I'm happy to help you find it. " * 2)
    assert claims_human("Sure! I'm your human agent.")
    assert not claims_human("I can connect you with a human agent.")


def test_made_up_prices_and_percentages_are_found():
    given = ["Do you have a jacket under $150?", "79.00", "Shipping is free on orders over 50 USD."]
    answer = "The fleece is $79, 68.5% off, so $23.50 under your $150 budget; orders over $50 ship free. 2 left."
    assert unsupported_figures(answer, given) == ["68.5%", "$23.50"]
    assert unsupported_figures("It costs 1,299.00 USD.", ["1299"]) == []


def test_the_question_set_invites_made_up_figures():
    texts = [q.text.lower() for q in load_questions()]
    assert any("under $150" in t for t in texts) and any("how much" in t for t in texts)
    assert any("discount" in t or "sale" in t for t in texts) and any("in stock" in t for t in texts)


def test_thresholds():
    good = Outcome("demo", "q", answer="Yes, it is 30 days.", words=5, fact_on_screen=True)
    assert failures(summarize([good])) == []
    looping = Outcome("demo", "q", answer="x", loop=True, words=90, handoff_recorded=False)
    assert failures(summarize([looping])) == [
        "loops 1 > 0", "median_words 90 > 80", "handoff_recorded 0.0 < 1.0"
    ]
    invented = Outcome("demo", "q", answer="It is 68.5% off.", words=4, unsupported_figures=["68.5%"])
    assert failures(summarize([good, invented])) == ["unsupported_figures 1 > 0"]


@pytest.mark.slow
@pytest.mark.backend_agnostic  # the answers' quality, the same on any database
@pytest.mark.usefixtures("chat_engine")
async def test_the_ci_subset_meets_the_bar(transactional_db, settings, capsys):
    """Greedy decoding with a fixed seed and the shipped answer budget, one fresh session per question."""
    settings.CHAT = {**settings.CHAT, "temperature": 0.0, "seed": 0}
    settings.CHAT.pop("max_tokens", None)  # the shipped default budget, not the chat tests' 8 tokens
    questions = load_questions(subset=True)
    await database_sync_to_async(evaluation.ensure_stores)({q.store for q in questions})
    outcomes, summary = await evaluation.evaluate(questions)
    with capsys.disabled():
        print("\nevaluation subset:", json.dumps(summary))
        for outcome in outcomes:
            print(f"  {outcome.question!r} -> {outcome.finish_reason} {outcome.words}w {outcome.answer[:100]!r}")
    assert failures(summary) == [], [o for o in outcomes if o.error]
    assert summary["questions"] == len(questions)


@pytest.mark.slow
def test_the_command_writes_a_report(transactional_db, tmp_path, settings, chat_engine):
    """The management command on the fixed replies alone (no model text needed): handoff and no-match."""
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps([
        {"store": "shopify-jewelery", "text": "Do you sell watches?", "expect": {"no_match": True}},
        {"store": "shopify-jewelery", "text": "I'd like to talk to a real person.", "expect": {"handoff": True}},
    ]))
    out = tmp_path / "report.json"
    call_command("evaluate_answers", questions=str(questions), json_out=str(out), verbosity=0)
    report = json.loads(out.read_text())
    assert report["summary"]["no_match_handled"] == 1.0 and report["summary"]["handoff_recorded"] == 1.0
    assert [q["reply"] for q in report["questions"]] == ["no_match", "handoff"]
    assert report["failures"] == []
