"""The conversation evaluation: each rule of the scorer on hand-made answers (each can pass and fail), the wrong
facts it finds, its tallies, and a real run of a few conversations through the chat pipeline and the command."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.management import call_command

from shop_assistant.evaluation import conversations as evaluation
from shop_assistant.evaluation.catalog_view import CatalogView, ProductRow, VariantRow
from shop_assistant.evaluation.conversation_checks import (
    RULES,
    Context,
    TurnRecord,
    language_of,
    money_figures,
    score,
    wrong_facts,
)

# A few of the demo store's rows, as the catalog view holds them.
RETURNS = ("You can return unused items in their original condition within 30 days of delivery for a full refund. "
           "Worn footwear, used stoves and opened first aid kits cannot be returned unless they are faulty.")
SHIPPING = "Standard shipping takes 3 to 5 business days and costs 6.95 USD; it is free on orders over 50 USD."


def _product(handle: str, title: str, *variants: tuple) -> ProductRow:
    rows = (VariantRow(sku, handle, Decimal(price), Decimal(was) if was else None, stocked, options)
            for sku, price, was, stocked, options in variants)
    return ProductRow(handle, title, tuple(rows))


CATALOG = CatalogView(
    {
        "ridgeline-2p-tent": _product("ridgeline-2p-tent", "Ridgeline 2-Person Tent",
                                      ("DO-RT2-SAGE", "249.00", "279.00", True, {"Color": "Sage"}),
                                      ("DO-RT2-ORNG", "249.00", "279.00", False, {"Color": "Orange"})),
        "basecamp-6-family-tent": _product("basecamp-6-family-tent", "Basecamp 6 Family Tent",
                                           ("DO-BC6", "429.00", None, True, {})),
        "stormshell-rain-jacket-mens": _product("stormshell-rain-jacket-mens", "Men's Stormshell Rain Jacket",
                                                ("DO-SSM-M-BLK", "189.00", None, True, {"Size": "M", "Color": "Black"}),
                                                ("DO-SSM-M-NVY", "189.00", None, False, {"Size": "M", "Color": "Navy"}),
                                                ("DO-SSM-L-NVY", "189.00", None, True, {"Size": "L", "Color": "Navy"})),
        "stormshell-rain-jacket-womens": _product("stormshell-rain-jacket-womens", "Women's Stormshell Rain Jacket",
                                                  ("DO-SSW-M", "189.00", None, True, {"Size": "M"})),
        "merino-hiking-socks": _product("merino-hiking-socks", "Merino Hiking Socks (3-Pack)",
                                        ("DO-MS-M", "24.00", None, True, {"Size": "M"})),
    },
    {"returns": RETURNS, "shipping": SHIPPING},
)
TENT = {"sku": "DO-RT2-SAGE", "title": "Ridgeline 2-Person Tent (Sage)", "price": "249.00", "in_stock": True}
ORANGE = {"sku": "DO-RT2-ORNG", "title": "Ridgeline 2-Person Tent (Orange)", "price": "249.00", "in_stock": False}
FAMILY = {"sku": "DO-BC6", "title": "Basecamp 6 Family Tent", "price": "429.00", "in_stock": True}
NAVY_M = {"sku": "DO-SSM-M-NVY", "title": "Men's Stormshell Rain Jacket (M / Navy)", "price": "189.00",
          "in_stock": False}


def judged(expect: dict, text: str = "", earlier: list[str] | None = None, **shown) -> dict:
    record = TurnRecord(shopper="q", expect=expect, text=text, **shown)
    return score(record, Context(CATALOG, earlier or []))


@pytest.mark.parametrize(
    ("expect", "cards", "holds"),
    [
        ({"cards_include": ["ridgeline-2p-tent", "basecamp-6-family-tent"]}, [FAMILY, TENT], True),
        ({"cards_include": ["ridgeline-2p-tent", "basecamp-6-family-tent"]}, [TENT], False),
        ({"cards_exclude": ["ridgeline-2p-tent"]}, [FAMILY], True),
        ({"cards_exclude": ["ridgeline-2p-tent"]}, [FAMILY, ORANGE], False),  # any variant of it counts
        ({"cards_include_any": ["ridgeline-2p-tent", "merino-hiking-socks"]}, [TENT], True),
        ({"cards_include_any": ["ridgeline-2p-tent", "merino-hiking-socks"]}, [FAMILY], False),
        ({"cards_first": "ridgeline-2p-tent"}, [TENT, FAMILY], True),
        ({"cards_first": "ridgeline-2p-tent"}, [FAMILY, TENT], False),
        ({"cards_first": "ridgeline-2p-tent"}, [], False),
        ({"cards_max_price": "250.00"}, [TENT], True),
        ({"cards_max_price": "250.00"}, [TENT, FAMILY], False),
        ({"cards_min_count": 2}, [TENT, FAMILY], True),
        ({"cards_min_count": 2}, [TENT], False),
    ],
)
def test_the_card_rules(expect, cards, holds):
    assert judged(expect, cards=cards) == {next(iter(expect)): holds}


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        ("Together that is 887.00 USD.", True),
        ("That comes to $887 in all.", True),
        ("The total is 887,00 €.", True),
        ("The total is 886.00 USD.", False),
        ("That is 887 items.", False),  # a bare number is not money
        ("", False),
    ],
)
def test_a_total_must_appear_as_money(text, holds):
    assert judged({"total": "887.00"}, text) == {"total": holds}
    assert judged({"difference": "887.00"}, text) == {"difference": holds}


def test_money_figures_read_decimal_commas_and_thousands_and_skip_percentages():
    assert [value for _, value in money_figures("1,299.00 USD, 44,95 €, $20, 15% off, 40 hours")] == [
        Decimal("1299.00"), Decimal("44.95"), Decimal("20")]


@pytest.mark.parametrize(
    ("text", "cards", "holds"),
    [
        ("", [NAVY_M], True),  # the card of that variant says "Out of stock"
        ("The Men's Stormshell Rain Jacket in M / Navy is sold out right now.", [], True),
        ("The Men's Stormshell Rain Jacket in M / Navy is sold out, but other options are in stock.", [], True),
        ("The Men's Stormshell Rain Jacket is in stock in Navy.", [NAVY_M], False),  # the text says the opposite
        # The women's jacket in M is another product ("Men's ..." is not named inside "Women's ...").
        ("The Women's Stormshell Rain Jacket in size M is in stock.", [NAVY_M], True),
        ("We have rain jackets.", [], False),  # nothing about its stock
        ("", [{**NAVY_M, "sku": "DO-SSM-M-BLK", "in_stock": True}], False),  # another variant's card
    ],
)
def test_a_stock_expectation_is_about_the_variant_asked_for(text, cards, holds):
    expect = {"in_stock": False, "sku_options": {"Size": "M", "Color": "Navy"},
              "cards_include": ["stormshell-rain-jacket-mens"]}
    assert judged(expect, text, cards=cards)["in_stock"] is holds


def test_a_follow_up_stock_question_is_about_the_product_an_earlier_turn_expected():
    expect = {"in_stock": True, "sku_options": {"Size": "L"}}
    said = "Yes, the Men's Stormshell Rain Jacket is in stock in L."
    assert judged(expect, said, earlier=["stormshell-rain-jacket-mens"]) == {"in_stock": True}
    assert judged(expect, said) == {"in_stock": False}  # nobody said which product


def test_a_quote_must_come_from_the_document_of_that_kind():
    quote = [{"title": "Returns", "text": RETURNS.split(". ")[1]}]
    assert judged({"quote_from": "returns"}, quotes=quote) == {"quote_from": True}
    assert judged({"quote_from": "shipping"}, quotes=quote) == {"quote_from": False}
    assert judged({"quote_from": "returns"}, quotes=[{"title": "x", "text": "We take anything back."}]) == {
        "quote_from": False}


def test_a_quote_with_parts_left_out_is_judged_part_by_part():
    from catalog.grounding import ELISION

    first, second = RETURNS.split(". ")
    elided = [{"title": "Returns", "text": f"{second}{ELISION}{first}."}]
    assert judged({"quote_from": "returns"}, quotes=elided) == {"quote_from": True}
    run_on = [{"title": "Returns", "text": f"{second} {first}."}]  # reads as text the store never wrote
    assert judged({"quote_from": "returns"}, quotes=run_on) == {"quote_from": False}


def test_text_rules_ignore_case():
    assert judged({"text_includes": ["59.00", "Poles"]}, "The poles are 59.00 USD.") == {"text_includes": True}
    assert judged({"text_includes": ["59.00", "hammock"]}, "The poles are 59.00 USD.") == {"text_includes": False}
    assert judged({"text_includes_any": ["Lifetime", "forever"]}, "A LIFETIME warranty.") == {"text_includes_any": True}
    assert judged({"text_includes_any": ["lifetime"]}, "A two-year warranty.") == {"text_includes_any": False}


def test_text_rules_read_the_quote_boxes_the_shopper_reads_too():
    """A policy's sentence is shown once, in the quote box under the answer (the order tools): it is read."""
    quote = [{"title": "FAQ", "text": "Orders can be cancelled within one hour of purchase."}]
    assert judged({"text_includes_any": ["one hour"]}, "Which order is it?", quotes=quote) == {"text_includes_any": True}
    assert judged({"text_includes_any": ["one hour"]}, "Which order is it?") == {"text_includes_any": False}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Yes, it holds up to 120 kg.", "yes"),
        ("It does: the pack has a built-in rain cover.", "yes"),
        ("No, the Ridgeline is a tent for two.", "no"),
        ("The Ridgeline 2-Person Tent is only for two people.", "no"),
        ("It isn't big enough for three.", "no"),
        ("The Ridgeline 2-Person Tent is 249.00 USD.", None),  # the facts alone answer neither way
    ],
)
def test_a_yes_or_no_answer(text, said):
    assert judged({"answer": "yes"}, text) == {"answer": said == "yes"}
    assert judged({"answer": "no"}, text) == {"answer": said == "no"}


def test_an_order_question_asks_who_is_asking_and_states_nothing_about_the_order():
    asks = "I can't see orders here. Please sign in or give the email on the order, and a person will check."
    assert judged({"asks_identity": True, "no_order_facts": True}, asks) == {"asks_identity": True,
                                                                           "no_order_facts": True}
    tells = "Your order #1001 has been shipped and will arrive on Friday."
    assert judged({"asks_identity": True, "no_order_facts": True}, tells) == {"asks_identity": False,
                                                                            "no_order_facts": False}


def test_no_match_and_handoff():
    assert judged({"no_match": True}, "Sorry, we don't carry kayaks.", reply="no_match") == {"no_match": True}
    assert judged({"no_match": True}, "Here are some tents.", cards=[TENT]) == {"no_match": False}
    assert judged({"handoff": True}, "Someone will answer here.", handoff=True) == {"handoff": True}
    assert judged({"handoff": True}, "I can help with that myself.") == {"handoff": False}


def test_an_answer_in_english_to_a_spanish_question_fails_the_language_check():
    record = TurnRecord("¿Tienen chaquetas?", {"language": "es"}, text="We have two rain jackets for you in stock.")
    record.checks = score(record, Context(CATALOG))
    assert record.checks == {"language": False} and not record.right
    spanish = TurnRecord("¿Tienen chaquetas?", {"language": "es"}, text="Sí, tenemos dos chaquetas impermeables.")
    spanish.checks = score(spanish, Context(CATALOG))
    assert spanish.checks == {"language": True} and spanish.right


def test_the_language_check_reads_the_answer_without_the_shown_products_names():
    card = {"sku": "DO-B400", "title": "Beam 400 Rechargeable Headlamp", "price": "44.95", "in_stock": True}
    text = "Tenemos Beam 400 Rechargeable Headlamp por 44.95 USD."
    assert language_of(text) == "en"  # what the names alone make of the sentence
    spanish = TurnRecord("¿Cuánto cuesta la linterna frontal?", {"language": "es"}, text=text, cards=[card])
    assert score(spanish, Context(CATALOG)) == {"language": True}
    english = TurnRecord("¿Cuánto cuesta la linterna frontal?", {"language": "es"}, cards=[card],
                         text="There's the Beam 400 Rechargeable Headlamp, at 44.95 USD, and it is in stock now.")
    assert score(english, Context(CATALOG)) == {"language": False}


def test_every_key_of_the_set_has_a_rule_and_an_unknown_key_is_an_error():
    conversations = [c for split in ("all", "fresh") for c in evaluation.load_conversations(split=split)[1]]
    used = {key for c in conversations for turn in c.turns for key in turn["expect"]}
    assert used - {"sku_options"} <= RULES.keys()
    with pytest.raises(ValueError, match="no rule"):
        judged({"cards_include": [], "mood": "happy"})


def test_an_answer_that_did_not_come_holds_nothing():
    record = TurnRecord("q", {"no_match": True}, error="timeout: no `end` frame")
    record.checks = score(record, Context(CATALOG))
    assert record.checks == {"no_match": False} and not record.right


def wrong(text: str = "", cards: list | None = None, expect: dict | None = None, shopper: str = "q") -> list[str]:
    record = TurnRecord(shopper=shopper, expect=expect or {}, text=text, cards=cards or [])
    return wrong_facts(record, Context(CATALOG))


def test_a_clean_answer_has_no_wrong_facts():
    text = ("The Ridgeline 2-Person Tent is on sale at 249.00 USD (was 279.00 USD), and the Orange one is out of "
            "stock. Shipping is 6.95 USD, free over 50 USD. The Basecamp 6 Family Tent costs 429.00 USD.")
    assert wrong(text, [TENT, FAMILY]) == []
    assert wrong("La Ridgeline 2-Person Tent cuesta 249,00 USD.", [TENT]) == []


def test_wrong_prices_stock_and_totals_are_found():
    assert wrong(cards=[{**TENT, "price": "199.00"}]) == [
        "card Ridgeline 2-Person Tent (Sage): price 199.00, the catalog says 249.00"]
    assert wrong(cards=[{**ORANGE, "in_stock": True}])[0].startswith("card Ridgeline 2-Person Tent (Orange): in_stock")
    # A price of another product, in a sentence naming this one.
    [price] = wrong("The Ridgeline 2-Person Tent costs 429.00 USD.", [TENT, FAMILY])
    assert price.startswith("price 429.00 USD is none of the prices of Ridgeline 2-Person Tent")
    # With no product named, the cards' products are what the price is about.
    assert wrong("It costs $199.", [TENT])[0].startswith("price $199 is none of")
    [stock] = wrong("The Basecamp 6 Family Tent is out of stock.", [FAMILY])
    assert stock.startswith("stock: Basecamp 6 Family Tent said out of stock")
    # Out of stock in one colour of two is no wrong fact about the product as a whole.
    assert wrong("The Ridgeline 2-Person Tent is out of stock.", [TENT]) == []
    assert wrong("The Ridgeline 2-Person Tent in Orange is in stock.")[0].startswith("stock:")
    total = {"total": "678.00"}
    assert wrong("Both come to 678.00 USD.", [TENT, FAMILY], total) == []
    assert wrong("Both come to 687.00 USD.", [TENT, FAMILY], total)[0].startswith(
        "figure 687.00 USD is neither a price nor the expected 678.00")
    # A figure the shopper gave (a budget) or a few of one item on the way to the total is no wrong fact.
    assert wrong("Two bags are 48.00 USD, so 70.00 USD with the beanie.", [], {"total": "70.00"}) == []
    assert wrong("Under your $300 budget: the Ridgeline 2-Person Tent.", [TENT], shopper="tent under $300?") == []


def _conversation(cid: str, split: str, kind: str, rights: list[bool]) -> evaluation.Conversation:
    conversation = evaluation.Conversation(cid, split, kind, "en", [{"shopper": "q", "expect": {}}] * len(rights))
    for right in rights:
        record = TurnRecord("q", {"handoff": True}, text="One. Two.", sentences=2, model_sentences=1,
                            first_text_ms=100.0, seconds=1.0)
        record.checks = {"handoff": right}
        conversation.records.append(record)
    return conversation


def test_the_tallies_count_a_conversation_right_only_when_every_turn_is():
    conversations = [_conversation("a", "dev", "total", [True]), _conversation("b", "test", "total", [True, False]),
                     _conversation("c", "test", "stock", [True, True])]
    summary = evaluation.summarize(conversations)
    assert summary["by_kind"]["total"] == {
        "dev": {"right": 1, "total": 1, "percent": 100.0, "turns_right": 1, "turns": 1},
        "test": {"right": 0, "total": 1, "percent": 0.0, "turns_right": 1, "turns": 2},
        "all": {"right": 1, "total": 2, "percent": 50.0, "turns_right": 2, "turns": 3},
    }
    assert set(summary["by_kind"]["stock"]) == {"test", "all"}
    assert summary["by_split"]["test"]["right"] == 1 and summary["overall"]["percent"] == round(200 / 3, 1)
    assert summary["checks_failed"] == {"handoff": 1}
    assert summary["model_sentence_share"] == 0.5 and summary["first_text_ms_median"] == 100.0


def test_the_set_loads_by_split_and_by_id():
    store, everything = evaluation.load_conversations()
    assert store == "demo" and len(everything) == 75
    _, test = evaluation.load_conversations(split="test")
    assert test and {c.split for c in test} == {"test"}
    # "all" keeps meaning the two halves written before any tuning; the held-out split loads only on its own.
    assert {c.split for c in everything} == {"dev", "test"}
    _, fresh = evaluation.load_conversations(split="fresh")
    assert len(fresh) == 24 and {c.split for c in fresh} == {"fresh"}
    _, picked = evaluation.load_conversations(split="fresh", only=["fresh-03"])
    assert [c.id for c in picked] == ["fresh-03"]
    with pytest.raises(ValueError, match="fresh-03"):
        evaluation.load_conversations(only=["fresh-03"])
    _, two = evaluation.load_conversations(only=["followup-02", "handoff-01"])
    assert [c.id for c in two] == ["followup-02", "handoff-01"]
    with pytest.raises(ValueError, match="kayak-99"):
        evaluation.load_conversations(only=["kayak-99"])


def test_the_command_takes_each_split_and_all():
    from shop_assistant.evaluation.management.commands.evaluate_conversations import Command

    parser = Command().create_parser("manage.py", "evaluate_conversations")
    for split in ("dev", "test", "fresh", "all"):
        assert parser.parse_args(["--split", split]).split == split
    assert parser.parse_args([]).split == "all"


def test_the_catalog_view_reads_the_demo_store(db):
    from shop_assistant.demo.store import load_demo_store

    store = load_demo_store(embed=False, password="x").store
    catalog = CatalogView.from_store(store)
    orange = catalog.variant("DO-RT2-ORNG")
    assert orange is not None and orange.handle == "ridgeline-2p-tent" and not orange.in_stock
    assert orange.price == Decimal("249.00") and orange.compare_at == Decimal("279.00")
    assert catalog.variant("DO-SSM-M-NVY").matches({"Size": "M", "Color": "navy"})
    assert [p.handle for p in catalog.named_in("Two Merino Hiking Socks and a hat")] == ["merino-hiking-socks"]
    assert "Worn footwear" in catalog.documents["returns"]


@pytest.mark.slow
@pytest.mark.backend_agnostic
def test_a_real_run_carries_the_conversation_over_and_reports_every_turn(demo_store, chat_engine, chat_settings,
                                                                         tmp_path):
    """Three conversations through the real pipeline and the command: a follow-up about the cards shown, a
    handoff and a stock question. No minimum score: what is checked is that the record is the session's."""
    from shop_assistant.chat.models import Conversation

    out = tmp_path / "run.json"
    call_command("evaluate_conversations", only="followup-02,handoff-01,stock-01", json_out=str(out), quiet=True)
    result = json.loads(out.read_text())
    assert result["planner"] == "rules"
    runs = {c["id"]: c for c in result["conversations"]}
    assert [len(runs[cid]["turns"]) for cid in ("followup-02", "handoff-01", "stock-01")] == [3, 1, 1]
    for run in runs.values():
        for turn in run["turns"]:
            assert turn["text"].strip() and not turn["error"]
            assert set(turn["checks"]) == set(turn["expect"]) - {"sku_options"}
            assert turn["right"] == all(value is not False for value in turn["checks"].values())
            assert turn["first_text_ms"] is not None and turn["seconds"] > 0
        assert run["right"] == all(turn["right"] for turn in run["turns"])
    tents, which = runs["followup-02"]["turns"][:2]
    # "Which one is cheaper?" is about the tents the first turn showed: the same session's cards.
    shown = {card["sku"] for card in tents["cards"]}
    assert shown and {card["sku"] for card in which["cards"]} <= shown
    # One stored conversation per conversation run, and the handoff turn's flag is the stored one.
    assert Conversation.objects.filter(store=demo_store).count() == 3
    stored_handoffs = Conversation.objects.filter(store=demo_store, status="handoff").count()
    assert stored_handoffs == sum(turn["handoff"] for run in runs.values() for turn in run["turns"][-1:])
    assert result["summary"]["overall"]["total"] == 3 and result["summary"]["overall"]["turns"] == 5
