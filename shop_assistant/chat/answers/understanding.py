"""Understanding a message once: a planner turns it into tool calls, the tools compose the answer from the store's
data (``tools``).

Two planners, chosen by the setting ``ANSWER_PLANNER``:
- ``rules`` (``planning.rules``): patterns; instant, English, the structures it knows (totals, capacity, ...);
- ``model`` (``planning.model``): the engine's model, constrained to the tools' schemas; any language and
  wording, seconds on a CPU.
"auto" (the default) asks the model, when the served model can plan, only where the rules fall short: a message the
rules did not recognise (their last-resort catalog search) whose search found nothing, or, in another language, one
whose words (the thing asked for included) the store's synonyms did not read.
Everything else is answered at the rules' speed. A model plan that fails validation falls back to the rules' plan:
facts never depend on the model, only the choice of tool does.

A message not in English that only the rules planned, and whose plan found nothing (``NO_MATCH``), was not
understood: the rules read English words, so "we don't carry that" would be a claim about the catalog that nobody
checked (issue 40: "¿Tienen chaquetas impermeables?" was told the store has none, and counted as a request the store
cannot serve). It gets the not-understood reply in the shopper's language instead (``NOT_UNDERSTOOD``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from catalog import language, terms
from catalog.models import Store

from shop_assistant.orders import conversations
from shop_assistant.runtime import engine_service

from . import tools
from .composition import MODEL, NO_MATCH, NOT_UNDERSTOOD, Composition, is_small_talk, not_understood_reply
from .planning import model, rules

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Understood:
    composition: Composition
    calls: list[tools.Call]
    planner: str  # "rules" or "model"
    plan_seconds: float = 0.0  # the model planner's time, 0 for the rules
    model_error: str = ""  # why the model's plan was not used
    reading: str = ""  # the message as the opening reads it (``read_as``)


def _planner_mode(engine: Any) -> str:
    mode = getattr(settings, "ANSWER_PLANNER", "auto")
    return "rules" if engine is None or not model.can_plan(engine) else mode


def _rules_fall_short(context: tools.Context, calls: list[tools.Call], composition: Composition) -> bool:
    found = composition.cards or composition.answers or composition.quotes
    if context.language != "en":
        # The rules read other languages through the store's synonyms (and their own patterns for a person or a
        # count of people): their plan stands when it recognised a structure, or when its search read the message
        # in the store's words and found it ("¿Tienen chaquetas impermeables?": "jacket waterproof"), the thing
        # asked for included ("¿Venden bicicletas de montaña?" reads only "montaña": the model's).
        if not rules.is_last_resort(calls):
            return False
        read = calls[0].arguments.query != context.text and terms.reads_the_thing(
            context.store, context.text, lang=context.language)
        return not (read and found and composition.kind == MODEL)
    nothing = composition.kind == NO_MATCH or not (found or is_small_talk(context.text))
    return rules.is_last_resort(calls) and nothing


def _adds_understanding(context: tools.Context, rules_calls: list[tools.Call], model_calls: list[tools.Call]) -> bool:
    """The model's plan says something the shopper's English words did not: another tool, or search words that
    are not the message's own ("ear warmers" for "her ears get cold"). The same words searched again ("kayaks")
    would only find what the rules' search ranked below the bar."""
    if context.language != "en" or len(model_calls) != 1 or model_calls[0].name != "search_products":
        return True
    if rules_calls[0].name != "search_products":
        return True
    asked = set(re.findall(r"[a-z0-9]+", context.text.lower()))
    return not set(re.findall(r"[a-z0-9]+", model_calls[0].arguments.query.lower())) <= asked


def _by_the_rules(context: tools.Context, calls: list[tools.Call], composition: Composition | None) -> Composition:
    """The rules' answer, unless they could not read the message: then the not-understood reply. In another
    language that is a search that found nothing, or products found by the words around what was asked for
    ("¿Venden bicicletas de montaña?" showed hiking boots for "montaña")."""
    composition = composition or tools.execute(context, calls)
    if context.language == "en":
        return composition
    unread = composition.kind == NO_MATCH and not composition.topic
    read_in_part = rules.is_last_resort(calls) and bool(composition.cards) and not terms.reads_the_thing(
        context.store, context.text, lang=context.language)
    if unread or read_in_part:
        return Composition(NOT_UNDERSTOOD, reply=not_understood_reply())
    return composition


def read_as(context: tools.Context, calls: Sequence[tools.Call]) -> str:
    """The message as the opening reads it for what is asked (on sale, in stock, waterproof): its English words. A
    message in another language is followed by the English words its plan searched ("¿Qué productos están en
    oferta?" searched "on sale"), so its answer says the markdowns as the English one does."""
    if context.language == "en":
        return context.text
    queries = [str(getattr(c.arguments, "query", "") or "") for c in calls]
    return " ".join([context.text, *(q for q in queries if q)])


def understand(
    store: Store,
    text: str,
    retrieve: Any,
    previous: str = "",
    shown: Sequence[dict[str, Any]] = (),
    *,
    engine: Any = None,
    prompt: str = "",
    conversation: Any = None,
) -> Understood:
    """Plan ``text`` as tool calls and run them.

    ``previous`` is the shopper's message before this one: a follow-up that finds nothing on its own ("anything
    under 50 dollars?") is searched again together with it. ``shown``: the cards of the latest answer that had
    some ("which of those is lighter?", "what would both cost together?"). ``retrieve(store, text, **filters)``
    is the catalog lookup. ``engine`` and ``prompt`` (the store's prompt): for the model planner. ``conversation``:
    the chat's (its signed customer, its verified order), None for a preview. Blocking
    (database, embeddings, the engine): a worker thread.
    """
    context = tools.Context(store, text, retrieve, previous, shown, language.detect(text, earlier=previous), conversation,
                            conversations.state_of(conversation))
    mode = _planner_mode(engine)
    calls = rules.plan(context)
    composition = None if mode == "model" else tools.execute(context, calls)
    if mode == "rules" or (composition is not None and not _rules_fall_short(context, calls, composition)):
        return Understood(_by_the_rules(context, calls, composition), calls, "rules", reading=read_as(context, calls))
    titles = [str(card.get("title") or "") for card in shown]
    planned = model.plan(engine, store, prompt, text, previous, titles, priority=engine_service.PLAN_PRIORITY)
    logger.info("model plan in %.1f s for %r: %s %s", planned.seconds, text, planned.raw, planned.error)
    if composition is not None and planned.calls and not _adds_understanding(context, calls, planned.calls):
        planned = model.Planned(None, planned.raw, planned.seconds, "the same search as the rules'")
    if not planned.calls:
        return Understood(_by_the_rules(context, calls, composition), calls, "rules", planned.seconds, planned.error,
                          read_as(context, calls))
    return Understood(tools.execute(context, planned.calls), planned.calls, "model", planned.seconds,
                      reading=read_as(context, planned.calls))


def compose(
    store: Store, text: str, retrieve: Any, previous: str = "", shown: Sequence[dict[str, Any]] = ()
) -> Composition:
    """``understand`` with the rule planner alone."""
    return understand(store, text, retrieve, previous, shown).composition
