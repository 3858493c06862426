"""Proposed search synonyms: the store's catalog vocabulary translated by the planning model, for the owner to
accept in the studio (``catalog.synonyms.propose`` does the rest: the vocabulary, the schema, the rows).

The model answers under a JSON-schema constraint ({english term: [translations]}, ``inference.structured``), so
its text always parses; what it says is still a proposal: a wrong translation would change what every shopper of
that language is shown, so nothing is used until the owner accepts it. Only a model that can plan translates (the
Qwen2.5 1.5B, whose chat template has a tools branch); the bundled 135M writes no usable JSON (issue 35).

Run once after an import, never per message: ``python manage.py propose_synonyms --store SLUG``. Not a Celery
task, for the scorer's reason (``studio.tasks``): a worker would load a copy of the model of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync

from catalog import synonyms, terms
from catalog.models import Store
from inference.chat_template import encode_chat, has_tools_branch
from inference.core.sampling_params import SamplingParams, StructuredOutputsParams

MAX_TOKENS = 1024  # a batch of 24 terms with up to three translations each


class CannotTranslate(RuntimeError):
    """The served model cannot be asked for translations (no tool-calling format: the bundled 135M)."""


def engine_ask(engine: Any) -> Callable[[str, dict], str]:
    """``ask(prompt, schema) -> JSON text`` on ``engine``, greedy and constrained to ``schema``."""

    async def complete(token_ids: list[int], schema: dict) -> str:
        params = SamplingParams(
            temperature=0.0, max_tokens=MAX_TOKENS, structured_outputs=StructuredOutputsParams(json=schema)
        )
        text = ""
        async for delta in engine.stream(f"synonyms-{uuid.uuid4().hex[:12]}", token_ids, params):
            text += delta.text
        return text

    def ask(prompt: str, schema: dict) -> str:
        with engine.tokenizer_held() as tokenizer:
            token_ids = encode_chat(tokenizer, [{"role": "user", "content": prompt}])
        return async_to_sync(complete)(token_ids, schema)

    return ask


def propose_for_store(store: Store, engine: Any, languages: tuple[str, ...] = ("es", "fr", "de")) -> synonyms.Imported:
    """Store the model's translations of ``store``'s vocabulary as proposed synonyms (see the module's docstring)."""
    if not has_tools_branch(engine.tokenizer):
        raise CannotTranslate("the served model cannot plan or translate: serve the 1.5B planning model")
    return synonyms.propose(store, engine_ask(engine), languages, english_words=terms.english_words())
