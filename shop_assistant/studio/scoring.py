"""A score on every prompt version: the store's evaluation questions answered under the version by the real
engine (the preview's path, short answers), judged by the evaluation's own rules (``evaluation.answers``).

The score is the share of the evaluation's per-answer checks the answers passed, in percent, so two versions of
one store (asked the same questions) compare directly. The checks include the version's own instructions
(``evaluation.instructions``, from the guidance read out of its prompt): the language it asks for (the shopper's
when it names none), the products it says to suggest, what it says to avoid, its greeting and sign-off. The question set is kept small so that scoring takes
seconds: the store's sample questions plus a few questions of the evaluation set that fit the store (its own,
else the ones about asking for a person, which fit every store).
"""

from __future__ import annotations

import logging
from itertools import zip_longest
from typing import Any

from asgiref.sync import async_to_sync
from django.utils import timezone

from catalog.models import Store
from shop_assistant.evaluation import answers, instructions
from shop_assistant.prompts.models import PromptVersion

from .forms import sample_questions
from .preview import preview_events

logger = logging.getLogger(__name__)

MAX_TOKENS = 48  # short answers: the rules judge the first sentences, and scoring stays quick
MAX_SAMPLES = 5
MAX_FROM_SET = 4
RUNNING, DONE, FAILED = "running", "done", "failed"


def questions_for(store: Store) -> list[answers.Question]:
    """The store's sample questions (with the evaluation set's expectations when it has the same question, else
    the general rules only) and a few more of the evaluation set."""
    every = answers.load_questions()
    known = {q.text.strip().lower(): q.expect for q in every if q.store == store.slug}
    own = sample_questions(store, MAX_SAMPLES)
    result = [answers.Question(store.slug, text, dict(known.get(text.strip().lower(), {}))) for text in own]
    fitting = [q for q in every if q.store == store.slug and q.subset]
    if not fitting:
        fitting = [q for q in every if q.expect.get("handoff")]
    asked = {q.text.strip().lower() for q in result}
    # One question of each kind in turn (a product, a policy fact, a no-match, a handoff), so that a small set
    # still exercises every rule the evaluation has.
    kinds: dict[str, list[answers.Question]] = {}
    for q in fitting:
        if q.text.strip().lower() not in asked:
            kinds.setdefault(next(iter(q.expect), ""), []).append(q)
    extra = [q for round_ in zip_longest(*kinds.values()) for q in round_ if q is not None][:MAX_FROM_SET]
    return result + [answers.Question(store.slug, q.text, dict(q.expect)) for q in extra]


def score_of(outcomes: list[answers.Outcome]) -> float:
    results = [passed for outcome in outcomes for passed in answers.checks(outcome).values()]
    return round(100 * sum(results) / len(results), 1) if results else 0.0


async def _answer(store: Store, version: PromptVersion, question: answers.Question) -> answers.Outcome:
    from channels.db import database_sync_to_async

    frames = [event async for event in preview_events(store, version, question.text, max_tokens=MAX_TOKENS)]
    facts = next((f.get("facts", "") for f in frames if f["type"] == "end"), "")
    return await database_sync_to_async(answers.judge_version_answer, thread_sensitive=False)(
        question, frames, version, facts
    )


def _progress(version_id: int, **fields: Any) -> None:
    # Straight to the row: these are the score's own fields, which no other change of the version touches.
    PromptVersion.objects.filter(pk=version_id).update(**fields)


def score_version(version_id: int) -> PromptVersion:
    """Score one version and store the result on it; progress is written after every question."""
    version = PromptVersion.objects.select_related("store").get(pk=version_id)
    store = version.store
    questions = questions_for(store)
    text_hash = version.text_hash()
    _progress(version_id, score_state=RUNNING, score_done=0, score_total=len(questions),
              score_started_at=timezone.now())  # fmt: skip
    outcomes: list[answers.Outcome] = []
    try:
        for i, question in enumerate(questions, 1):
            outcomes.append(async_to_sync(_answer)(store, version, question))
            _progress(version_id, score_done=i)
    except Exception as exc:  # the engine went away, the database failed: the owner sees why, publish still works
        logger.exception("scoring v%s of %s failed", version.version, store.slug)
        mark_failed(version_id, exc)
        return PromptVersion.objects.get(pk=version_id)
    summary = answers.summarize(outcomes)
    report = {
        "summary": summary,
        "failures": answers.failures(summary),
        "questions": [
            {"question": o.question, "answer": o.answer, "finish_reason": o.finish_reason, "reply": o.reply,
             "error": o.error, "checks": answers.checks(o)}
            for o in outcomes
        ],
    }  # fmt: skip
    _progress(
        version_id, score=score_of(outcomes), score_report=report, score_text_hash=text_hash, score_state=DONE,
        scored_at=timezone.now(),
    )  # fmt: skip
    return PromptVersion.objects.get(pk=version_id)


def needs_score(version: PromptVersion | None) -> bool:
    return version is not None and version.score_current is None and not version.score_running


def mark_running(version_id: int) -> None:
    """Before the task is queued: a page loaded before a worker picks it up already shows the scoring under way
    (and publishing waits for it)."""
    _progress(version_id, score_state=RUNNING, score_done=0, score_started_at=timezone.now())


def mark_failed(version_id: int, error: BaseException) -> None:
    _progress(version_id, score_state=FAILED, score_report={"error": str(error)[:500]}, scored_at=timezone.now())


def score_for_publish(version_id: int, force: bool = False) -> None:
    """Score a version (a draft: only if its text has no score yet, unless ``force``), and the published version
    too if it has no score yet (an older version): the history shows them side by side and a draft's score is
    compared with it."""
    version = PromptVersion.objects.get(pk=version_id)
    if force or version.score_current is None:
        version = score_version(version_id)
    published = PromptVersion.objects.filter(store_id=version.store_id, status=PromptVersion.Status.PUBLISHED).first()
    if needs_score(published):
        score_version(published.pk)


def worse_than_published(version: PromptVersion, published: PromptVersion | None) -> bool:
    """The draft scored lower than the version shoppers get now (both scored on their current text)."""
    if published is None or version.score_current is None or published.score_current is None:
        return False
    return version.score_current < published.score_current


# The evaluation's checks as an owner reads them: what is wrong with an answer that fails one.
FAILED_CHECK_WORDS = {
    "answered": "no answer",
    "no_loop": "repetition",
    "no_human_claim": "a claim to be a person",
    "no_unsupported_figures": "a price or figure the catalog does not have",
    "no_unsupported_shown": "words the store's data does not support",
    "no_checker_flags": "sentences the checker left out",
    "no_disowning": "disowning the store",
    "no_narrating": "talking about the shopper instead of to them",
    "no_contradicting": "contradicting its cards or quote",
    "not_cut": "stopping mid-sentence",
    "not_empty": "nothing said",
    "short": "over 150 words",
    "product_in_cards": "the product asked for not among the cards",
    "fact_on_screen": "the policy fact asked for not on screen",
    "no_match_handled": "no word that the store does not sell it",
    "handoff_recorded": "no handoff to a person",
    **instructions.WORDS,  # the owner's prompt followed (its guidance: language, suggestions, avoid, tone)
}
# The summary's counts (answers.misses) and the check each counts the failures of.
_COUNTED = {
    "loops": "no_loop", "human_claims": "no_human_claim", "unsupported_figures": "no_unsupported_figures",
    "unsupported_shown": "no_unsupported_shown", "checker_flags": "no_checker_flags", "disowning": "no_disowning",
    "narrating": "no_narrating", "contradicting": "no_contradicting", "cut": "not_cut", "empty": "not_empty",
}  # fmt: skip
_RATE_WORDS = {
    "product_in_cards": "product questions with the product among the cards",
    "fact_on_screen": "policy questions with the fact on screen",
    "no_match_handled": "questions about what the store does not sell answered as such",
    "handoff_recorded": "requests for a person handed to one",
}


def failed_checks_in_words(checks: dict[str, bool]) -> list[str]:
    """One answer's failed checks (``answers.checks``) in an owner's words; an answer that never came: just that."""
    if checks.get("answered") is False:
        return [FAILED_CHECK_WORDS["answered"]]
    return [FAILED_CHECK_WORDS.get(name, name) for name, ok in checks.items() if not ok]


def missed_in_words(report: dict[str, Any]) -> list[str]:
    """The thresholds a stored score report missed (``answers.misses`` of its summary), in an owner's words."""
    summary = report.get("summary") or {}
    if "errors" not in summary:  # no summary to read: the report's own lines
        return list(report.get("failures", []))
    questions = summary.get("questions", 0)
    lines = []
    for name, value, bar in answers.misses(summary):
        if name == "errors":
            lines.append(f"{value} of {questions} questions got no answer")
        elif name == "median_words":
            lines.append(f"answers run long (median {value} words; at most {bar})")
        elif name in _RATE_WORDS:
            lines.append(f"{_RATE_WORDS[name]}: {value:.0%} (needs {bar:.0%})")
        else:
            lines.append(f"{FAILED_CHECK_WORDS[_COUNTED[name]]} in {value} answer{'s' if value != 1 else ''}")
    return lines
