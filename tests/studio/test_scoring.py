"""Scoring a prompt version with the live engine: the question set, the score that follows a publish (in the
background), the warning when a draft scores worse than the published version, and publishing anyway."""

from __future__ import annotations

import threading

import pytest
from django.test import Client

from shop_assistant.evaluation import answers
from shop_assistant.studio import scoring, services, tasks
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


def test_a_publish_returns_at_once_and_the_score_follows_in_the_background(
    demo_store, chat_engine, chat_settings, scoring_on, monkeypatch
):
    """The publish request scores nothing itself (it used to answer every question inline, 11.9 s measured on
    Django's one shared sync thread): the version is published, the prompt page shows it being scored, and the
    scoring thread's score appears after."""
    gate = threading.Event()
    real = scoring.score_for_publish

    def held(version_id: int, force: bool = False) -> None:
        assert gate.wait(120)  # the scoring thread waits here until the publish request has returned
        real(version_id, force=force)

    monkeypatch.setattr(scoring, "score_for_publish", held)
    owner = make_user("owner-olga", demo_store, "owner")
    client = Client()
    client.force_login(owner)
    first = services.published_prompt(demo_store)
    same = services.create_draft(demo_store, first.system_prompt, first.policies, note="same text")
    response = client.post(f"/studio/demo/versions/{same.pk}/publish", {"expected_published": str(first.pk)})
    assert response.status_code == 302 and response["Location"] == "/studio/demo/"
    same.refresh_from_db()
    assert same.status == PromptVersion.Status.PUBLISHED and services.published_prompt(demo_store).pk == same.pk
    assert same.score_running and same.score_current is None and same.score_done == 0  # not scored in the request
    home = client.get("/studio/demo/").content.decode()
    assert 'id="score" role="status" data-state="running"' in home and "Score: scoring…" in home
    assert client.get(f"/studio/demo/versions/{same.pk}/score.json").json()["state"] == "running"
    gate.set()
    tasks.wait_idle()
    same.refresh_from_db()
    assert same.score_current is not None and same.score_total == len(scoring.questions_for(demo_store))
    assert same.score_done == same.score_total and len(same.score_report["questions"]) == same.score_total
    assert client.get(f"/studio/demo/versions/{same.pk}/score.json").json() == {
        "state": "done", "done": same.score_total, "total": same.score_total, "score": same.score,
    }
    home = client.get("/studio/demo/").content.decode()
    assert f'<strong class="score">{same.score:.1f}</strong> / 100' in home and "scoring…" not in home
    # The evaluation's rules, per answer: the handoff question's fixed reply passes them all.
    handoff = next(q for q in same.score_report["questions"] if q["question"] == "Can I talk to a person?")
    assert handoff["reply"] == "handoff" and all(handoff["checks"].values())


def test_a_draft_scored_worse_is_held_back(demo_store, chat_engine, chat_settings, scoring_on):
    owner = make_user("owner-oscar", demo_store, "owner")
    client = Client()
    client.force_login(owner)
    published = services.published_prompt(demo_store)
    client.post(f"/studio/demo/versions/{published.pk}/score")
    # A draft that breaks a rule deterministically: a prompt longer than the model's context fails every
    # model answer ("errors"), while fixed replies still pass. The owner scores it on its page.
    long = services.create_draft(demo_store, "Always be helpful and polite to every shopper. " * 400, note="too long")
    page = client.post(f"/studio/demo/versions/{long.pk}/score", follow=True).content.decode()
    assert f"Scoring v{long.version}: its score shows here when it is in." in page
    tasks.wait_idle()
    long.refresh_from_db()
    published.refresh_from_db()
    assert long.score_current < published.score_current
    assert any(failure.startswith("errors") for failure in long.score_report["failures"])
    response = client.post(f"/studio/demo/versions/{long.pk}/publish", {"expected_published": str(published.pk)})
    assert response["Location"] == f"/studio/demo/drafts/{long.pk}/"
    assert services.published_prompt(demo_store).pk == published.pk
    page = client.get(response["Location"]).content.decode()
    assert "This draft scores worse than the published version." in page
    assert f"scores {long.score:g} / 100, worse than the published v{published.version} ({published.score:g})" in page
    # History shows both scores.
    home = client.get("/studio/demo/").content.decode()
    assert f'data-score-of="v{published.version}">{published.score:.1f}</td>' in home
    # Publishing anyway is the owner's call.
    client.post(f"/studio/demo/versions/{long.pk}/publish",
                {"expected_published": str(published.pk), "publish_worse": "1"})  # fmt: skip
    assert services.published_prompt(demo_store).pk == long.pk


def test_the_owner_scores_any_version_on_demand(demo_store, chat_engine, chat_settings):
    owner = make_user("owner-oona", demo_store, "owner")
    client = Client()
    client.force_login(owner)
    published = services.published_prompt(demo_store)
    response = client.post(f"/studio/demo/versions/{published.pk}/score", follow=True)
    page = response.content.decode()
    assert f"Scoring v{published.version}: its score shows here when it is in." in page
    # The version page follows the score (studio.js polls score.json and reloads when it is in).
    assert 'id="score"' in page and "studio/studio.js" in page
    tasks.wait_idle()
    published.refresh_from_db()
    assert published.score_current is not None and published.score_state == scoring.DONE
    assert client.get(f"/studio/demo/versions/{published.pk}/score.json").json() == {
        "state": "done", "done": published.score_total, "total": published.score_total, "score": published.score,
    }
