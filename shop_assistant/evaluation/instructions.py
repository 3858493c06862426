"""Did an answer follow the owner's prompt? Checks derived from a version's guidance (``prompts.guidance``), judged
from what the shopper's screen shows (the frames), by rules of their own: the language of the composed words, the
suggested product among the cards when its trigger is, avoided things absent, the owner's greeting and sign-off.

Without them the studio's score judged only what every version shares (facts, checked words), so versions whose
answers differ (Spanish or English, a cookset suggested or not) scored the same 100/100. Each version is judged
against its own guidance; a version that names no language is held to the shopper's (the default behaviour), so
the language check is on every version's score.
"""

from __future__ import annotations

import re
from typing import Any

from catalog import language
from catalog.models import Store, Variant
from shop_assistant.prompts.guidance import Guidance

# Other stores an answer must not send a shopper to (the checker's own list is the chat's; this one is the judge's).
COMPETITORS = re.compile(
    r"\b(?:amazon|ebay|walmart|target|rei|decathlon|costco|aliexpress|temu|etsy)\b"
    r"|\b(?:any|other|another) (?:stores?|shops?|retailers?|websites?|sellers?)\b",
    re.IGNORECASE,
)

# The check names as an owner reads them in the score's report (``studio.scoring.FAILED_CHECK_WORDS``).
WORDS = {
    "follows_language": "not in the language the prompt asks for (or the shopper's): quoted store text counts",
    "suggested_alongside": "the product the prompt says to suggest is missing",
    "avoided": "something the prompt says to avoid is on screen",
    "greeting": "not opened with the prompt's greeting",
    "sign_off": "not closed with the prompt's sign-off",
}


def _words_of(text: str) -> list[str]:
    return [re.sub(r"(?<=[a-z]{3})(?:ies|s)$", "", w) for w in re.findall(r"[a-z0-9]+", text.lower())]


def _names(words: str, title: str, kind: str = "", tags: Any = ()) -> bool:
    wanted = set(_words_of(words))
    return bool(wanted) and wanted <= set(_words_of(" ".join([title, kind, *tags])))


def prose_of(answer: str, store: Store, cards: list[dict[str, Any]], sources: list[dict[str, Any]]) -> str:
    """The answer without the names in it (product titles, the store's categories and name, its documents'
    titles), which are names in any language. A quoted sentence of the store's documents stays: the shopper reads
    it, so an answer that quotes an English policy to a shopper promised Spanish does not follow the prompt (the
    owner learns that the document needs a Spanish copy, not that all is well)."""
    from catalog.grounding import product_types

    own = [store.name, *(str(c.get("title") or "") for c in cards), *(str(s.get("title") or "") for s in sources),
           *product_types(store)]  # fmt: skip
    titles = Variant.objects.filter(store=store, sku__in=[c.get("sku") for c in cards]).values_list("product__title", flat=True)
    rest = answer
    for piece in sorted({*own, *titles}, key=len, reverse=True):
        if piece.strip():
            rest = re.sub(re.escape(piece.strip().rstrip(".")), " ", rest, flags=re.IGNORECASE)
    return rest


def checks(guidance: Guidance, store: Store, question: str, frames: list[dict[str, Any]], answer: str) -> dict[str, bool]:
    """The guidance's checks on one answer; a check the answer gives no occasion for (no trigger on the cards, too
    few composed words to tell a language) is left out."""
    if any(frame["type"] == "error" for frame in frames):
        return {}
    cards = next((f["items"] for f in frames if f["type"] == "products"), [])
    sources = next((f["items"] for f in frames if f["type"] == "sources"), [])
    results: dict[str, bool] = {}
    expected = guidance.language or language.detect(question)
    rest = prose_of(answer, store, cards, sources)
    if len(re.findall(r"[^\W\d_]+", rest)) >= 4:
        results["follows_language"] = language.detect(rest) == expected
    rows = {
        variant.sku: variant.product
        for variant in Variant.objects.filter(store=store, sku__in=[c.get("sku") for c in cards]).select_related("product")
    }
    products = [rows[c["sku"]] for c in cards if c.get("sku") in rows]
    for suggestion in guidance.suggestions:
        triggered = [p for p in products if _names(suggestion.trigger, p.title, p.product_type, p.tag_list)]
        if triggered:
            others = [p for p in products if p not in triggered]
            results["suggested_alongside"] = results.get("suggested_alongside", True) and any(
                _names(suggestion.suggest, p.title, p.product_type, p.tag_list) for p in others
            )
    if guidance.avoid:
        avoided = []
        for rule in guidance.avoid:
            if rule.kind == "out_of_stock" and len(cards) > 1:
                avoided += [c for c in cards if not c.get("in_stock")] if any(c.get("in_stock") for c in cards) else []
            elif rule.kind == "product" and len(cards) > 1:
                avoided += [c for c in cards if _names(rule.words, str(c.get("title") or ""))]
            elif rule.kind == "competitors":
                avoided += COMPETITORS.findall(answer)
        results["avoided"] = not avoided
    if guidance.tone.greeting:
        results["greeting"] = answer.strip().startswith(guidance.tone.greeting)
    if guidance.tone.sign_off:
        results["sign_off"] = answer.strip().endswith(guidance.tone.sign_off)
    return results
