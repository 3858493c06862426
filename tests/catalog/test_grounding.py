"""catalog.grounding.ground: the facts and cards the chat consumer uses, against database rows."""

from __future__ import annotations

from decimal import Decimal

import pytest

from catalog.grounding import NO_MATCH, ground, price_limits, product_facts
from catalog.ingest import apply_catalog, read_source
from catalog.passages import kinds_asked
from catalog.models import Product, Store, StoreDocument, Variant
from catalog.search import SearchHit
from shop_assistant.demo.store import CATALOG_PATH

pytestmark = pytest.mark.django_db

CARD_KEYS = {"sku", "title", "price", "currency", "url", "image", "in_stock"}


def test_cards_come_from_the_database_rows(sample_store):
    store, _ = sample_store
    result = ground(store, "I'm looking for a necklace with a bird pendant", k=3)
    assert result.found
    assert result.cards
    for card in result.cards:
        assert set(card) == CARD_KEYS
        variant = Variant.objects.select_related("product").get(store=store, sku=card["sku"])
        assert card["price"] == f"{variant.price:.2f}"
        assert Decimal(card["price"]) == variant.price
        assert card["currency"] == variant.currency
        assert card["in_stock"] == variant.in_stock
        assert card["url"] == f"https://samples.example/products/{variant.product.handle}"
        first_image = variant.product.images.order_by("position").first()
        assert card["image"] == (variant.image_src or first_image.src)
        assert card["title"].startswith(variant.product.title)
        assert variant.product.title in result.facts and card["price"] in result.facts
    # The facts behind each card, for the answer's opening and its checker: the product's own rows.
    for card, facts in zip(result.cards, result.products, strict=True):
        variant = Variant.objects.select_related("product").get(store=store, sku=card["sku"])
        assert (facts.title, facts.price, facts.in_stock) == (variant.product.title, variant.price, variant.in_stock)
        assert facts.description == " ".join(variant.product.description.split())
    assert result.cards[0]["sku"] == "gold-bird-necklace"
    assert "1. Gold Bird Necklace - 79.99 USD - in stock" in result.facts


def test_a_price_change_shows_in_the_next_cards(sample_store):
    store, _ = sample_store
    variant = Variant.objects.get(store=store, sku="vanilla-candle")
    variant.price = Decimal("12.34")
    variant.inventory_quantity = 0
    variant.save()
    card = next(c for c in ground(store, "vanilla scented candle").cards if c["sku"] == "vanilla-candle")
    assert (card["price"], card["in_stock"]) == ("12.34", False)
    assert "12.34 USD" in ground(store, "vanilla scented candle").facts


def test_no_match_says_so(sample_store):
    store, _ = sample_store
    for text in ("do you sell car tires?", "I need a laptop charger", ""):
        result = ground(store, text)
        assert result.found is False
        assert result.cards == []
        assert result.facts.startswith(NO_MATCH)


def test_policy_questions_quote_the_store_document(sample_store):
    store, _ = sample_store
    StoreDocument.objects.create(store=store, kind="returns", title="Returns", body="Return within 14 days.")
    StoreDocument.objects.create(store=store, kind="shipping", title="Shipping", body="Free over 80 EUR.")
    result = ground(store, "What is your refund policy?")
    assert result.found
    assert "Return within 14 days." in result.facts
    assert "Free over 80" not in result.facts
    assert result.cards == []
    both = ground(store, "can I return the yellow sofa and how fast do you deliver?")
    assert "Return within 14 days." in both.facts and "Free over 80 EUR." in both.facts
    assert "yellow-sofa" in [c["sku"] for c in both.cards]


def test_stated_price_limits_filter_the_cards(sample_store):
    store, _ = sample_store
    result = ground(store, "a sofa under $100")
    assert result.found
    assert result.cards and all(Decimal(c["price"]) <= 100 for c in result.cards)
    assert "cream-sofa" not in [c["sku"] for c in result.cards]
    assert ground(store, "a sofa under $10").found is False


def test_facts_are_short_and_name_options_and_stock(sample_store):
    store, _ = sample_store
    result = ground(store, "blue chakra bracelet", k=1)
    assert len(result.cards) == 1 and result.cards[0]["sku"] == "chain-bracelet-blue"
    line = result.facts.splitlines()[1]
    assert "7 Shakra Bracelet (Blue) - 42.99 USD (was 44.99) - in stock - Color: Blue, Black (sold out)" in line
    assert len(line) < 400


def test_only_active_products_are_grounded(sample_store):
    store, _ = sample_store
    product = Product.objects.get(store=store, handle="vanilla-candle")
    product.status = Product.Status.DRAFT
    product.save()
    assert "vanilla-candle" not in [c["sku"] for c in ground(store, "vanilla scented candle").cards]


def test_parsers():
    assert price_limits("anything under $50?") == (None, Decimal("50"))
    assert price_limits("between 20 and 40 dollars") == (Decimal("20"), Decimal("40"))
    assert price_limits("over 100") == (Decimal("100"), None)


@pytest.mark.parametrize(
    ("text", "limits"),
    [
        ("¿Tienen botas de montaña por menos de 150?", (None, Decimal("150"))),
        ("une veste à moins de 100 € ?", (None, Decimal("100"))),
        ("Habt ihr Wanderschuhe unter 150 Euro?", (None, Decimal("150"))),
        ("algo de más de 40 dólares", (Decimal("40"), None)),
        # counts of something else are no price, in any of the four languages
        ("a tent that sleeps up to 4 people", (None, None)),
        ("una tienda para hasta 4 personas", (None, None)),
        ("ein Zelt für über 3 Tage", (None, None)),
        ("a pack under 1.5 kg", (None, None)),
        ("a bag rated under 5 degrees", (None, None)),
    ],
)
def test_price_limits_in_spanish_french_and_german_and_counts_that_are_no_price(text, limits):
    assert price_limits(text) == limits
    assert price_limits("a blue shirt") == (None, None)
    assert kinds_asked("when will my parcel arrive, and can I get a refund?") == ["returns", "shipping"]
    assert kinds_asked("is it covered by the warranty") == ["warranty"]
    assert kinds_asked("red necklace") == []


def test_policy_answers_carry_quotes_and_the_same_words_as_facts(sample_store):
    store, _ = sample_store
    StoreDocument.objects.create(
        store=store, kind="returns", title="Returns", body="Return within 14 days. Gift cards are not refundable."
    )
    result = ground(store, "How many days do I have to return it?")
    assert result.quotes == [{"title": "Returns", "text": "Return within 14 days."}]
    assert "Return within 14 days." in result.facts and "Gift cards" not in result.facts
    assert [match.passage.text for match in result.answers] == ["Return within 14 days."]


def test_product_types_say_what_a_store_sells(sample_store):
    from catalog.grounding import product_types

    store, _ = sample_store
    types = product_types(store)
    assert types and all(t == t.lower() for t in types) and len(types) <= 8


def test_product_facts_give_the_options_with_their_stock_from_the_variant_rows():
    """The demo catalog's fleece: Size M/L x Color Forest/Charcoal, with L in Charcoal at 0 stock."""
    store = Store.objects.create(slug="demo-options", name="Demo options", currency="USD")
    assert apply_catalog(store, read_source("json", str(CATALOG_PATH))).errors == []
    variant = Variant.objects.select_related("product").get(store=store, sku="DO-CF-M-FOR")
    facts = product_facts(SearchHit(product=variant.product, variant=variant, score=1.0))
    assert facts.option_values == (
        ("Size", (("M", True), ("L", True))), ("Color", (("Forest", True), ("Charcoal", True))),
    )  # fmt: skip
    assert set(facts.variant_options) == {
        (("M", "Forest"), True), (("L", "Forest"), True), (("M", "Charcoal"), True), (("L", "Charcoal"), False),
    }  # fmt: skip
    assert facts.options == "Size: M, L; Color: Forest, Charcoal"  # the prompt's line, from the same values
    # A value no variant has in stock is marked so, in both forms.
    Variant.objects.filter(store=store, sku="DO-CF-M-CHR").update(inventory_quantity=0)
    variant = Variant.objects.select_related("product").get(store=store, sku="DO-CF-M-FOR")
    facts = product_facts(SearchHit(product=variant.product, variant=variant, score=1.0))
    assert facts.option_values[1] == ("Color", (("Forest", True), ("Charcoal", False)))
    assert facts.options == "Size: M, L; Color: Forest, Charcoal (sold out)"
    bag = Variant.objects.select_related("product").get(store=store, sku="DO-ADB-REG")
    assert product_facts(SearchHit(product=bag.product, variant=bag, score=1.0)).option_values == (
        ("Length", (("Regular", True), ("Long", True))),
    )


def test_a_quote_marks_the_text_it_leaves_out_between_passages():
    from catalog.grounding import ELISION, quoted_parts, quotes_of
    from catalog.passages import Match, Passage

    body = ["Return within 30 days.", "Sale items are final.", "Refunds take five days.", "Exchanges are free."]
    passage = [Passage(7, "returns", "Returns", text, position) for position, text in enumerate(body)]
    # Scored out of order, as search returns them: quoted in the document's order.
    quote = quotes_of([Match(passage[2], 0.9), Match(passage[0], 0.8), Match(passage[3], 0.5)])
    assert quote == [{"title": "Returns", "text": f"{body[0]}{ELISION}{body[2]} {body[3]}"}]
    assert quoted_parts(quote[0]["text"]) and all(part.strip() in " ".join(body) for part in quoted_parts(quote[0]["text"]))
    assert [p.strip() for p in quoted_parts(quote[0]["text"])] == [body[0], f"{body[2]} {body[3]}"]
    # Adjacent passages read as the store wrote them.
    assert quotes_of([Match(passage[1], 1.0), Match(passage[0], 1.0)])[0]["text"] == f"{body[0]} {body[1]}"


def test_where_the_shopper_is_names_the_kind_they_have():
    from catalog.grounding import where_they_are

    assert where_they_are("I can only buy one thing for cold nights in the tent") == {"tent"}
    assert where_they_are("What fits in my backpack?") == {"backpack"}
    assert where_they_are("Which tent keeps me dry in the rain?") == {"rain"}  # no product type: nothing dropped
    assert where_they_are("Is the tent warm? I get cold in the tent.") == frozenset()  # the tent is asked about
    assert where_they_are("Do you have tents for two?") == frozenset()
