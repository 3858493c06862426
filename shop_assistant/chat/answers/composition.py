"""What an answer is made of, decided before the model runs.

The facts a shopper relies on never depend on the small model getting them right:

- product cards are catalog rows; policy questions carry the store document's answering sentences as quotes;
- a request the catalog has nothing for gets the store's fixed no-match reply, with no cards and no model text;
- a question about the store that none of its documents answers ("do you price match?") gets a fixed reply
  saying so and offering a person, instead of a guess;
- a shopper asking for a person gets the fixed handoff reply (and the request is recorded);
- "are you a bot?" gets a fixed, honest reply: the assistant never claims to be human.

Only what is left (product and policy answers, small talk) is written by the model.

The fixed replies are English messages marked for translation (``gettext_noop``: the constants stay plain English
strings) and translated when composed (``identity_reply()``, ``no_answer_reply()``,
``no_match_reply``), so under ``translation.override(language)`` they come in the shopper's language. The store's
own replies (``AnswerSettings.no_match_reply``, ``AnswerSettings.greeting``) are its words, never translated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from catalog import asked, sales
from catalog.grounding import ProductFacts
from catalog.models import Store
from catalog.text import any_word, split_sentences
from catalog.passages import Match

from . import comparison
from ..log import handoff
from ..models import AnswerSettings
from .opening import listing, possessive
from .retrieval import Retrieved

MODEL = "model"
NO_MATCH = "no_match"
HANDOFF = "handoff"
IDENTITY = "identity"
NO_ANSWER = "no_answer"
COMPARE = "compare"  # a follow-up about the products already shown, answered from their catalog rows
ORDER = "order"  # a question about the shopper's own order: answered from the order's row once verified
# Nothing could be planned: a message the rules cannot read (not English) and no model planned. Saying "we don't
# carry that" would be a claim about the catalog nobody checked.
NOT_UNDERSTOOD = "not_understood"
# What a model answer (MODEL) is about: its tool's topic (``tools.register``), kept with the message as its kind.
PRODUCTS = "products"
POLICY = "policy"
SALE = "sale"
SMALL_TALK = "small_talk"

IDENTITY_REPLY = gettext_noop(
    "I'm {store}'s virtual shopping assistant, a computer program, not a person. I can help you find products "
    "and answer questions about the store; ask for a human agent at any time."
)
NO_MATCH_FALLBACK = gettext_noop("Sorry, I couldn't find that in our catalog.")
NOT_UNDERSTOOD_REPLY = gettext_noop(
    "Sorry, I didn't understand that. Could you say it in other words, or in English? You can also ask for a person."
)
TRACKING_QUESTION = "How do I track my parcel?"  # a search of the store's documents, not shown
# "Where is my order?": the most common question a store gets, answered from the order's row once the shopper is
# verified (``tools.order_status``). The documents' nearest sentence (a returns label "in your order email") would
# answer something else.
ORDER_STATUS_PATTERN = re.compile(
    r"\bwhere(?:'s|’s| is) my (?:order|parcel|package|delivery|stuff)\b"
    r"|\bmy (?:order|parcel|package|delivery)\b[^.?!]{0,30}\b(?:has(?:n't| not)|did(?:n't| not)|never|still)\b"
    r"[^.?!]{0,20}\b(?:arriv\w*|c[oa]me|shipped|turned up|here)\b"
    r"|\b(?:track|status of) (?:my|an|the) (?:order|parcel|package)\b|\border status\b"
    r"|\bwhen will my (?:order|parcel|package|delivery)\b",
    re.IGNORECASE,
)
GREETING = gettext_noop("Hi! I'm {store}'s shopping assistant. Ask me about our products, sizes, shipping or returns.")
NO_ANSWER_REPLY = gettext_noop(
    "I couldn't find the answer to that in our store's policies. A member of our team can help: ask for a "
    "person at any time."
)
# What the store's policies say of any product it sells: delivery, returns, warranties ("when would it arrive?").
_AFTER_SALES = r"refunds?|returns?|exchanges?|ship(?:ping)?|deliver(?:y)?|warrant(?:y|ies)|guarantee|arriv(?:e|es|al)"
_AFTER_SALES_QUESTION = re.compile(rf"\b(?:{_AFTER_SALES})\b", re.IGNORECASE)
# A question about the store rather than a product: what its documents would answer, if they said.
_STORE_QUESTION = re.compile(
    r"\b(?:discounts?|coupons?|promo(?:tion)?s?|vouchers?|codes?|price ?match(?:ing)?|student|military|loyalty|"
    r"points|membership|account|log ?in|password|secure|security|privacy|pick ?up|in person|physical|visit|hours|"
    rf"open|contact|e-?mail|phone|track(?:ing)?|{_AFTER_SALES}|"
    r"pay(?:ment)?s?|invoice|tax(?:es)?|customs|gift ?cards?|newsletter|subscri\w+|cancel\w*|size (?:guide|chart))\b"
    r"|^\W*(?:how (?:do|can) i|can i|what if|what happens|do i need|is my)\b",
    re.IGNORECASE,
)

# Words that carry no request: a message made only of these is small talk for the model, not a catalog miss.
_SMALL_TALK = frozenset(
    """hello hi hey hiya howdy thanks thank thx cheers ok okay great good nice cool bye goodbye morning afternoon
    evening day what can help how are doing well fine yes no sure please you your there assistant question
    questions something anything else more tell me about who with still there that that's it it's this is was
    very so much awesome perfect lovely all""".split()
)
IDENTITY_PATTERN = re.compile(
    r"\bare you (?:a |an |the )?(?:real |actual )?(?:human|person|bot|robot|machine|ai|computer|real)\b"
    r"|\b(?:am i|is this) (?:talking|speaking|chatting) (?:to|with) (?:a |an )?(?:human|person|bot|robot|machine|ai)\b",
    re.IGNORECASE,
)
_REQUEST_NOISE = frozenset(
    """do does did you have has sell selling carry carrying stock offer got any a an the some i i'm im am looking
    for want wanted to buy need get find searching search is are there your in of please can could would
    like me my show we us""".split()
)
# Words that name no thing on their own: what a shopper asks about the catalog as a whole.
_NO_THING = asked.NOT_A_KIND | frozenset(
    "what's whats what new newest latest popular best good nice cool trending recommended hot else other others".split()
)
# Words for the catalog as a whole: beside another word, what is asked is a property of it, no thing.
_THE_CATALOG = frozenset("products product items item things thing stuff".split())
# A message asking the catalog for something: when nothing matches, it gets the no-match reply. Anything else
# the catalog has nothing for ("I like long walks") is left to the model, told that nothing matched.
_REQUEST = re.compile(
    r"\b(?:do|does|did|can|could) (?:you|they|u) (?:have|sell|carry|stock|offer|make|ship)\b|\blooking for\b"
    r"|\bi(?:'d| would)? (?:need|want|like) (?:a|an|some|to buy|to get|to order)\b|\b(?:buy|purchase|order)\b"
    r"|\bsearching for\b|\brecommend\b|\bshow me\b|\bwhere can i (?:get|find|buy)\b|\bany\b.*\?"
    r"|\bis there (?:a|an|any)\b|\bhave you got\b",
    re.IGNORECASE,
)
# A question about one product by name ("How much is the hoodie?", "Is the hoodie in stock?"): when the catalog
# has nothing called that, the shopper gets the no-match reply too, not a model sentence.
_ABOUT_A_PRODUCT = any_word(r"how much (?:is|are|does|do|for)", "price of", "in stock", "available", "sold out", "on sale")
# "Is the sun hoodie waterproof?": a yes/no question of "the" thing is about one product (not "is the shipping free?")
_OF_THE_THING = re.compile(r"^\W*(?:is|are|does|do)\s+the\s+\w", re.IGNORECASE)
_PRICE_WORDS = re.compile(r"\b(?:under|below|over|above|less|more|than|cheaper|between|and|up|to|at|most|least)\b")


@dataclass
class Composition:
    kind: str  # MODEL, NO_MATCH, NOT_UNDERSTOOD, NO_ANSWER, HANDOFF, IDENTITY, COMPARE, ORDER or a tool's own
    facts: str = ""
    cards: list[dict[str, Any]] = field(default_factory=list)
    quotes: list[dict[str, str]] = field(default_factory=list)
    reply: str = ""  # the fixed text of every kind but MODEL
    products: list[ProductFacts] = field(default_factory=list)  # the cards' products, for the opening
    answers: list[Match] = field(default_factory=list)  # the store's passages that answer, best first
    # Sentences composed by tools other than the one the model continues (a total before a policy quote): shown
    # first, before the opening.
    lead: list[str] = field(default_factory=list)
    # What the answer asks to be recorded once planned (an order verified, a return request for agents): applied by
    # the chat's service after planning (``orders.conversations.apply``), never by a tool, so planning only reads.
    effects: list[Any] = field(default_factory=list)
    # What the answer is about when that is not its kind: a model answer's tool (PRODUCTS, POLICY, SALE,
    # SMALL_TALK, set by ``tools.execute``), or a fixed reply that is no catalog miss ("nothing is on sale": SALE).
    topic: str = ""

    @property
    def fixed(self) -> bool:
        return self.kind != MODEL

    @property
    def answer_kind(self) -> str:
        """What kind of answer this is, as its message keeps it (``Message.kind``) and analytics count it: "products",
        "no_match", "not_understood", ... Read from the answer's path, never from its words, which may be any
        language."""
        return self.topic or self.kind


_FOLLOW_UP_WORDS = frozenset(
    """something anything one ones other another else cheaper smaller bigger larger lighter warmer different
    dollars dollar usd euros eur bucks color colour size sizes option options more less it them that those""".split()
)


# "Show me everything under 30 dollars" asks of the whole catalog, even right after a question about socks.
_EVERYTHING = any_word("everything", "all (?:your|the|of your) (?:products|items|things|stuff)", "whole (?:store|shop|catalog)")


def is_follow_up(text: str) -> bool:
    """A short message that names no product of its own ("anything under 300 dollars?", "in blue?"). Small talk
    ("Hi!", "thanks") asks for nothing: searched with the question before it, a greeting got that question's
    answer again."""
    if len(text.split()) > 8 or is_small_talk(text) or _EVERYTHING.search(text):
        return False
    words = requested_thing(text).split() if requested_thing(text) else []
    return all(word in _FOLLOW_UP_WORDS or word in _SMALL_TALK for word in words)


def asks_the_catalog(text: str) -> bool:
    """A request for a product: explicit ("do you sell ...", "I'm looking for ...") or a bare noun ("laptops?")."""
    if _REQUEST.search(text) or (len(text.split()) <= 4 and bool(requested_thing(text))):
        return True
    of_the_thing = bool(_OF_THE_THING.search(text)) and not asks_after_sales(text) and not asks_about_the_store(text)
    return bool(_ABOUT_A_PRODUCT.search(text) or of_the_thing) and asked.named_kind(text) is not None


def asks_after_sales(text: str) -> bool:
    """The message names delivery, returns or a warranty: the store's policy, even said of a product ("can I return
    it?" after a card)."""
    return bool(_AFTER_SALES_QUESTION.search(text))


def asks_about_the_store(text: str) -> bool:
    """A question about the store's policies or services ("do you price match?", "can I pick up in person?")."""
    return bool(_STORE_QUESTION.search(text))


def is_small_talk(text: str) -> bool:
    words = re.findall(r"[a-z']+", text.lower())
    return all(word in _SMALL_TALK or word in _REQUEST_NOISE for word in words)


def _requested_words(text: str) -> tuple[str, list[str]]:
    """The message lowered without sale and price words and figures, and its words that are no request noise."""
    cleaned = re.sub(r"[$€£]?\d+(?:[.,]\d+)?", " ", sales.without_sale_words(text).lower())
    cleaned = _PRICE_WORDS.sub(" ", cleaned)
    return cleaned, [word for word in re.findall(r"[a-z][a-z'-]*", cleaned) if word not in _REQUEST_NOISE]


def names_no_thing(text: str) -> bool:
    """The message asks of the catalog as a whole ("Show me everything under 30 dollars", "What's new?")."""
    return all(word in _NO_THING for word in _requested_words(text)[1])


def requested_thing(text: str) -> str:
    """The shopper's words for what they asked for ("laptops"), or "" when it cannot be told apart."""
    cleaned, words = _requested_words(text)
    if all(word in _NO_THING for word in words):
        return ""  # "What's new?" asks for no thing: "we don't carry new" reads as a mistake
    if not 1 <= len(words) <= 4:
        return ""
    if len(words) > 1 and any(word in _THE_CATALOG for word in words):
        return ""  # "Are your products sustainable?" asks of the catalog: "we don't carry products sustainable"
    if len(words) > 1 and words[0] in ("anything", "something") and f"{words[0]} for " in cleaned:
        words.insert(1, "for")  # "anything for mosquitoes", not "anything mosquitoes"
    return " ".join(words)


def plural(noun_phrase: str) -> str:
    """English's regular plural of a phrase's last word ("trail kayak" -> "trail kayaks", "watch" -> "watches")."""
    head, _, last = noun_phrase.rpartition(" ")
    if re.search(r"(?:s|x|z|ch|sh)$", last):
        last += "es"
    elif re.search(r"[^aeiou]y$", last):
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}".strip()


def greeting(store: Store) -> str:
    """The widget's first bubble when its panel opens: the owner's greeting (the studio's settings), or one naming
    the store. Only shown: it is not a message of the conversation, and the model never sees it."""
    return AnswerSettings.of(store).greeting.strip() or possessive(_(GREETING).format(store=store.name), store.name)


def identity_reply(store: Store) -> str:
    """The honest answer to "are you a bot?", in the active language."""
    return possessive(_(IDENTITY_REPLY).format(store=store.name), store.name)


def not_understood_reply() -> str:
    """The reply to a message nothing could be planned for, in the active language (the shopper's)."""
    return _(NOT_UNDERSTOOD_REPLY)


def no_answer_reply() -> str:
    """The reply to a store question none of its documents answers, in the active language."""
    return _(NO_ANSWER_REPLY)


def _in_english() -> bool:
    """The answer is composed in English: the shopper's own words ("kayaks") may be said back, as English."""
    return (get_language() or "en").lower().startswith("en")


_POINTING = frozenset("it its them they those these that this one ones".split())


def no_match_reply(store: Store, text: str) -> str:
    """The store's own no-match reply, or one built from what it sells, in the active language. Only an English
    answer says the shopper's words back ("we don't carry kayaks"): what is asked for is read with English rules
    (``requested_thing``, ``plural``), and a planner's search words are English whatever the shopper wrote."""
    own = AnswerSettings.of(store).no_match_reply.strip()
    if own:
        return own
    from catalog.grounding import product_types

    named = asked.named_kind(text)  # "the sun hoodie" in "How much is the sun hoodie?"
    thing = (named.phrase if named else requested_thing(text)) if _in_english() else ""
    if _POINTING & set(thing.split()):
        thing = ""  # "How much is it for 3 people?" with nothing shown: no "we don't carry how much it people"
    if thing and re.search(rf"\b(?:an?|the) {re.escape(thing)}\b", text.lower()):
        thing = plural(thing)  # "a kayak": we don't carry kayaks; "the sun hoodie": sun hoodies
    opening = _("Sorry, we don't carry {thing}.").format(thing=thing) if thing else _(NO_MATCH_FALLBACK)
    if sales.asks_about_sales(text):  # only reached when the catalog marks nothing down (catalog.sales)
        opening = _("Nothing is on sale right now.")
    types = product_types(store)
    closing = _("Try other words, or ask for a person.")
    if not types:
        return f"{opening} {closing}"
    # Named as categories: a catalog's types are often not things ("cooking", "hydration"), and "we sell cooking"
    # reads as a mistake.
    categories = _("Our categories are {types}.") if len(types) > 1 else _("Our category is {types}.")
    return f"{opening} {categories.format(types=listing(types))} {closing}"


def tracking_quotes(retrieved: Retrieved) -> list[dict[str, str]]:
    """The store's own sentences about tracking a parcel, if the question found any: they say where to look."""
    quotes = []
    for quote in retrieved.quotes:
        sentences = [s for s in split_sentences(quote["text"]) if re.search(r"\btrack", s, re.I)]
        if sentences:
            quotes.append({"title": quote["title"], "text": " ".join(sentences)})
    return quotes
