"""Scoring a prompt version with the live engine: the question set, the score stored on publish, the warning
when a draft scores worse than the published version, and publishing anyway."""

from __future__ import annotations

import pytest
from django.test import Client

from shop_assistant.evaluation import answers
from shop_assistant.studio import scoring, services
from shop_assistant.prompts.models import PromptVersion, SampleQuestion

from .conftest import make_user

# The real model answers every question of the set under two versions.
pytestmark = [pytest.mark.slow, pytest.mark.backend_agnostic]


def test_the_question_set_is_small_and_fits_the_store(store):
    SampleQuestion.objects.create(store=store, text="Do you sell garden gnomes?")
    questions = scoring.questions_for(store)
    assert [q.text for q in questions][:1] == ["Do you sell garden gnomes?"] and questions[0].expect == {}
    # A store with no questions of its own in the evaluation set gets the ones every store answers alike.
    assert all(q.expect == {"handoff": True} for q in questions[1:]) and 1 < len(questions) <= 1 + scoring.MAX_FROM_SET
    assert {q.store for q in questions} == {"corner"}


def test_the_demo_store_is_asked_its_own_evaluation_questions(demo_store):
    own = list(demo_store.sample_questions.values_list("text", flat=True))
    assert own  # the demo loader gives the demo store its sample questions
    questions = scoring.questions_for(demo_store)
    texts = [q.text for q in questions]
    assert texts[: len(own)] == own
    assert len(texts) == len(set(texts)) <= len(own) + scoring.MAX_FROM_SET
    # A sample question the set knows is asked with the set's expectation.
    known = {q.text: q.expect for q in answers.load_questions() if q.store == "demo"}
    assert any(known.get(text) for text in own)
    for q in questions[: len(own)]:
        assert q.expect == known.get(q.text, {})
    subset = {q.text: q.expect for q in answers.load_questions(subset=True) if q.store == "demo"}
    extra = texts[len(own):]
    assert set(extra) <= set(subset) and len(extra) == scoring.MAX_FROM_SET
    # One of each kind the set has, so a small set still exercises every rule.
    assert {next(iter(subset[text])) for text in extra} >= {"product", "fact", "no_match"}


def test_score_is_stored_on_publish_and_a_worse_draft_is_held_back(demo_store, chat_engine, chat_settings, scoring_on):
    owner = make_user("owner-olga", demo_store, "owner")
    client = Client()
    client.force_login(owner)
    first = services.published_prompt(demo_store)
    # A draft with the published text: scored (with the published version) before it is published.
    same = services.create_draft(demo_store, first.system_prompt, first.policies, note="same text")
    response = client.post(f"/studio/demo/versions/{same.pk}/publish", {"expected_published": str(first.pk)})
    assert response.status_code == 302 and response["Location"] == "/studio/demo/"
    same.refresh_from_db()
    first.refresh_from_db()
    assert same.status == PromptVersion.Status.PUBLISHED and same.score_current is not None
    assert first.score_current is not None and same.score_total == len(scoring.questions_for(demo_store))
    assert same.score_done == same.score_total and len(same.score_report["questions"]) == same.score_total
    # The evaluation's rules, per answer: the handoff question's fixed reply passes them all.
    handoff = next(q for q in same.score_report["questions"] if q["question"] == "Can I talk to a person?")
    assert handoff["reply"] == "handoff" and all(handoff["checks"].values())
    # A draft that breaks a rule deterministically: a prompt longer than the model's context fails every
    # model answer ("errors"), while fixed replies still pass.
    long = services.create_draft(demo_store, "Always be helpful and polite to every shopper. " * 400, note="too long")
    response = client.post(f"/studio/demo/versions/{long.pk}/publish", {"expected_published": str(same.pk)})
    assert response["Location"] == f"/studio/demo/drafts/{long.pk}/"
    long.refresh_from_db()
    assert long.status == PromptVersion.Status.DRAFT and long.score_current < same.score_current
    assert any(failure.startswith("errors") for failure in long.score_report["failures"])
    page = client.get(response["Location"]).content.decode()
    assert "This draft scores worse than the published version." in page
    assert f"scores {long.score:g} / 100, worse than the published v{same.version} ({same.score:g})" in page
    # History shows both scores, the draft's marked lower.
    home = client.get("/studio/demo/").content.decode()
    assert f'data-score-of="v{same.version}">{same.score:.1f}</td>' in home
    # Publishing anyway is the owner's call.
    client.post(f"/studio/demo/versions/{long.pk}/publish", {"expected_published": str(same.pk), "publish_worse": "1"})
    assert services.published_prompt(demo_store).pk == long.pk


def test_the_owner_scores_any_version_on_demand(demo_store, chat_engine, chat_settings):
    owner = make_user("owner-oona", demo_store, "owner")
    client = Client()
    client.force_login(owner)
    published = services.published_prompt(demo_store)
    response = client.post(f"/studio/demo/versions/{published.pk}/score", follow=True)
    published.refresh_from_db()
    assert published.score_current is not None and published.score_state == scoring.DONE
    assert f"v{published.version} scored {published.score:g} / 100." in response.content.decode()
    assert client.get(f"/studio/demo/versions/{published.pk}/score.json").json() == {
        "state": "done", "done": published.score_total, "total": published.score_total, "score": published.score,
    }
