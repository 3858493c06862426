"""The answer-quality evaluation: its checks, and a CI run of the question subset that must meet the issue's bar."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command

from shop_assistant.evaluation import answers as evaluation
from shop_assistant.evaluation.answers import (
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


# The examples, as the bundled model wrote them next to the store's cards and quotes.
EVIDENCE = (
    "Do you have a folding chair? Folding Camp Chair 49.00 USD in stock. A sturdy chair with a cup holder. "
    "You can return unused items in their original condition within 30 days of delivery."
)


@pytest.mark.parametrize(
    ("answer", "check"),
    [
        ("As a digital platform designed by humans, my capabilities do not include selling physical goods.", "disowning"),
        ("This customer wants to know about chairs. The chatbot has no way to verify it.", "narrating"),
        ("User: do you have chairs?", "narrating"),
        ("The Folding Camp Chair is 49.00 USD. Your tents come with a", "cut"),
        ("", "empty"),
        ("You can find it at a local boutique called Escape.", "unsupported"),
        ("It is 40% off this week.", "unsupported"),
        ("Yes, absolutely! You can definitely return shoes after wearing them multiple times.", "contradicting"),
        ("You can return the chair after 30 days of delivery, even if it is not unused.", "contradicting"),
    ],
)
def test_the_words_on_screen_are_judged_by_rules_of_the_evaluations_own(answer, check):
    from shop_assistant.evaluation import words

    judgement = words.judge(answer, EVIDENCE, quotes=[EVIDENCE.split(". ")[-1]])
    assert getattr(judgement, check), (check, judgement)


def test_a_clean_answer_passes_every_word_rule():
    from shop_assistant.evaluation import words

    answer = (
        "We have the Folding Camp Chair for 49.00 USD. It is a sturdy chair with a cup holder. You might want to "
        "try it out! Anything else?"
    )
    judgement = words.judge(answer, EVIDENCE, titles=["Folding Camp Chair"])
    assert judgement == words.Judgement()
    assert not words.judge("Folding Camp Chair: a sturdy chair.", EVIDENCE, titles=["Folding Camp Chair"]).narrating
    # A fixed reply is the store's own text: only emptiness and cuts are judged.
    assert words.judge("Sorry, we don't carry kayaks.", "", fixed=True) == words.Judgement()


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
    badly_worded = Outcome("demo", "q", answer="As a digital platform", words=4, disowning=["As a digital platform"],
                           narrating=["The customer asks"], cut=True, unsupported_shown=["Escape"])  # fmt: skip
    assert failures(summarize([good, badly_worded])) == [
        "unsupported_shown 1 > 0", "disowning 1 > 0", "narrating 1 > 0", "cut 1 > 0"
    ]


@pytest.mark.slow
@pytest.mark.backend_agnostic  # the answers' quality, the same on any database
@pytest.mark.usefixtures("chat_engine")
async def test_the_ci_subset_meets_the_bar(transactional_db, settings, capsys):
    """Greedy decoding with a fixed seed and the shipped answer budget, one fresh session per question."""
    from shop_assistant import settings as shipped

    # The shipped answer budget (settings is its one source), not the chat tests' 8 tokens.
    settings.CHAT = {**settings.CHAT, "temperature": 0.0, "seed": 0, "max_tokens": shipped.CHAT["max_tokens"]}
    questions = load_questions(subset=True)
    await database_sync_to_async(evaluation.ensure_stores)({q.store for q in questions})
    outcomes, summary = await evaluation.evaluate(questions)
    with capsys.disabled():
        print("\nevaluation subset:", json.dumps(summary))
        for outcome in outcomes:
            print(f"  {outcome.question!r} -> {outcome.finish_reason} {outcome.words}w {outcome.answer!r}")
    # The facts on screen and the words: nothing unsupported, disowning, narrating, cut or empty.
    assert failures(summary) == [], [o for o in outcomes if o.error]
    assert all(o.answer.strip() for o in outcomes)
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


def test_checks_per_answer_follow_the_summary_rules():
    """``checks``: one answer's pass/fail per rule (the studio's score); an answer that failed passes nothing."""
    from shop_assistant.evaluation.answers import checks

    clean = Outcome(store="demo", question="q", answer="Yes, we do.", words=3, product_in_cards=True)
    assert set(checks(clean)) >= {"answered", "no_loop", "not_cut", "short", "product_in_cards"}
    assert all(checks(clean).values()) and "fact_on_screen" not in checks(clean)
    looping = Outcome(store="demo", question="q", answer="x", words=200, loop=True, no_match_handled=False)
    failed = {name for name, ok in checks(looping).items() if not ok}
    assert failed == {"no_loop", "short", "no_match_handled"}
    broken = Outcome(store="demo", question="q", error="prompt_too_long: too long")
    assert not any(checks(broken).values())
