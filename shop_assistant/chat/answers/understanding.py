"""Understanding a message once: a planner turns it into tool calls, the tools compose the answer from the store's
data (``tools``).

Two planners, chosen by the setting ``ANSWER_PLANNER``:
- ``rules`` (``planning.rules``): patterns; instant, English, the structures it knows (totals, capacity, ...);
- ``model`` (``planning.model``): the engine's model, constrained to the tools' schemas; any language and
  wording, seconds on a CPU.
"auto" (the default) takes the rules' plan when they recognised the message (anything but their last-resort
catalog search) and asks the model otherwise, when the served model can plan. A model plan that fails validation
falls back to the rules' plan: facts never depend on the model, only the choice of tool does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from catalog.models import Store

from . import tools
from .composition import Composition
from .planning import model, rules


@dataclass(frozen=True)
class Understood:
    composition: Composition
    calls: list[tools.Call]
    planner: str  # "rules" or "model"
    plan_seconds: float = 0.0  # the model planner's time, 0 for the rules
    model_error: str = ""  # why the model's plan was not used


def _asks_model(engine: Any, calls: list[tools.Call]) -> bool:
    mode = getattr(settings, "ANSWER_PLANNER", "auto")
    if engine is None or mode == "rules" or not model.can_plan(engine):
        return False
    return mode == "model" or rules.is_last_resort(calls)


def understand(
    store: Store,
    text: str,
    retrieve: Any,
    previous: str = "",
    shown: Sequence[dict[str, Any]] = (),
    *,
    engine: Any = None,
    prompt: str = "",
) -> Understood:
    """Plan ``text`` as tool calls and run them.

    ``previous`` is the shopper's message before this one: a follow-up that finds nothing on its own ("anything
    under 50 dollars?") is searched again together with it. ``shown``: the cards of the latest answer that had
    some ("which of those is lighter?", "what would both cost together?"). ``retrieve(store, text, **filters)``
    is the catalog lookup. ``engine`` and ``prompt`` (the store's prompt): for the model planner. Blocking
    (database, embeddings, the engine): a worker thread.
    """
    context = tools.Context(store, text, retrieve, previous, shown)
    calls, planner, seconds, error = rules.plan(context), "rules", 0.0, ""
    if _asks_model(engine, calls):
        titles = [str(card.get("title") or "") for card in shown]
        planned = model.plan(engine, store, prompt, text, previous, titles)
        seconds, error = planned.seconds, planned.error
        if planned.calls:
            calls, planner = planned.calls, "model"
    return Understood(tools.execute(context, calls), calls, planner, seconds, error)


def compose(
    store: Store, text: str, retrieve: Any, previous: str = "", shown: Sequence[dict[str, Any]] = ()
) -> Composition:
    """``understand`` with the rule planner alone."""
    return understand(store, text, retrieve, previous, shown).composition
