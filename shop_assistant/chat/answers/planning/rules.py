"""The rule planner: the shopper's message as tool calls, read with patterns. It answers when no model can plan
(the bundled 135M model) and whenever the model's plan fails validation.

The order is the order of precedence: a request for a person first ("r u a bot? i want a human" asks for one),
then "are you a bot?", the shopper's own order (``planning.orders``), totals, capacity, comparisons, and a catalog search for the
rest, with a budget the shopper stated as its price limit.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from catalog import grounding, passages, sales, terms
from catalog.grounding import price_limits
from catalog.asked import is_called, named_kind
from catalog.passages import content_words
from catalog.search import MATCH_THRESHOLD, search
from catalog.text import any_word

from ...log import handoff
from .. import comparison
from . import orders
from ..composition import IDENTITY_PATTERN, asks_about_the_store, asks_after_sales
from ..opening import ATTRIBUTES
from ..tools.details import DEGREES, asked_temperature
from ..tools.kit import requirement
from ..tools.references import pointed_at
from ..tools.registry import Call, Context, call
from ..tools.search import SearchArguments

_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                 "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a pair of": 1, "pair of": 1}  # fmt: skip
_COUNT = r"(\d{1,2}|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")"
# A count of time or of a measure, not of things bought: "2 day shipping", "two nights", "3 litres".
_NOT_BOUGHT = (
    r"(?![\s-]*(?:°|degrees?|days?|nights?|weeks?|months?|years?|hours?|minutes?|business|kg|kilos?|g|liters?|litres?|"
    r"l|ml|people|persons)\b)"
)

# "what would ... cost together?", "what's the total?", "how much for two ... and one ...", "boots + socks = how much"
_ASKS_TOTAL = re.compile(
    r"\b(?:total|together|altogether|in all|what do i pay|how much (?:is|would|will) (?:that|it|this|all|they|those|both)"
    r"|how much for|how much (?:is|are|would|will|do|does) " + _COUNT + _NOT_BOUGHT + r")\b|\bwhat (?:would|will|do|does)\b[^?]*\b(?:cost|set (?:me|us) back|come to|run (?:me|us))\b|=\s*how much|,\s*how much\b|\bhow much\b[^?]*(?:\+|\bplus\b|\band\b|,)|(?:\+|\bplus\b)[^?]*\bhow much\b",
    re.IGNORECASE,
)
_HOW_MUCH_MORE = re.compile(r"\bhow much (?:more|less|cheaper) (?:is|are|does|do) (.+?) (?:than|compared (?:to|with)) (.+?)[?.!]*$", re.I)
_TOTAL_FILLER = re.compile(
    r"\b(?:what do i pay|what (?:does|do|would|will) (?:that|it|this|they|those|all)|"
    r"how much(?: is| for| would| will| are| do| does)?(?: that| it| this| they| those| all)?"
    r"(?: be| cost)?|what(?:'s| is| would| will)?|would|will|costs?|set (?:me|us) back|come to|run (?:me|us)|together|altogether|in total|the total|total|"
    r"in all|i need|i(?:'d| would|'ll| will) take|if i (?:get|buy|take|order)|i want|please|then|so)\b|[=?!]",
    re.IGNORECASE,
)
_ITEM_SPLIT = re.compile(r"\s*(?:,|\+|\bplus\b|\band\b|\bwith\b|&)\s*", re.IGNORECASE)
_QUANTITY = re.compile(rf"^{_COUNT}{_NOT_BOUGHT}\s+(?:(?:packs?|pairs?|sets?|pieces?) of\s+)?(?:(?:the|of the|of)\s+)?(.*)$", re.I)

# "big enough for three people", "family of five", "cook for four", "hold someone who weighs 110 kg"
# Not "warm enough for 5 degrees" nor "for 3 nights": a count of something else.
_NOT_PEOPLE = (
    r"(?!\s*(?:°|degrees?|nights?|days?|weeks?|months?|years?|hours?|kg|kilos?|liters?|litres?|dollars?|bucks|euros?|usd|"
    r"pairs?|packs?|pieces?|seasons?)\b)"
)
_PEOPLE = re.compile(
    rf"\b(?:for|of|sleeps?|fits?)\s+{_COUNT}\b{_NOT_PEOPLE}(?:\s+(?:people|persons|adults|kids|of us|guests))?"
    rf"|\b{_COUNT}\s+(?:people|persons|adults|of us)\b",
    re.IGNORECASE,
)
_CAPACITY_ASK = any_word(
    "big enough", "large enough", "room for", r"fits? (?:us|all|\d|[a-z]+ people)", "family of", "sleeps?",
    "cooks? for", "enough for", "hold", "holds", "support", "weighs?",
    rf"for\s+{_COUNT}\s+(?:people|persons|adults|guests)",
    # "We need a tent for three", "What's the best tent for two?": which of the kind is made for that many (not
    # "for a", nor "for 3 nights")
    rf"for\s+(?:\d{{1,2}}|two|three|four|five|six|seven|eight|nine|ten)\b{_NOT_PEOPLE}",
)
# "une tente pour quatre personnes", "una tienda para cuatro personas", "ein Zelt für vier Personen": a count of
# people in Spanish, French or German (accents folded by the pattern: "für", "fünf")
_NUMBER_WORDS_OTHER = {
    "uno": 1, "una": 1, "dos": 2, "tres": 3, "cuatro": 4, "cinco": 5, "seis": 6, "siete": 7, "ocho": 8,
    "un": 1, "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "six": 6, "sept": 7, "huit": 8,
    "ein": 1, "eine": 1, "einen": 1, "zwei": 2, "drei": 3, "vier": 4, "fünf": 5, "sechs": 6, "sieben": 7, "acht": 8,
}  # fmt: skip
_PEOPLE_OTHER = re.compile(
    r"\b(?:para|pour|f[üu]r)\s+(\d{1,2}|" + "|".join(sorted(_NUMBER_WORDS_OTHER, key=len, reverse=True)) + r")\s+"
    r"(?:personas|personnes|personen|adultos|adultes|erwachsene|gente)\b",
    re.IGNORECASE,
)
# Two people said without a number: "for a couple", "for the two of us", "for me and my girlfriend".
_TWO = re.compile(
    r"\bfor\s+(?:(?:a|my)\s+couple(?!\s+of)|the\s+two\s+of\s+us|us\s+two|(?:me|myself)\s+and\s+(?:my|a)\s+[a-z]+(?!\s+and))\b",
    re.IGNORECASE,
)
_WEIGHT = any_word(r"(\d{2,3})\s*(?:kg|kilos?|kilograms?)")
_CAPACITY_FILLER = re.compile(
    r"\b(?:is|are|the|a|an|big|large|enough|for|people|persons|adults|guests|which|what|fits?|us|we(?:'re| are)|family|of|"
    r"you|have|got|any|"
    r"does|do|will|would|can|could|hold|holds|support|someone|who|weighs?|cook|cooks|sleeps?|room|it|kg|kilos?|"
    r"kilograms?|\d+|" + "|".join(_NUMBER_WORDS) + r")\b|[?.!,']",
    re.IGNORECASE,
)
# A named comparison: "difference between ...", "X vs Y", "compare X and Y", "X or Y for ..."
_COMPARE = any_word("difference between", "differences between", "compare", r"vs\.?", "versus")
# "Which is better for backpacking, the Summit or the Daytripper?", "Should I get the Alpine or the Breeze bag?": the
# two named are compared (the list of both was the answer).
_EITHER = (
    re.compile(
        r"^\W*(?:(?:which|what)\b[^?]*?,|should i (?:get|buy|take|go for|choose|pick))\s*(?:the\s+)?"
        r"([^,?]+?)\s+or\s+(?:the\s+)?([^,?]+?)\s*[?.!]*$",
        re.IGNORECASE,
    ),
    # "Which do you recommend between the fleece and the down vest?"
    re.compile(r"^\W*(?:which|what)\b[^?]*?\bbetween\s+(?:the\s+)?([^,?]+?)\s+(?:and|or)\s+(?:the\s+)?([^,?]+?)\s*[?.!]*$", re.I),
    # "Is the tent or the hammock lighter?", "Is the Alpine or the Breeze better for summer?"
    re.compile(
        r"^\W*(?:is|are)\s+(?:the\s+)?([^,?]+?)\s+or\s+(?:the\s+)?([^,?]+?)\s+(?:[a-z]+er|more\s+[a-z]+)\b"
        r"(?:\s+(?:for|in|on|at|with)\b[^?]*)?\s*[?.!]*$",
        re.I,
    ),
)
_COMPARE_FILLER = re.compile(
    r"\b(?:what(?:['’]?s| is| are)?|the|differences?|between|compare|your|for [a-z ]+$|,? ?what['’]?s the difference)\b|[?.!]",
    re.IGNORECASE,
)
# Budgets said without "under": "I have 100 dollars", "around 50 bucks", "budget of 80"
_BUDGET = re.compile(
    r"\b(?:i have|i've got|got|budget(?: is| of)?|around|about|max(?:imum)?|up to)\s+\$?(\d{1,5}(?:\.\d\d)?)\s*"
    r"(?:dollars?|bucks|usd|euros?|\$)?|\$?(\d{1,5})\s*(?:dollars?|bucks)\b",
    re.IGNORECASE,
)
# "its battery", "do you have it in L?", "is it warm enough?": about the product just shown
_POINTS_BACK = any_word("it", "its", "it's", "this one", "that one")
_FOLLOW_UP_WORDS = 12
_THEY = any_word("they", "them", "these", "those")
_ONE_OF_SHOWN = any_word(
    "the (?:cheaper|cheapest|less expensive|pricier|more expensive|first|second|third|last|bigger|biggest|big|larger|"
    "largest|large|smaller|smallest|small|lighter|lightest|heavier|heaviest|warmer|warmest) one"
)
# "How warm is the down sleeping bag?", "How heavy are the boots?": a degree asked of one product named (a singular
# verb and an article, or "are the" for a name in the plural), answered from its own description; "how much" is its
# price, which the search's opening says, and "how warm are your bags?" asks of several. Only degrees a description
# gives a figure or a word for (``details.DEGREES``): "how good is the headlamp?" is the search's answer.
_HOW_IS_ONE = re.compile(
    rf"^\W*how\s+(?:{'|'.join(sorted(DEGREES))})\s+(?:(?:is|does)\s+(?:the|your|this|that)|are\s+the)\s+(.+?)"
    r"(?:\s+(?:last|weigh|hold|fit|pack|keep|get|run|take|go)\b.*?)?\s*[?.!]*$",
    re.IGNORECASE,
)
# "Is the Alpine bag warm enough for -5?": one product named, asked whether it is enough for something.
_ENOUGH_FOR_ONE = re.compile(
    r"^\W*(?:is|are|will|would)\s+(?:the|your|this|that)\s+(.+?)\s+(?:be\s+)?[a-z]+\s+enough\s+for\b", re.IGNORECASE
)
# "How much does the Alpine bag weigh?", "What's the weight of the Ridgeline tent?": its weight, not its price.
_WEIGHS_ONE = re.compile(
    r"^\W*(?:how much|what)\s+(?:does|do)\s+(?:the|your|this|that)\s+(.+?)\s+weigh\b"
    r"|^\W*what(?:'s| is)\s+the\s+weight\s+of\s+(?:the|your|this|that)\s+(.+?)\s*[?.!]*$",
    re.IGNORECASE,
)
# "What's the R-value of the sleeping pad?", "How much weight can the chair hold?": a property of one product named,
# from its own text (the help line answered both).
_PROPERTY_OF_ONE = re.compile(
    r"^\W*what(?:['’]?s| is| are)\s+the\s+(?!price\b|cost\b|difference\b)[\w-]+(?:\s+[\w-]+)?\s+of\s+(?:the|your|this|that)\s+(.+?)\s*[?.!]*$"
    r"|^\W*how\s+much\s+weight\s+(?:can|does|will)\s+(?:the|your|this|that)\s+(.+?)\s+(?:hold|take|carry|support)\b",
    re.IGNORECASE,
)
# "How many litres is the Summit backpack?", "How much does the daypack hold?": its volume, from its own text.
_HOLDS_ONE = re.compile(
    r"^\W*how\s+many\s+(?:litres?|liters?|l)\s+(?:is|does|are|can)\s+(?:the|your|this|that)\s+(.+?)"
    r"(?:\s+(?:hold|have|take|carry|fit))?\s*[?.!]*$"
    r"|^\W*how\s+much\s+(?:does|can|will)\s+(?:the|your|this|that)\s+(.+?)\s+hold\b"
    r"|^\W*what(?:'s| is)\s+the\s+volume\s+of\s+(?:the|your|this|that)\s+(.+?)\s*[?.!]*$",
    re.IGNORECASE,
)
# "Is the Ridgeline tent good for winter camping?": one product named, asked whether it suits a use.
_GOOD_FOR_ONE = re.compile(
    r"^\W*(?:is|are|will|would)\s+(?:the|your|this|that)\s+(.+?)\s+(?:be\s+)?(?:any\s+)?(?:good|suitable|ok|okay|fine|"
    r"right|made|meant|designed)\s+for\b",
    re.IGNORECASE,
)
# "Is the down vest machine washable?", "Does the headlamp have a red light?": a yes/no question about one product
# named, answered from that product's own row and description (or "our catalog doesn't say"), never by listing its
# kind. "Are the trekking poles collapsible?" too: a plural names one product when only one is called that
# ("are the tents ...?" calls two, and the search lists them: ``_called``). Not a
# second product named ("will the cookset work with the micro stove?"), nor a sale (the search's opening says it).
_YES_NO_OF_ONE = re.compile(
    r"^\W*(?:is|are|does|do|can|will|would)\s+(?:the|your|this|that|these|those)\s+(.+?)\s*[?.!]*$",
    re.IGNORECASE,
)
# "What's the price of the Summit backpack?", "How much does the Summit backpack cost?": the price of the one
# product named (the search listed the Daytripper beside it, "the least expensive" first).
_PRICE_OF_ONE = re.compile(
    r"^\W*(?:what(?:['’]?s| is) the price of|how much (?:is|are|does|do)|what does|what do)\s+(?:the|your|this|that)\s+"
    r"(.+?)(?:\s+(?:cost|costs|go for|sell for))?\s*[?.!]*$",
    re.IGNORECASE,
)
MAX_NAME_WORDS = 3  # "the first aid kit"
# ("come with a pot" is a part of the product; "work with the micro stove" names another)
_ANOTHER_NAMED = any_word(r"(?:with|to) (?:the|your|my) [a-z]+", r"(?:and|or|than|vs\.?|versus) (?:the|your|a|an|my) [a-z]+")
_WHICH = re.compile(r"^\W*(?:which|what)\b", re.IGNORECASE)
# "which one has a laptop sleeve?", "which of them is freestanding?": of the cards shown (a ranking word is the
# comparison's, asked before)
_WHICH_HAS = re.compile(
    r"^\W*which\s+(?:(?:one|ones|of (?:these|them|those|the two|the three|both|you)(?: ones?)?)\s+)?"
    r"((?:has|have|is|are|comes? with|includes?|got)\b.+?)\s*[?.!]*$",
    re.IGNORECASE,
)
# "Which backpack is cheaper?", "lightest tent?", "which sleeping bag is warmer?": a kind's products ranked on what
# is asked. Price words anywhere; weight and warmth as a superlative or in a "which" question ("do you sell a
# lighter?" asks for a product).
_RANKED: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    (any_word("cheap(?:er|est)", "least expensive", "less expensive"), "price", True),
    (any_word("pricier", "priciest", "most expensive", "more expensive"), "price", False),
    (re.compile(r"\blightest\b|^\W*(?:which|what)\b.*\blighter\b", re.I), "weight", True),
    (re.compile(r"\bheaviest\b|^\W*(?:which|what)\b.*\bheavier\b", re.I), "weight", False),
    (re.compile(r"\bwarmest\b|^\W*(?:which|what)\b.*\bwarmer\b", re.I), "warmth", True),
    (re.compile(r"\b(?:bigg|larg|roomi)est\b|^\W*(?:which|what)\b.*\b(?:bigg|larg|roomi)er\b", re.I), "volume", False),
    (re.compile(r"\bsmallest\b|^\W*(?:which|what)\b.*\bsmaller\b(?! size)", re.I), "volume", True),
)
_RANKED_FILLER = re.compile(
    r"\b(?:which|what(?:'s| is)?|is|are|the|your|you|have|do|one|ones|least|less|most|more|expensive|"
    r"cheap(?:er|est)|pricier|priciest|light(?:er|est)|heav(?:ier|iest)|warm(?:er|est)|bigg(?:er|est)|larg(?:er|est)|"
    r"roomi(?:er|est)|small(?:er|est))\b|[?.!¿¡]",
    re.IGNORECASE,
)
# What stands in for the product a follow-up is about: "a cheaper one", "anything cheaper", "something similar but
# cheaper", "any cheaper alternatives".
_STAND_IN = re.compile(
    r"\b(?:a|an|any|some|something|anything|similar|but|like|alternatives?|options?|others?|else|it|this|that|"
    r"there|got|to|than)\b|[,']",
    re.IGNORECASE,
)
# What names the whole catalog rather than a kind: "the cheapest thing you sell", "your most expensive item".
_WHOLE_CATALOG = re.compile(
    r"\b(?:things?|items?|products?|stuff|everything|anything|sell|sells|carry|stock|store|shop|here|of all|"
    r"overall|in|at|can|i|buy|get|got)\b|[,']",
    re.IGNORECASE,
)
_AROUND = any_word("around", "about", "roughly", "ish")
_ROUGHLY = Decimal("1.3")  # "around 50" still takes a 59 gift, not a 149 one
_QUERY_BOUND = next(m.max_length for m in SearchArguments.model_fields["query"].metadata if hasattr(m, "max_length"))
# A gift's framing: who it is for is not what the catalog sells ("a gift for my dad who loves hiking" is a search
# for hiking). Read in English only; the words of the activity stay.
_PERSON = (r"(?:dad|father|mom|mum|mother|wife|husband|son|daughter|kids?|friend|brother|sister|partner|boyfriend|"
           r"girlfriend|grandpa|grandma|grandfather|grandmother|boss|colleague|uncle|aunt|niece|nephew|teen|teenager)")
# A gift: named so, "for my dad who ...", or "something for my mom, her ears always get cold on walks".
_GIFT = re.compile(
    r"\b(?:gifts?|presents?|stocking stuffers?)\b(?!\s*(?:cards?|certificates?|vouchers?|wrap\w*|receipts?|box\w*))"
    rf"|\bfor (?:my|our) [a-z]+\b(?=.*\bwho\b)|\b(?:something|anything) for (?:my|our) {_PERSON}\b"
    rf"|\b(?:get|buy|give) (?:my|our) {_PERSON}\b",
    re.I,
)
_GIFT_FRAME = re.compile(
    r"\b(?:(?:a|an|some|any|good|nice|birthday|christmas|xmas|anniversary|leaving|farewell|retirement|wedding|"
    r"graduation|housewarming|thank[- ]you)\s+)*(?:gifts?|presents?|stocking stuffers?)(?:\s+ideas?)?(?:\s+for)?\b"
    rf"|\b(?:for\s+)?(?:my|our|a|an)\s+(?:(?:older|younger|elder|little|big|best|teenage)\s+)?{_PERSON}\b"
    r"|\b(?:for\s+)?(?:someone|somebody|a person|people)\b"
    # "a 10 year old", "my 8-year-old daughter": an age is who the gift is for, not a figure to search
    r"|\b(?:for\s+)?(?:(?:a|an|my|our)\s+)?\d{1,2}[- ]?(?:years?|yrs?)[- ]?old(?:\s+(?:boy|girl|kid|child|son|daughter))?\b"
    r"|\bi(?:'m| am)? (?:need|want|looking for)\b"
    r"|\b(?:who|that)(?:'s| is)?\s+(?:(?:just|really|always)\s+)?(?:loves?|likes?|enjoys?|is into|into|does|goes|got into)\b"
    r"|\b(?:any|just|always|really|who|that|ideas?|a|an)\b|\bwhat(?:'s|s| is| would be| should i get)?\b|[?!]",
    re.IGNORECASE,
)
# Who the gift is for, named by what they do: "a hiker", "my runner friend" ("runn-er": running, "hik-er": hiking).
# Not a person named otherwise ("a teenager", "my brother", "a teacher").
_DOER = re.compile(
    r"\bfor (?:a|an|my|our)\s+((?:[a-z]+\s+)?)"  # "a trail runner": trail running
    rf"(?!(?:{_PERSON}|teachers?|others?|neighbou?rs?|(?:co-?)?workers?|managers?|owners?|(?:old|young|eld|bigg|litt)ers?)\b)"
    r"([a-z]{3,}?)e?rs?\b",
    re.IGNORECASE,
)
# The price words a filter already holds ("around 50 bucks", "under 30"), left out of the searched words.
_PRICE_WORDS = re.compile(
    r"\b(?:under|below|less than|at most|no more than|up to|max(?:imum)?|around|about|roughly|over|above|"
    r"more than|at least|between)\s*[$€£]?\s*\d+(?:\.\d{1,2})?(?:\s*(?:and|-|to)\s*[$€£]?\s*\d+(?:\.\d{1,2})?)?"
    r"(?:\s*(?:dollars?|bucks|usd|euros?|\$))?|\$?\d+(?:\.\d{1,2})?\s*(?:dollars?|bucks)\b",
    re.IGNORECASE,
)
_IN_STOCK_ONLY = any_word("(?:that|which) (?:is|are) in stock", "in stock (?:only|now)", "only in stock")


def _quantity(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word.lower()]


def _items(clause: str) -> list[dict[str, object]]:
    items = []
    for part in _ITEM_SPLIT.split(_TOTAL_FILLER.sub(" ", clause)):
        part = " ".join(part.split()).strip(" .")
        if not part:
            continue
        quantity, phrase = 1, part
        match = _QUANTITY.match(part)
        if match and match.group(2).strip():
            quantity, phrase = _quantity(match.group(1)), match.group(2)
        phrase = re.sub(r"^(?:of\s+)?(?:the|your)\s+", "", phrase.strip())
        if phrase:
            items.append({"product": phrase, "quantity": quantity})
    return items


def _total(context: Context) -> list[Call]:
    text = context.text
    more = _HOW_MUCH_MORE.search(text)
    if more:
        first, second = more.group(1), more.group(2)
        head = first.split()[-1]
        second = re.sub(r"\bone$", head, second.strip())  # "the synthetic one" after "the down bag"
        items = [{"product": first, "quantity": 1}, {"product": second, "quantity": 1}]
        return [call("price_total", items=items, operation="difference")]
    if not _ASKS_TOTAL.search(text):
        return []
    # "boots + a pack of socks = how much? and is shipping free then?": the store question is a call of its own
    clauses = [c for c in re.split(r"(?<=[?])\s+", text) if c.strip()]
    priced = [c for c in clauses if _ASKS_TOTAL.search(c) or not asks_about_the_store(c)]
    items = [item for clause in priced for item in _items(clause)]
    several = len(items) > 1 or any(int(i["quantity"]) > 1 for i in items) or re.search(r"\b(?:both|those|them|all)\b", text, re.I)
    if not items or not several:
        return []
    calls = [call("price_total", items=items[:8])]
    calls += [call("policy_lookup", question=c) for c in clauses if c not in priced][:1]
    return calls


# "I need a tent and a sleeping bag for a summer trip, budget 400": the words around the kinds asked for (the
# request, the budget's, the article) and what they are for ("for a summer trip") name no kind.
_KIT_FILLER = re.compile(
    r"\b(?:i(?:'m| am)? (?:need|want|looking for)|i(?:'d| would) like|looking for|do you have|can you (?:find|suggest)|"
    r"what (?:would|should) i (?:get|buy)|budget(?: is| of)?|in total|the total|total|altogether|together|"
    r"some|a|an|the|my|me|please|also)\b|[?!.:;=]",
    re.IGNORECASE,
)
# "a sleeping bag for a summer trip": a sleeping bag (unless it says what the item must be for: ``kit.requirement``)
_PURPOSE = re.compile(r"\s+for\s+.*$", re.IGNORECASE)
# Who it is for, said with "and" that would split it into another item: "for me and my wife", "for my son and me".
_FOR_PEOPLE = re.compile(
    r"\bfor\s+(?:(?:me|us|myself)\s+and\s+(?:my|our)\s+[a-z]+|(?:my|our)\s+[a-z]+\s+and\s+(?:me|us|myself))\b",
    re.IGNORECASE,
)
_MAX_KIT = 4


def _kit(context: Context) -> list[Call]:
    """Several kinds of product within one budget: one product of each, together within it (``fit_budget``). In
    Spanish, French or German each part between "y", "et", "und" is read in the catalog's words (the store's
    synonyms): "una tienda de campaña y un saco de dormir" is a tent and a sleeping bag."""
    text = context.text
    if _GIFT.search(text) or _HOW_MUCH_MORE.search(text):
        return []
    english = context.language == "en"
    high = price_limits(text)[1]
    budget = high if high is not None else _budget(text) if english else _budget_in_another_language(text)
    if budget is None:
        return []
    unpriced = _PRICE_WORDS.sub(" ", (_BUDGET if english else _BUDGET_OTHER).sub(" ", _FOR_PEOPLE.sub(" ", text)))
    items = []
    for part in (_ITEM_SPLIT if english else _ITEM_SPLIT_OTHER).split(unpriced):
        counted = _QUANTITY.match(part.strip()) if english else None
        if counted and _quantity(counted.group(1)) > 1:
            return []  # "two mugs and a stove under 100": a quantity is the total's
        if english:
            kept = part if requirement(part)[1] is not None else _PURPOSE.sub("", part)  # "for -5", "for 2" stay
            phrase = " ".join(_KIT_FILLER.sub(" ", kept).split())
        else:
            read = terms.search_words(context.store, part, lang=context.language)
            phrase = " ".join(word for word in read.split() if not word[0].isdigit()) if read != part else ""
        if phrase:
            items.append(phrase)
    kinds = [requirement(item)[0] for item in items]  # "sleeping bag" of "sleeping bag for -5"
    if not 2 <= len(items) <= _MAX_KIT or any(len(kind.split()) > MAX_NAME_WORDS for kind in kinds):
        return []
    # Each a kind named by a noun: not "a warm and waterproof jacket" ("waterproof" names the boots). One the store
    # does not sell is said to be left out ("a kayak and a tent, budget 500"), when another is sold.
    if any(kind.split()[-1].lower() in ATTRIBUTES for kind in kinds):
        return []
    sold = [_called(context, kind) is not None for kind in kinds]
    if not any(sold) or not all(is_sold or _is_a_kind(kind) for kind, is_sold in zip(kinds, sold)):
        return []
    return [call("fit_budget", items=items, budget=budget)]


def _is_a_kind(phrase: str) -> bool:
    """The whole phrase is a kind of product by its noun ("kayak", "camping stove"), not "my wife" or "the trip"."""
    named = named_kind(phrase)
    return named is not None and bool(named.noun) and named.phrase == phrase.lower()


# "mi presupuesto es 400 dólares", "un budget de 300 euros", "mein Budget ist 200 Euro"
_BUDGET_OTHER = re.compile(
    r"\b(?:presupuesto|budget)(?:\s+(?:es|de|est|ist|von|liegt bei|d['’]environ))*\s+(?:de\s+)?[$€]?\s*(\d{1,5})"
    r"(?:\s*(?:d[óo]lares|euros?|€|\$|usd))?",
    re.IGNORECASE,
)
_ITEM_SPLIT_OTHER = re.compile(r"\s*(?:,|\+|\by\b|\be\b|\bet\b|\bund\b|&)\s*", re.IGNORECASE)


def _budget_in_another_language(text: str) -> Decimal | None:
    match = _BUDGET_OTHER.search(text)
    return Decimal(match.group(1)) if match else None


# "minus 5 Grad", "-5 grados", "moins 5 degrés", "-5 °C": a temperature in Spanish, French or German
_TEMPERATURE_OTHER = re.compile(
    r"(?:\b(?:minus|menos|moins)\s+|(?<![\w-])-)?(\d{1,2})\s*(?:°\s*C?|grados?|degr[ée]s?|grad)\b"
    r"|(?:\b(?:minus|menos|moins)\s+|(?<![\w-])-)(\d{1,2})\b",  # not "2-3 Personen"
    re.IGNORECASE,
)


def _temperature_in_another_language(text: str) -> float | None:
    match = _TEMPERATURE_OTHER.search(text)
    if match is None:
        return None
    figure = float(match.group(1) or match.group(2))
    return -figure if re.match(r"\s*(?:minus|menos|moins|-)", match.group(0), re.IGNORECASE) else figure


def _capacity_in_another_language(context: Context) -> list[Call]:
    """"Avez-vous une tente pour quatre personnes ?": the people counted, the product in the catalog's words; "Ist
    der Schlafsack warm genug für minus 5 Grad?": the temperature."""
    if context.language == "en":
        return []
    people = _PEOPLE_OTHER.search(context.text)
    temperature = None if people else _temperature_in_another_language(context.text)
    if temperature is not None:
        product = terms.search_words(context.store, _TEMPERATURE_OTHER.sub(" ", context.text), lang=context.language)
        kind = " ".join(word for word in product.split() if not _TEMPERATURE_WORDS.fullmatch(word))
        if kind and _called(context, kind) is not None:
            return [call("check_capacity", product=kind, temperature_c=temperature)]
    if not people:
        return []
    asked = _PEOPLE_OTHER.sub(" ", context.text)  # "3 personas" is the count, not a "2-Person" tent's name
    product = terms.search_words(context.store, asked, lang=context.language)
    if not product.strip() or product == asked:
        if not context.shown:
            return []  # no catalog word read from the message: nothing to check the count against
        product = "those"  # "¿Cuánto cuesta para 3 personas?" after the tents: the tents shown
    count = people.group(1).lower()
    return [call("check_capacity", product=product, people=int(count) if count.isdigit() else _NUMBER_WORDS_OTHER[count])]


# A follow-up about the cards shown, in Spanish, French or German: its comparing and totalling words in English, so
# that the English follow-up rules read it ("¿Cuál es más caliente?" -> "which es warmer?", "¿Cuánto cuestan los dos
# juntos?" -> "how much cost both together?"). Only these words: the products are the cards'.
_FOLLOW_UP_WORDS_OTHER: dict[str, tuple[tuple[str, str], ...]] = {
    "es": (
        (r"cu[áa]l(?:es)?", "which"), (r"m[áa]s (?:barat|econ[óo]mic)[oa]s?", "cheaper"),
        (r"m[áa]s car[oa]s?", "more expensive"), (r"m[áa]s (?:caliente|c[áa]lid[oa]|abrigad[oa])s?|abriga m[áa]s", "warmer"),
        (r"m[áa]s (?:liger|livian)[oa]s?|pesa menos", "lighter"), (r"m[áa]s pesad[oa]s?|pesa m[áa]s", "heavier"),
        (r"m[áa]s grandes?", "bigger"), (r"m[áa]s peque[ñn][oa]s?", "smaller"),
        (r"junt[oa]s|en total", "together"), (r"cu[áa]nto", "how much"), (r"cuestan?|costar[íi]an?", "cost"),
        (r"(?:los|las) (?:dos|tres)|ambos|ambas", "both"), (r"tallas?", "size"), (r"colou?r(?:es)?", "colour"),
        (r"en (?:stock|existencias)|disponibles?", "in stock"), (r"tienen|ten[ée]is|hay", "do you have"),
        (r"algo|alguno|alguna|otr[oa]", "something"),
    ),
    "fr": (
        (r"lequel|laquelle|lesquel(?:le)?s|quel(?:le)?s?", "which"), (r"moins ch[eè]re?s?", "cheaper"),
        (r"plus ch[eè]re?s?", "more expensive"), (r"plus chaude?s?", "warmer"), (r"plus l[ée]g[eè]re?s?", "lighter"),
        (r"plus lourde?s?", "heavier"), (r"plus grande?s?", "bigger"), (r"plus petite?s?", "smaller"),
        (r"ensemble|au total", "together"), (r"combien", "how much"),
        (r"co[ûu]te(?:nt|rai(?:en)?t)?", "cost"), (r"(?:tou(?:te)?s )?les (?:deux|trois)", "both"), (r"tailles?", "size"),
        (r"couleurs?", "colour"), (r"en stock|disponibles?", "in stock"), (r"avez-vous|vous avez", "do you have"),
        (r"quelque chose(?: de)?|un autre|une autre", "something"),
    ),
    "de": (
        (r"welche[nrs]?", "which"), (r"(?:billiger|g[üu]nstiger)(?:es)?", "cheaper"), (r"teurer(?:es)?", "more expensive"),
        (r"w[äa]rmer(?:es)?", "warmer"), (r"leichter(?:es)?", "lighter"), (r"schwerer(?:es)?", "heavier"),
        (r"gr[öo](?:ß|ss)er(?:es)?", "bigger"), (r"kleiner(?:es)?", "smaller"),
        (r"zusammen|insgesamt", "together"),
        (r"wie ?viel", "how much"), (r"kosten|kostet|k[öo]sten", "cost"), (r"(?:die )?beiden?|alle (?:zwei|drei)", "both"),
        (r"gr[öo](?:ß|ss)en?", "size"), (r"farben?", "colour"), (r"auf lager|vorr[äa]tig|verf[üu]gbar", "in stock"),
        (r"habt ihr|haben sie|gibt es", "do you have"), (r"etwas|(?:ein|eine|einen) andere[nrs]?", "something"),
    ),
}
_FOLLOW_UP_PATTERNS = {
    lang: [(re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE), english) for pattern, english in table]
    for lang, table in _FOLLOW_UP_WORDS_OTHER.items()
}


def _in_another_language(context: Context) -> list[Call]:
    """A comparing or totalling question in Spanish, French or German: about the cards shown, unless it names
    another kind ("Quelle est la tente la plus légère ?" after a backpack ranks the tents)."""
    patterns = _FOLLOW_UP_PATTERNS.get(context.language)
    if not patterns:
        return []
    if context.shown and not _names_another_kind(context):
        return _follow_up_in_another_language(context, patterns)
    return _ranked_in_another_language(context, patterns)


def _follow_up_in_another_language(context: Context, patterns: list[tuple[re.Pattern[str], str]]) -> list[Call]:
    """"¿Cuál es más caliente?" after two sleeping bags: which of the cards is warmer; "¿Cuánto cuestan los dos
    juntos?": their total. The tools' sentences are in the shopper's language."""
    english = context.text
    for pattern, word in patterns:
        english = pattern.sub(word, english)
    if english == context.text:
        return []
    asked = comparison.asked_attribute(english)
    if asked is not None:
        return [call("compare_products", attribute=asked[0], ascending=asked[1])]
    ranked = _ranked_kind(english, list(context.shown))  # "¿Tienen algo más barato?": the card's kind by price
    if ranked:
        return ranked
    if _ASKS_TOTAL.search(english) and re.search(r"\bboth\b", english):
        return [call("price_total", items=[{"product": "both" if len(context.shown) == 2 else "all", "quantity": 1}])]
    if _OF_THE_CARD.search(english) and len(english.split()) <= _SHORT_FOLLOW_UP and not _names_a_kind(context):
        # "Elle existe en taille M ?", "¿Viene en color negro?": the card's sizes, colours or stock
        return [call("product_details", product="it", question=english)]
    return []


_RANKING_WORDS = frozenset({"cheaper", "more expensive", "warmer", "lighter", "heavier", "bigger", "smaller"})


def _ranked_in_another_language(context: Context, patterns: list[tuple[re.Pattern[str], str]]) -> list[Call]:
    """"Quelle est la tente la plus légère ?", "¿Cuál es la chaqueta más abrigada?": the kind's products ranked on
    what is asked, the kind in the catalog's words (the store's synonyms read the message without its ranking
    words). A kind the catalog has no word for is left to the search."""
    english, rest = context.text, context.text
    for pattern, word in patterns:
        english = pattern.sub(word, english)
        if word in _RANKING_WORDS:
            rest = pattern.sub(" ", rest)
    asked = next(((attribute, ascending) for pattern, attribute, ascending in _RANKED if pattern.search(english)), None)
    if asked is None:
        return []
    kind = terms.search_words(context.store, rest, lang=context.language)
    if kind == rest or not content_words(kind) & passages.store_index(context.store).catalog_words:
        return []
    return [call("compare_products", products=[kind], attribute=asked[0], ascending=asked[1])]


_OF_THE_CARD = any_word("size", "colour", "in stock")
_SHORT_FOLLOW_UP = 8  # words: "Gibt es die auch in Größe L?"


def _names_a_kind(context: Context) -> bool:
    """The message names what the store sells, in the catalog's words of its titles and types ("¿Tienen chaquetas en
    talla M?": jackets), so it is a search, not a question about the card."""
    return bool(_kind_words(context))


def _kind_words(context: Context) -> set[str]:
    """The catalog's words for what it sells that the message names, read through the store's synonyms."""
    read = content_words(terms.search_words(context.store, context.text, lang=context.language))
    return read & passages.store_index(context.store).catalog_words


def _names_another_kind(context: Context) -> bool:
    """The message names, in the catalog's words, a kind none of the cards shown is called by ("tente" after the
    Summit backpack); not "¿Cuál de las chaquetas abriga más?" after two jackets."""
    named = _kind_words(context)
    titles = set().union(*(content_words(str(card.get("title") or "")) for card in context.shown))
    return bool(named) and not named <= titles


def _points_back(text: str, shown: list[dict[str, Any]]) -> bool:
    """The message is about the card shown: "it", or "they" when one card is ("how much do they cost?" after the
    trekking poles searched the words and quoted the shipping policy); "do they ship to Canada?" asks the store."""
    if asks_after_sales(text):
        return False  # "when would it arrive if I order today?": the store's delivery, not the card's
    if _POINTS_BACK.search(text):
        return True
    return len(shown) == 1 and bool(_THEY.search(text)) and not asks_about_the_store(text)


def _people(text: str) -> re.Match[str] | None:
    """The count of people asked about: "for a family of five" is five, its article no count; "for a" alone is
    one ("big enough for a person?")."""
    found = list(_PEOPLE.finditer(text))
    counted = [m for m in found if (m.group(1) or m.group(2)).lower() not in ("a", "an")]
    return (counted or found or [None])[0]


# What is left of a capacity question that names no product: "how much is it for 3 people?", "which one?"
# A temperature asked and the words of warmth around it: "warm enough for minus 5 degrees", "rated to -10 °C"
_TEMPERATURE_WORDS = re.compile(
    r"(?:\bminus\s+|-)?\d+(?:[.,]\d+)?\s*(?:°\s*[CF]?|ºC|degrees?(?:\s+c(?:elsius)?)?)?"
    r"|\b(?:warm|warmth|cold|rated|comfortable|celsius|minus)\b",
    re.IGNORECASE,
)
_POINTING_FILLER = re.compile(r"\b(?:how|much|price|cost|costs|one|ones|this|that|these|those|them|they|it|its)\b", re.I)

# "How many people does the Basecamp tent sleep?", "How many people fit in the Ridgeline?": what it is made for.
_HOW_MANY = re.compile(
    r"^\W*how\s+many\s+(?:people|persons|adults|kids|of us)\s+(?:(?:does|can|will|would)\s+(?:the|your|this|that)\s+"
    r"(.+?)\s+(?:sleep|fit|hold|take|seat)|(?:fit|sleep|go)\s+in(?:to|side)?\s+(?:the|your|this|that)\s+(.+?))\s*[?.!]*$",
    re.IGNORECASE,
)


def _capacity(context: Context) -> list[Call]:
    text = _TWO.sub("for two", context.text)
    how_many = _HOW_MANY.match(text)
    if how_many:
        return [call("check_capacity", product=how_many.group(1) or how_many.group(2))]
    temperature = asked_temperature(text)  # "warm enough for -5?", "a sleeping bag for -5 degrees"
    if not _CAPACITY_ASK.search(text) and temperature is None:
        return []
    people, weight = _people(text), _WEIGHT.search(text)
    if not (people or weight or temperature is not None):
        return []
    product = " ".join(_CAPACITY_FILLER.sub(" ", _TEMPERATURE_WORDS.sub(" ", text)).split())
    if context.shown and not _POINTING_FILLER.sub(" ", product).strip():
        # "How much is it for 3 people?", "which one is for two?" after the tents: the tents shown; "is it warm
        # enough for -5?": the first card, as "it" is everywhere else
        product = "it" if temperature is not None and _POINTS_BACK.search(text) else "those"
    if not product:
        return []
    if context.language == "en":  # "a tnet for two": the catalog's word for the typo
        product = terms.search_words(context.store, product, lang="en")
    arguments: dict[str, object] = {"product": product}
    if weight:
        arguments["weight_kg"] = float(weight.group(1))
    elif people:
        arguments["people"] = _quantity(people.group(1) or people.group(2))
    else:
        arguments["temperature_c"] = temperature
    return [call("check_capacity", **arguments)]


def _named_comparison(text: str) -> list[Call]:
    either = next((match for match in (pattern.match(text) for pattern in _EITHER) if match), None)
    if either:
        first, second = either.group(1), either.group(2)
        second = re.sub(r"\bone$", first.split()[-1], second) if len(first.split()) > 1 else second  # "the synthetic one"
        # "which is cheaper, the mug or the cookset?": ranked on what is asked; else everything the catalog says
        asked = comparison.attribute_of(text)
        ranked = {"attribute": asked[0], "ascending": asked[1]} if asked else {}
        return [call("compare_products", products=[first, second], **ranked)]
    if not _COMPARE.search(text):
        return []
    phrases = [p.strip() for p in re.split(r"\s*(?:\band\b|\bvs\.?|\bversus\b|\bor\b|&|,)\s*", _COMPARE_FILLER.sub(" ", text))]
    phrases = [" ".join(p.split()) for p in phrases if p.strip()]
    return [call("compare_products", products=phrases[:4])] if phrases else []


def _ranked_kind(text: str, shown: list[dict[str, Any]]) -> list[Call]:
    """"Which backpack is cheaper?", "warmest sleeping bag you have?": the kind's products ranked on what is asked.
    "Do you have a cheaper one?" after a card names no kind: the shown product's ("sorry, we don't carry one" was
    the answer), so the cheaper backpack comes first and the shown one after it."""
    asked = next(((attribute, ascending) for pattern, attribute, ascending in _RANKED if pattern.search(text)), None)
    if asked is None:
        return []
    kind = " ".join(_RANKED_FILLER.sub(" ", text).split())
    if kind and not _WHOLE_CATALOG.sub(" ", kind).strip():
        # "What's the cheapest thing you sell?": every product of the store (no products, no cards shown)
        return [call("compare_products", products=[], attribute=asked[0], ascending=asked[1])] if not shown else []
    if not _STAND_IN.sub(" ", kind).strip():
        kind = str(shown[0].get("title") or "") if shown else ""
    if not kind:
        return []
    return [call("compare_products", products=[kind], attribute=asked[0], ascending=asked[1])]


def _budget(text: str) -> Decimal | None:
    low, high = price_limits(text)
    if high is not None or low is not None:
        return None  # "under 60 dollars": the search reads it from the words
    match = _BUDGET.search(text)
    if not match:
        return None
    amount = Decimal(match.group(1) or match.group(2))
    return (amount * _ROUGHLY).quantize(Decimal("1")) if _AROUND.search(text) else amount


def _asked_of_one(context: Context) -> list[Call]:
    """A yes/no or price question about the one product the message's first words name: "the down vest" (one
    product is called that), not "the tent" (two are: the search lists both) nor "the hoodie" (none is, whatever
    the best hit: "is the hoodie in stock?" must not answer about the sun hat). A typo of a title's word names it
    ("hamock")."""
    text = context.text
    priced = _PRICE_OF_ONE.match(text)
    asked_of = _YES_NO_OF_ONE.match(text) or priced
    if not asked_of or _ANOTHER_NAMED.search(asked_of.group(1)) or sales.mentions_sales(text):
        return []
    words = asked_of.group(1).split()
    # "down" calls two products, "down vest" one; a price question's phrase is the name whole ("sun" of "the sun
    # hoodie" calls the sun hat)
    lengths = [len(words)] if priced else range(1, min(len(words), MAX_NAME_WORDS) + 1)
    for length in lengths:
        named = _called(context, " ".join(words[:length]))
        if named is None:
            return []
        if named and length < len(words) and not _is_the_kind_named(context, named, " ".join(words[: length + 1])):
            return []  # "Is the sun hoodie in stock?": "sun" calls the sun hat, the message a hoodie
        if named:
            return [call("product_details", product=named, question=text)]
    return []


def _is_the_kind_named(context: Context, title: str, head: str) -> bool:
    """The product called ``title`` is the kind of thing the message names (``grounding.of_the_kind_named``), read
    in the whole message ("is the beanie itchy?": a beanie) or in its name and the word after it ("do the boots
    need breaking in?": boots, where the whole message read on to "boots breaking"); "the sun hoodie" is neither."""
    hits = [hit for hit in search(title, 1, store=context.store) if hit.product.title == title]
    return not hits or any(grounding.of_the_kind_named(context.store, text, hits) for text in (context.text, f"the {head}"))


def _called(context: Context, phrase: str) -> str | None:
    """The title of the one product ``phrase`` calls by words of its title or type (typos allowed); "" when
    several products are called that, None when none is."""
    asked = content_words(phrase)
    if not asked:
        return None
    hits = [h for h in search(phrase, 5, store=context.store) if h.variant is not None and h.score >= MATCH_THRESHOLD]
    called = [h.product.title for h in hits if is_called(phrase, h.product.title, h.product.product_type)]
    return None if not called else called[0] if len(called) == 1 else ""


def is_last_resort(calls: list[Call]) -> bool:
    """The plan is the catch-all catalog search: the patterns did not recognise the message."""
    return len(calls) == 1 and calls[0].name == "search_products"


def plan(context: Context) -> list[Call]:
    """The calls that answer ``context.text``; never empty (a catalog search is the last resort)."""
    text = context.text
    if handoff.asks_for_person(text):
        return [call("handoff")]
    if IDENTITY_PATTERN.search(text):
        return [call("small_talk", kind="identity")]
    planned = orders.plan(context)
    if planned:
        return planned
    planned = (
        _kit(context) or _total(context) or _capacity(context) or _capacity_in_another_language(context)
        or _in_another_language(context)
    )
    if planned:
        return planned
    pointed = _ONE_OF_SHOWN.search(text) if context.shown else None
    # "is the cheaper one warm enough?": a question about that one, when the cards tell which ("the bigger one" of
    # two tents whose texts give no volume does not)
    if pointed and not _WHICH.match(text):
        if pointed_at(context.store, pointed.group(0), context.shown) is not None:
            return [call("product_details", product=pointed.group(0), question=text)]
        measure = comparison.attribute_of(pointed.group(0))
        if measure:  # "is the lighter one freestanding?" where one tent's weight is not given: what the cards say
            return [call("compare_products", attribute=measure[0], ascending=measure[1])]
    if context.shown and comparison.asked_attribute(text):
        return [call("compare_products")]  # about the cards shown; a search when it is not (the tool decides)
    which = _WHICH_HAS.match(text) if context.shown else None
    if which:  # "which one has a laptop sleeve?" after the backpacks: what each shown one's text says
        return [call("which_has", question=which.group(1))]
    planned = _named_comparison(text) or _ranked_kind(text, context.shown)
    if planned:
        return planned
    english = context.language == "en" and not asks_about_the_store(text)
    degree = (
        _HOW_IS_ONE.match(text) or _ENOUGH_FOR_ONE.match(text) or _GOOD_FOR_ONE.match(text) or _WEIGHS_ONE.match(text)
        or _HOLDS_ONE.match(text) or _PROPERTY_OF_ONE.match(text)
    ) if english else None
    if degree:
        return [call("product_details", product=next(g for g in degree.groups() if g), question=text)]
    planned = _asked_of_one(context) if english else []
    if planned:
        return planned
    if context.shown and _points_back(text, context.shown) and len(text.split()) <= _FOLLOW_UP_WORDS:
        return [call("product_details", product="it", question=text)]
    # "¿Tienen chaquetas impermeables?": the store's synonyms for the message's language; "do u hav a hedlamp": the
    # catalog's own word for a typo of it (English only: other languages' words collide)
    arguments: dict[str, object] = {"query": terms.search_words(context.store, text, lang=context.language)}
    budget = _budget(text)
    if budget is not None:
        arguments["max_price"] = budget
    if context.language != "en":  # the catalog's words hold no price: "por menos de 150" is read from the message
        low, high = price_limits(text)
        arguments.update({k: v for k, v in (("min_price", low), ("max_price", high)) if v is not None})
    if _IN_STOCK_ONLY.search(text):
        arguments["in_stock"] = True
    gift = _gift_search(text, budget) if context.language == "en" else None
    return [gift or _whole_message_search(arguments)]


def _gift_search(text: str, budget: Decimal | None) -> Call | None:
    """"a gift for my dad who loves hiking, around 50 bucks": gift ideas for what the person likes (hiking) within
    the budget; None when the message is not about a gift or names nothing else."""
    if not _GIFT.search(text):
        return None
    doing = _DOER.sub(lambda m: f" {m.group(1)}{m.group(2)}ing ", text)  # "a gift for a hiker": for hiking
    words = " ".join(_GIFT_FRAME.sub(" ", _PRICE_WORDS.sub(" ", doing)).replace(",", " ").split()).strip(" .")
    if len(re.findall(r"[a-z]{3,}", words, re.I)) == 0:
        return None  # "any gift ideas?": nothing to search for but the whole message
    low, high = price_limits(text)
    arguments: dict[str, object] = {"interests": words[:_QUERY_BOUND]}
    if high is not None or budget is not None:
        arguments["max_price"] = high if high is not None else budget
    if low is not None:
        arguments["min_price"] = low
    return call("suggest_gifts", **arguments)


def _whole_message_search(arguments: dict[str, object]) -> Call:
    """The catch-all search of the whole message, however long: the query's length bound is the model's (its
    query is generated text), and a message past it must still be searched, not fail the plan."""
    query = str(arguments["query"])
    checked = call("search_products", **{**arguments, "query": query[:_QUERY_BOUND]})
    return Call("search_products", checked.arguments.model_copy(update={"query": query}))
