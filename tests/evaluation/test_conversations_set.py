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


def test_the_fresh_split_is_24_new_conversations_of_the_same_kinds():
    """The held-out split written 2026-12-06: the kinds in about the halves' proportions, Spanish, French and
    German among them, and no shopper's words taken over from a row of the other splits."""
    fresh = [c for c in SET if c["split"] == "fresh"]
    assert [c["id"] for c in fresh] == [f"fresh-{n:02d}" for n in range(1, 25)]
    assert Counter(c["kind"] for c in fresh) == {
        "budget": 3, "gift": 3, "need": 2, "total": 2, "capacity": 2, "compare": 2, "stock": 1, "typo": 2,
        "language": 4, "handoff": 1, "policy": 1, "no_match": 1,
    }  # fmt: skip
    assert {"es", "fr", "de"} <= {c["language"] for c in fresh}
    assert {c["kind"] for c in fresh} <= {c["kind"] for c in SET if c["split"] == "test"}
    seen = {turn["shopper"].lower() for c in SET if c["split"] != "fresh" for turn in c["turns"]}
    assert not seen & {turn["shopper"].lower() for c in fresh for turn in c["turns"]}


def test_a_gift_budget_names_only_products_in_stock_under_it():
    """A fresh gift with a budget is right with any card under it: the products it accepts all have a variant in
    stock at or under the budget the shopper gave."""
    budgets = {"fresh-04": Decimal("70"), "fresh-06": Decimal("40")}
    for conversation in SET:
        if conversation["id"] in budgets:
            accepted = conversation["turns"][0]["expect"]["cards_include_any"]
            for handle in accepted:
                assert any(Decimal(v["price"]) <= budgets[conversation["id"]] and v["inventory_quantity"] > 0
                           for v in HANDLES[handle]["variants"]), (conversation["id"], handle)  # fmt: skip


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
