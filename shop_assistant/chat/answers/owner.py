"""The owner's prompt applied to every answer, in one place, after the tools have composed it.

``prompts.guidance`` reads the prompt once per text; here its guidance steers what the shopper reads, whatever tool
answered (the pipeline calls ``steer`` right after planning and ``finish`` on the composed text, ``language`` before
anything is composed):

- language: "always answer in Spanish" composes in Spanish whatever the shopper wrote (the composed sentences are
  gettext's, ``shop_assistant/locale``); the store's own words (product titles, quotes, its own replies) stay as
  they are. Planning still reads the message in its own language;
- suggestions: when the answer's cards include a product the trigger names ("any stove"), the product the owner
  named ("the cookset") is looked up in the catalog now and added as a card with one composed sentence; a name the
  catalog does not have adds nothing (``resolve`` says so to the studio);
- avoid: out-of-stock cards, or a product the owner named, are left out while another card remains (a shopper who
  asked for that one product still gets the fact that it is out of stock: that is an answer, not a recommendation);
  competitors: composed sentences never name another store and the checker drops model sentences that do
  (``guard.checker``), so there is nothing more to filter;
- tone: the owner's greeting opens and their sign-off closes each answer; "be brief" keeps the composed part to
  its first two sentences and halves the model's budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _

from catalog.grounding import ProductFacts, card, product_facts
from catalog.models import Product, Store
from catalog.search import SearchHit
from catalog.text import split_sentences
from shop_assistant.prompts.guidance import Guidance, Suggestion

from .composition import Composition
from .opening import money

BRIEF_SENTENCES = 2


def _words(text: str) -> list[str]:
    """Lower-case words, each in a plain singular ("boots" -> "boot", "pieces" -> "piece"), so the owner's words and
    the catalog's meet whatever number either uses."""
    return [_singular(word) for word in re.findall(r"[a-z0-9]+", text.lower())]


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _names(words: str, title: str, kind: str, tags: Any) -> int:
    """2: the title has every word; 1: the title, type and tags together have them; 0: not this product."""
    wanted = set(_words(words))
    if not wanted:
        return 0
    if wanted <= set(_words(title)):
        return 2
    return 1 if wanted <= set(_words(" ".join([title, kind, *tags]))) else 0


def matches(words: str, facts: ProductFacts) -> bool:
    """``words`` (the owner's: "stove", "hiking boots") name this card's product."""
    return _names(words, facts.title, facts.product_type, facts.tags) > 0


def resolve(store: Store, words: str, *, in_stock_only: bool = False) -> Product | None:
    """The store's active product ``words`` name (its title first, then its type and tags; in stock first), or None
    when none does: then nothing is suggested, and the studio says the name matched nothing."""
    scored = []
    for product in Product.objects.filter(store=store, status=Product.Status.ACTIVE).prefetch_related("variants"):
        score = _names(words, product.title, product.product_type, product.tag_list)
        if score:
            buyable = any(variant.in_stock for variant in product.variants.all())
            if buyable or not in_stock_only:
                scored.append((-score, not buyable, product.pk, product))
    return min(scored, key=lambda item: item[:3])[3] if scored else None


def _card_and_facts(product: Product) -> tuple[dict[str, Any], ProductFacts] | None:
    variants = sorted(product.variants.all(), key=lambda v: (not v.in_stock, v.position, v.pk))
    if not variants:
        return None
    hit = SearchHit(product=product, variant=variants[0], score=1.0)
    raw = card(hit)
    raw["price"] = str(raw["price"])
    return raw, product_facts(hit)


@dataclass
class Steered:
    """What the guidance added to an answer: sentences to say after the composed ones."""

    after: list[str]


def _facts_of(composition: Composition) -> list[tuple[dict[str, Any], ProductFacts | None]]:
    """Each card with its product's facts (``composition.products`` follows the cards' order when it has them)."""
    by_title = {facts.title: facts for facts in composition.products}
    pairs = []
    for item in composition.cards:
        title = str(item.get("title") or "")
        facts = by_title.get(title) or next((f for t, f in by_title.items() if title.startswith(t)), None)
        pairs.append((item, facts))
    return pairs


def _avoided(guidance: Guidance, item: dict[str, Any]) -> bool:
    for rule in guidance.avoid:
        if rule.kind == "out_of_stock" and not item.get("in_stock"):
            return True
        if rule.kind == "product" and _names(rule.words, str(item.get("title") or ""), "", ()) > 0:
            return True
    return False


def _filter(guidance: Guidance, store: Store, composition: Composition) -> None:
    """Leave out the cards the owner said to avoid, while another card remains (see the module's docstring)."""
    pairs = _facts_of(composition)
    kept = [(item, facts) for item, facts in pairs if not _avoided(guidance, item)]
    if not kept or len(kept) == len(pairs):
        return
    composition.cards = [item for item, _ in kept]
    titles = {facts.title for _, facts in kept if facts is not None}
    composition.products = [facts for facts in composition.products if facts.title in titles]


def _suggest(guidance: Guidance, store: Store, composition: Composition) -> list[str]:
    sentences = []
    out_of_stock_avoided = any(rule.kind == "out_of_stock" for rule in guidance.avoid)
    for suggestion in guidance.suggestions:
        trigger = next((facts for _, facts in _facts_of(composition) if facts and matches(suggestion.trigger, facts)),
                       None)  # fmt: skip
        if trigger is None:
            continue
        product = resolve(store, suggestion.suggest, in_stock_only=out_of_stock_avoided)
        if product is None or product.title == trigger.title:
            continue
        made = _card_and_facts(product)
        if made is None:
            continue
        item, facts = made
        if any(str(shown.get("title") or "").startswith(product.title) for shown in composition.cards):
            continue  # already on screen
        composition.cards.append(item)
        sentences.append(_suggestion_sentence(facts, trigger))
    return sentences


def _suggestion_sentence(facts: ProductFacts, trigger: ProductFacts) -> str:
    name = _("the {title}").format(title=facts.title)
    trigger_name = _("the {title}").format(title=trigger.title)
    if facts.in_stock:
        text = _("{suggested} ({price}) goes well with {product}.")
    else:
        text = _("{suggested} ({price}) goes well with {product}, but it is out of stock right now.")
    text = text.format(suggested=name, price=money(facts.price, facts.currency), product=trigger_name)
    return text[:1].upper() + text[1:]


def steer(guidance: Guidance, store: Store, composition: Composition) -> Steered:
    """Apply the cards' part of the guidance to ``composition`` (in place): avoided cards out, suggested cards in.
    Returns the sentences the suggestions add, composed in the active language."""
    if not (guidance.avoid or guidance.suggestions) or not composition.cards:
        return Steered([])
    _filter(guidance, store, composition)
    return Steered(_suggest(guidance, store, composition))


def finish(guidance: Guidance, text: str, after: list[str], *, closing: bool = True) -> str:
    """The composed text with the guidance's sentences after it, cut short when the owner asked for brevity, and
    the owner's greeting before it and sign-off after it (``closing``: False when the model's words still follow,
    and the pipeline adds the sign-off at the very end)."""
    if guidance.tone.brief:
        sentences = split_sentences(text)
        text = " ".join(sentences[:BRIEF_SENTENCES]) if len(sentences) > BRIEF_SENTENCES else text
    parts = [text, *after]
    greeting, sign_off = guidance.tone.greeting, guidance.tone.sign_off
    if greeting and not text.startswith(greeting):
        parts.insert(0, greeting)
    if closing and sign_off:
        parts.append(sign_off)
    return " ".join(part.strip() for part in parts if part.strip())


def describe(guidance: Guidance, store: Store) -> list[dict[str, str]]:
    """The guidance as the studio shows it, the owner's names resolved against the catalog as it is now."""
    rows: list[dict[str, str]] = []
    names = {"en": "English", "es": "Spanish", "fr": "French", "de": "German"}
    if guidance.language:
        rows.append({"what": "Language", "applied": f"every answer in {names[guidance.language]}",
                     "source": guidance.language_source})  # fmt: skip
    else:
        rows.append({"what": "Language", "applied": "the shopper's language (English, Spanish, French or German)",
                     "source": ""})  # fmt: skip
    for suggestion in guidance.suggestions:
        rows.append(_describe_suggestion(store, suggestion))
    for rule in guidance.avoid:
        applied = {
            "out_of_stock": "out-of-stock products are left out of the cards when another card remains",
            "competitors": "no composed sentence names another store; the checker drops model sentences that do",
            "product": f"products named “{rule.words}” are left out of the cards when another card remains",
        }[rule.kind]
        problem = ""
        if rule.kind == "product" and resolve(store, rule.words) is None:
            problem = f"no product of the catalog is called “{rule.words}”"
        rows.append({"what": "Avoid", "applied": applied, "source": rule.source, "problem": problem})
    tone = guidance.tone
    if tone.greeting:
        rows.append({"what": "Tone", "applied": f"every answer starts with “{tone.greeting}”", "source": ""})
    if tone.sign_off:
        rows.append({"what": "Tone", "applied": f"every answer ends with “{tone.sign_off}”", "source": ""})
    if tone.brief:
        rows.append({"what": "Tone", "applied": f"brief: at most {BRIEF_SENTENCES} composed sentences, half the "
                                                "model's budget", "source": ""})  # fmt: skip
    return rows


def _describe_suggestion(store: Store, suggestion: Suggestion) -> dict[str, str]:
    product = resolve(store, suggestion.suggest)
    trigger = resolve(store, suggestion.trigger)
    problem = ""
    if product is None:
        problem = f"no product of the catalog is called “{suggestion.suggest}”: nothing is suggested"
    elif trigger is None:
        problem = f"no product of the catalog is called “{suggestion.trigger}”: the suggestion never applies"
    applied = (f"with any “{suggestion.trigger}” on the cards, the {product.title} is added" if product
               else f"with any “{suggestion.trigger}”, “{suggestion.suggest}”")  # fmt: skip
    return {"what": "Suggest alongside", "applied": applied, "source": suggestion.source, "problem": problem}
