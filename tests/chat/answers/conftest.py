"""Fixtures for the answer tools and planners: the demo store with its embeddings (search ranks by them), built
once per module and committed so every test of the module reads it; removed after the module."""

from __future__ import annotations

from typing import Any

import pytest

from catalog.models import Store, Variant


@pytest.fixture(scope="session")
def embedding_model() -> None:
    """all-MiniLM-L6-v2, loaded once for the session."""
    from catalog import embeddings

    embeddings.get_model()


@pytest.fixture(scope="module")
def shop(django_db_setup, django_db_blocker, embedding_model) -> Store:
    from django.contrib.auth import get_user_model

    from catalog import search
    from shop_assistant.demo.store import STAFF_USERNAME, load_demo_store

    with django_db_blocker.unblock():
        result = load_demo_store(embed=True, password="x")
        search.clear_index()
        yield result.store
        result.store.delete()
        search.clear_index()
        if result.user_created:
            get_user_model().objects.filter(username=STAFF_USERNAME).delete()


def cards_of(store: Store, *titles: str) -> list[dict[str, Any]]:
    """A card per product, as the chat shows them (each product's first variant)."""
    cards = []
    for title in titles:
        variant = Variant.objects.filter(store=store, product__title=title).order_by("pk").first()
        assert variant is not None, title
        cards.append({"sku": variant.sku, "title": title, "price": str(variant.price), "currency": "USD",
                      "url": "", "image": "", "in_stock": variant.in_stock})  # fmt: skip
    return cards


# A tools branch in the shape of Qwen2.5's (the functions after the system message, one JSON line each): the
# bundled model's tokenizer with it stands for a model that can plan, without loading one.
TOOLS_TEMPLATE = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{%- if loop.first and tools %}\n<tools>{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools>{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
EOS = 2  # SmolLM2's <|im_end|>


@pytest.fixture(scope="session")
def bundled_tokenizer() -> Any:
    """The bundled SmolLM2-135M's tokenizer: its chat template has no tools branch."""
    from inference.worker.loader import load_tokenizer, resolve_model

    return load_tokenizer(resolve_model(None))


@pytest.fixture(scope="session")
def tools_tokenizer(bundled_tokenizer) -> Any:
    import copy

    tokenizer = copy.deepcopy(bundled_tokenizer)
    tokenizer.chat_template = TOOLS_TEMPLATE
    return tokenizer


@pytest.fixture(scope="session")
def grammar_compiler(bundled_tokenizer) -> Any:
    """The engine's grammar compiler (``inference.structured``) on the bundled tokenizer."""
    from inference.structured.compiler import GrammarCompiler

    return GrammarCompiler(bundled_tokenizer, len(bundled_tokenizer), [EOS])


def accepts(compiled: Any, text: str) -> bool:
    """Whether the compiled grammar takes ``text`` whole and may end there (xgrammar's matcher, no tokens)."""
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(compiled)
    return bool(matcher.accept_string(text) and matcher.accept_token(EOS) and matcher.is_terminated())
