"""The playground page, a version's score (started, followed, shown), comparing two versions and the rollback
confirmation: who may use them, and what an owner sees. Scoring with the live engine: ``test_scoring``."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone

from catalog.models import Store
from shop_assistant.evaluation import answers, instructions
from shop_assistant.studio import scoring, services
from shop_assistant.prompts.models import PromptVersion

from .conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def versions(store):
    archived = services.publish(services.create_draft(store, "Old prompt."))
    published = services.publish(services.create_draft(store, "Current prompt.\nBe brief."))
    draft = services.create_draft(store, "Current prompt.\nBe brief and kind.")
    return archived, published, draft


def scored(version: PromptVersion, score: float, failed: str = "") -> PromptVersion:
    """A score as ``scoring.score_version`` stores it (the live engine's run is ``test_scoring``'s)."""
    checks = {"answered": True, "no_loop": not failed, "fact_on_screen": True}
    summary = {**answers.summarize([]), "questions": 1, **({failed: 1} if failed else {})}
    PromptVersion.objects.filter(pk=version.pk).update(
        score=score, score_state=scoring.DONE, score_text_hash=version.text_hash(), score_total=1,
        score_report={"summary": summary, "failures": answers.failures(summary),
                      "questions": [{"question": "Do you have tents?", "answer": f"Answer of v{version.version}.",
                                     "finish_reason": "stop", "reply": "", "error": "", "checks": checks}]},
    )  # fmt: skip
    version.refresh_from_db()
    return version


def actions(versions) -> list[tuple[str, str, dict]]:
    archived, published, draft = versions
    base = "/studio/corner"
    return [
        ("get", f"{base}/playground/", {}),
        ("get", f"{base}/compare/", {}),
        ("get", f"{base}/compare/?a={published.pk}&b={draft.pk}", {}),
        ("get", f"{base}/versions/{archived.pk}/rollback/confirm", {}),
        ("get", f"{base}/versions/{draft.pk}/score.json", {}),
        ("post", f"{base}/versions/{draft.pk}/score", {}),
    ]


@pytest.mark.parametrize("who", ["anonymous", "agent", "owner_of_another_store", "staff_without_store"])
def test_only_owners_use_the_playground_scores_and_comparisons(store, versions, who):
    client = Client()
    if who == "agent":
        client.force_login(make_user("adam", store, "agent"))
    elif who == "owner_of_another_store":
        client.force_login(make_user("oscar", Store.objects.create(slug="other", name="Other"), "owner"))
    elif who == "staff_without_store":
        client.force_login(make_user("sam"))
    for method, url, data in actions(versions):
        response = getattr(client, method)(url, data)
        if who == "anonymous" and method == "get":
            assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next="), url
        else:
            assert response.status_code == 403, (who, url, response.status_code)
    assert all(v.score_state == "" for v in PromptVersion.objects.all())  # nobody started a score


def test_score_posts_need_the_csrf_token(store, versions, owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post(f"/studio/corner/versions/{versions[2].pk}/score").status_code == 403


def test_the_playground_offers_every_version_and_the_store_questions(store, versions, owner):
    archived, published, draft = versions
    client = Client()
    client.force_login(owner)
    page = client.get("/studio/corner/playground/").content.decode()
    assert 'id="playground"' in page and 'data-url="/studio/corner/preview"' in page
    for v in versions:
        assert f'value="{v.pk}"' in page
    assert f'<option value="{draft.pk}" selected>v{draft.version} (draft)' in page  # left: the newest draft
    assert f'<option value="{published.pk}" selected>v{published.version} (published)' in page  # right: the published version
    assert '<option value="Do you have rain jackets?">' in page  # the default sample questions to pick from
    assert 'class="quotes"' in page  # quotes are shown next to the answer, as the widget does


def test_history_shows_scores_and_compare_shows_diff_scores_and_failed_checks(store, versions, owner):
    archived, published, draft = versions
    scored(archived, 90.0)
    scored(published, 95.5)
    scored(draft, 80.0, failed="loops")
    client = Client()
    client.force_login(owner)
    home = client.get("/studio/corner/").content.decode()
    assert f'data-score-of="v{archived.version}">90.0 <span class="score-worse"' in home  # lower than published
    assert f'data-score-of="v{published.version}">95.5</td>' in home
    assert "<strong class=\"score\">95.5</strong> / 100" in home
    page = client.get(f"/studio/corner/compare/?a={published.pk}&b={draft.pk}").content.decode()
    assert '<td class="score">95.5</td>' in page and '<td class="score">80.0</td>' in page
    # The missed thresholds and failed checks in an owner's words, not the evaluation's names.
    assert "repetition in 1 answer<" in page and "failed: repetition<" in page and "no_loop" not in page
    assert '<span class="d-add">+ Be brief and kind.</span>' in page and '<span class="d-del">- Be brief.</span>' in page
    assert client.get(f"/studio/corner/compare/?a={published.pk}&b=999999").status_code == 400
    # An answer that never came shows why instead of every check it failed.
    PromptVersion.objects.filter(pk=draft.pk).update(score_report={**draft.score_report, "questions": [
        {**draft.score_report["questions"][0], "answer": "", "error": "prompt_too_long: 1100 tokens",
         "checks": {"answered": False, "no_loop": False}}]})  # fmt: skip
    page = client.get(f"/studio/corner/compare/?a={published.pk}&b={draft.pk}").content.decode()
    assert "prompt_too_long: 1100 tokens" in page and "failed: no answer<" in page and "failed: no answer," not in page
    # The draft page says the draft scores worse and offers to publish anyway.
    draft_page = client.get(f"/studio/corner/drafts/{draft.pk}/").content.decode()
    assert "This draft scores worse than the published version." in draft_page
    assert 'name="publish_worse" value="1"' in draft_page


def test_an_edited_draft_shows_no_stale_score(store, versions, owner):
    draft = scored(versions[2], 99.0)
    services.update_draft(draft, "Something else entirely.", "")
    draft.refresh_from_db()
    assert draft.score_current is None
    client = Client()
    client.force_login(owner)
    assert "Not scored since the last edit." in client.get(f"/studio/corner/drafts/{draft.pk}/").content.decode()


def test_score_progress_is_reported_while_a_worker_scores(store, versions, owner):
    draft = versions[2]
    PromptVersion.objects.filter(pk=draft.pk).update(score_state=scoring.RUNNING, score_done=2, score_total=7,
                                                     score_started_at=timezone.now())  # fmt: skip
    client = Client()
    client.force_login(owner)
    assert client.get(f"/studio/corner/versions/{draft.pk}/score.json").json() == {
        "state": "running", "done": 2, "total": 7, "score": None,
    }
    page = client.get(f"/studio/corner/drafts/{draft.pk}/").content.decode()
    assert 'data-state="running"' in page and "<span data-score-done>2</span> of <span data-score-total>7</span>" in page


def test_rollback_is_confirmed_on_a_page_first(store, versions, owner):
    archived, published, draft = versions
    client = Client()
    client.force_login(owner)
    home = client.get("/studio/corner/").content.decode()
    assert f'href="/studio/corner/versions/{archived.pk}/rollback/confirm"' in home
    assert f'action="/studio/corner/versions/{archived.pk}/rollback"' not in home  # no one-click rollback
    page = client.get(f"/studio/corner/versions/{archived.pk}/rollback/confirm").content.decode()
    assert f"Roll back to v{archived.version}?" in page and '<span class="d-add">+ Old prompt.</span>' in page
    assert f'action="/studio/corner/versions/{archived.pk}/rollback"' in page
    assert services.published_prompt(store) == published  # looking at it changed nothing
    client.post(f"/studio/corner/versions/{archived.pk}/rollback", {"expected_published": str(published.pk)})
    assert services.published_prompt(store).system_prompt == "Old prompt."
    # The published version cannot be "rolled back to".
    current = services.published_prompt(store)
    assert client.get(f"/studio/corner/versions/{current.pk}/rollback/confirm")["Location"] == "/studio/corner/"


def test_publishing_waits_for_a_score_a_worker_is_still_computing(store, versions, owner, scoring_on):
    archived, published, draft = versions
    scored(published, 90.0)
    PromptVersion.objects.filter(pk=draft.pk).update(score_state=scoring.RUNNING, score_done=1, score_total=5,
                                                     score_started_at=timezone.now())  # fmt: skip
    client = Client()
    client.force_login(owner)
    response = client.post(f"/studio/corner/versions/{draft.pk}/publish", {"expected_published": str(published.pk)},
                           follow=True)  # fmt: skip
    assert services.published_prompt(store) == published
    assert f"Scoring v{draft.version} before publishing" in response.content.decode()


def test_a_draft_scoring_worse_is_held_back_until_the_owner_publishes_anyway(store, versions, owner, scoring_on):
    archived, published, draft = versions
    scored(published, 90.0)
    scored(draft, 75.0, failed="loops")
    client = Client()
    client.force_login(owner)
    held = client.post(f"/studio/corner/versions/{draft.pk}/publish", {"expected_published": str(published.pk)})
    assert held["Location"] == f"/studio/corner/drafts/{draft.pk}/" and services.published_prompt(store) == published
    client.post(f"/studio/corner/versions/{draft.pk}/publish",
                {"expected_published": str(published.pk), "publish_worse": "1"})  # fmt: skip
    assert services.published_prompt(store).pk == draft.pk


def test_a_version_page_shows_its_score_and_rolls_back_only_through_the_confirmation(store, versions, owner):
    archived, published, draft = versions
    scored(archived, 70.0)
    client = Client()
    client.force_login(owner)
    page = client.get(f"/studio/corner/versions/{archived.pk}/").content.decode()
    assert '<strong class="score" data-score>70.0</strong>' in page
    assert f'href="/studio/corner/versions/{archived.pk}/rollback/confirm"' in page
    assert f'action="/studio/corner/versions/{archived.pk}/rollback"' not in page
    assert "Publish anyway" not in page  # only a draft is published, and only from its own page


def test_a_score_whose_worker_died_no_longer_blocks_publishing(store, versions, owner, scoring_on):
    archived, published, draft = versions
    scored(published, 90.0)
    scored(draft, 95.0)
    # Marked running long ago and never finished: treated as lost, so the draft is scored again.
    PromptVersion.objects.filter(pk=draft.pk).update(score_state=scoring.RUNNING,
                                                     score_started_at=timezone.now() - dt.timedelta(hours=1))
    draft.refresh_from_db()
    assert not draft.score_running and scoring.needs_score(draft)
    client = Client()
    client.force_login(owner)
    assert "Score this draft now" in client.get(f"/studio/corner/drafts/{draft.pk}/").content.decode()


def test_a_score_report_reads_in_an_owners_words():
    summary = {**answers.summarize([]), "questions": 8, "errors": 6, "cut": 2, "median_words": 90,
               "product_in_cards": 0.0, "fact_on_screen": 0.5, "no_match_handled": 1.0}  # fmt: skip
    assert scoring.missed_in_words({"summary": summary, "failures": answers.failures(summary)}) == [
        "6 of 8 questions got no answer",
        "stopping mid-sentence in 2 answers",
        "answers run long (median 90 words; at most 80)",
        "product questions with the product among the cards: 0% (needs 90%)",
        "policy questions with the fact on screen: 50% (needs 95%)",
    ]
    assert scoring.missed_in_words({"failures": ["loops 1 > 0"]}) == ["loops 1 > 0"]  # a report without its summary
    assert scoring.failed_checks_in_words({"answered": True, "not_cut": False, "short": False}) == [
        "stopping mid-sentence", "over 150 words"]
    assert scoring.failed_checks_in_words({"answered": False, "not_cut": False}) == ["no answer"]
    # Every check the evaluation makes, and every count its thresholds name, has words.
    every = answers.checks(answers.Outcome(store="s", question="q", product_in_cards=True, fact_on_screen=True,
                                           no_match_handled=True, handoff_recorded=True,
                                           instructions=dict.fromkeys(instructions.WORDS, True)))
    assert set(every) == set(scoring.FAILED_CHECK_WORDS)
    counted = {name for name in answers.THRESHOLDS if name not in answers.RATES and name != "median_words"}
    for name in counted:
        lines = scoring.missed_in_words({"summary": {**answers.summarize([]), name: 1}})
        assert len(lines) == 1 and lines[0].endswith(" in 1 answer"), (name, lines)
