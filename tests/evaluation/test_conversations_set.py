"""The understanding issue's conversation set (shop_assistant/evaluation/conversations.json), written before any
tuning: every product it names is in the demo store, both halves cover every kind, and the figures it expects
can be made from the store's own prices."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SET = json.loads((ROOT / "shop_assistant" / "evaluation" / "conversations.json").read_text())["conversations"]
CATALOG = json.loads((ROOT / "shop_assistant" / "demo" / "demo_catalog.json").read_text())
HANDLES = {p["handle"]: p for p in CATALOG["products"]}
DOC_KINDS = {d["kind"] for d in CATALOG["documents"]}


def _expectations():
    for conversation in SET:
        for turn in conversation["turns"]:
            yield conversation["id"], turn["expect"]


def test_at_least_sixty_conversations_split_dev_and_test_with_every_kind_in_both():
    assert len(SET) >= 60
    assert len({c["id"] for c in SET}) == len(SET)
    kinds = Counter(c["kind"] for c in SET)
    for split in ("dev", "test"):
        present = {c["kind"] for c in SET if c["split"] == split}
        assert {kind for kind, count in kinds.items() if count >= 2} <= present, split
    assert {"es", "fr", "de"} <= {c["language"] for c in SET if c["split"] == "test"}


@pytest.mark.parametrize("key", ["cards_include", "cards_exclude", "cards_include_any"])
def test_every_product_named_is_in_the_demo_store(key):
    for cid, expect in _expectations():
        for handle in expect.get(key, []):
            assert handle in HANDLES, (cid, handle)
    for cid, expect in _expectations():
        if "cards_first" in expect:
            assert expect["cards_first"] in HANDLES, cid
        if "quote_from" in expect:
            assert expect["quote_from"] in DOC_KINDS, cid


def test_a_stock_expectation_matches_the_variant_it_names():
    checked = 0
    for cid, expect in _expectations():
        if "sku_options" not in expect or "cards_include" not in expect:
            continue
        product = HANDLES[expect["cards_include"][0]]
        variants = [v for v in product["variants"] if all(v.get("options", {}).get(k) == o for k, o in expect["sku_options"].items())]
        assert variants, cid
        assert any(v["inventory_quantity"] > 0 for v in variants) == expect["in_stock"], cid
        checked += 1
    assert checked >= 6


def test_a_price_ceiling_leaves_something_to_show():
    for cid, expect in _expectations():
        if "cards_max_price" in expect:
            ceiling = Decimal(expect["cards_max_price"])
            assert any(Decimal(v["price"]) <= ceiling for p in HANDLES.values() for v in p["variants"]), cid
            for handle in expect.get("cards_include", []):
                assert min(Decimal(v["price"]) for v in HANDLES[handle]["variants"]) <= ceiling, cid
