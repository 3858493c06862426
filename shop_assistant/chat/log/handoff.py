"""A shopper asking for a person: recognise it, record the request on the conversation, and word the reply.

The reply is fixed text (the store's ``handoff_reply`` or the default), never model text, and it says when
agents are back if the request comes outside the store's support hours (both in ``AnswerSettings``). The default
reply and the "agents are back" sentence are translated (composed under ``translation.override``, the shopper's
language; weekday names are Django's own); the store's ``handoff_reply`` is its words.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.utils import timezone
from django.utils.dates import WEEKDAYS
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, pgettext

from catalog.models import Store

from ..models import AnswerSettings, Conversation

DEFAULT_REPLY = gettext_noop("I've asked a member of our team to join this chat; they will answer you here.")
AWAY_REPLY = gettext_noop(
    "Our team is away right now: agents are back at {when}. Your request is saved and they will answer here."
)

# Recognising a request for a person. A shopper says it in many ways ("agent pls", "can a human help me?", "is
# there anyone I can chat with?", "quiero hablar con un agente"), and a product question says "person" too ("a
# tent for two people", "is this jacket for humans?"). So a request is a *construction*, not a word: a verb of
# getting through (talk, speak, connect, hablar, pasar...) with a person as its object; a wish for a person ("I
# want a human", "necesito un agente"); a person who should help *me*; "is there anyone I can chat with?"; or a
# person named alone ("operator", "agente por favor"). English and Spanish, after the shorthand and the usual
# typos are written out (``_normalised``). Measured on a held-out list of phrasings in
# tests/chat/data/handoff_heldout.json (tests/chat/test_handoff.py). Plain regular expressions: microseconds a
# message, so they run for every message (on the planning thread, with the rest of the composition).
# The bundled embedding model (all-MiniLM-L6-v2) was not used: it is English-only, and a nearest-example score
# cannot tell "a tent for two people" from "two people to talk to" as surely as the construction does.

# Chat shorthand and common misspellings, word for word (after accents are stripped and letters lowered).
_SHORTHAND = {
    "u": "you", "r": "are", "ur": "your", "pls": "please", "plz": "please", "plss": "please", "pleaseee": "please",
    "wanna": "want to", "gimme": "give me", "w/": "with", "w": "with", "2": "to", "some1": "someone",
    "sum1": "someone", "any1": "anyone", "somone": "someone", "smone": "someone", "ppl": "people", "hooman": "human",
    "humam": "human", "agnet": "agent", "agant": "agent", "persn": "person", "peron": "person", "reel": "real",
    "tlk": "talk", "spk": "speak", "cust": "customer", "svc": "service", "im": "i am", "id": "i would",
    # Spanish: a dropped "h", "k" for "qu", "q" for "que", texting abbreviations
    "ablar": "hablar", "ablo": "hablo", "kiero": "quiero", "kisiera": "quisiera", "q": "que", "k": "que",
    "xfa": "por favor", "porfa": "por favor", "porfavor": "por favor", "xq": "porque", "alguein": "alguien",
    "algien": "alguien", "umano": "humano", "ajente": "agente",
}
_TOKEN = re.compile(r"(?<![\w-])(?:w/|[a-z0-9]+)(?![\w-])")  # not inside "2-person"

# Who the shopper asks for: someone of the store, in English...
_PERSON_EN = (
    r"(?:(?:a|an|the|some|your|one of your|real|live|actual|human|proper|another|other|person|somebody)\s+)*"
    r"(?:human(?:\s+being)?s?|persons?|agents?|representatives?|reps?|operators?|staff(?:\s+member)?|"
    r"member of (?:staff|your team|the team)|employees?|team members?|managers?|supervisors?|someone|somebody|"
    r"anyone|anybody|customer (?:service|support|care)|support(?: team| staff| agents?)?|advisors?|advisers?|"
    r"associates?|specialists?|team)"
    r"(?![\w'-])"  # not "human-sized", "person-friendly", "manager's"
)
# ...and in Spanish
_PERSON_ES = (
    r"(?:(?:un|una|el|la|algun|alguna|otro|otra|de)\s+)?"
    r"(?:persona(?:\s+(?:real|de verdad|humana))?|humano|humana|agente(?:\s+humano)?|asesora?|representante|"
    r"operadora?|empleado|empleada|encargad[oa]|gerente|alguien|atencion al cliente|servicio al cliente|soporte|"
    r"equipo)"
    r"(?![\w-])"
)
_CORE_EN = (
    r"(?:humans?|persons?|agents?|representatives?|reps?|operators?|managers?|supervisors?|staff|"
    r"customer (?:service|support|care)|support (?:team|staff|agents?))(?![\w'-])"
)
_CORE_ES = r"(?:humano|persona|agente|asesora?|representante|operadora?|encargad[oa])"
# French and German, after accents are stripped ("quelqu'un" -> "quelquun", "möchte" -> "mochte")
_PERSON_FR = (
    r"(?:(?:un|une|le|la|l|des|votre|vos|quelquun|un vrai|une vraie)\s+)*"
    r"(?:humain|humaine|personne(?:\s+(?:reelle|physique))?|conseill(?:er|ere)|agent|vendeu(?:r|se)|operat(?:eur|rice)|"
    r"quelquun|service client(?:s|ele)?|equipe|responsable|employe|employee)(?![\w-])"
)
_PERSON_DE = (
    r"(?:(?:einem|einer|einen|eine|ein|dem|der|den|ihrem|ihrer|echten|echte|echtem)\s+)*"
    r"(?:mitarbeiter(?:in)?|menschen?|person|berater(?:in)?|agent(?:en|in)?|verkaufer(?:in)?|kundendienst|"
    r"kundenservice|support(?:team)?|jemand(?:em|en)?|team)(?![\w-])"
)
_REQUEST_PATTERNS = (
    # "talk to a person", "connect me with someone", "put me through to a manager", "escalate to an agent"
    # (not "talking to": "am I talking to a real person?" is the identity question)
    rf"\b(?:talk|speak|chat|connect(?:ed)?|transfer(?:red)?|put|pass(?:ed)?|reach|contact|message|escalate|switch|"
    rf"hand|forward(?:ed)?)"
    rf"(?:\s+(?:me|us|this|it|now|please|directly|right away|through|over|back|in touch|just|again)){{0,3}}"
    rf"\s+(?:to|with|w|through to)\s+{_PERSON_EN}",
    rf"\b(?:reach|contact|call|ring|get hold of|get ahold of)\s+{_PERSON_EN}",
    r"\bspeak to your\b|\btalk to (?:your|the) (?:boss|owner|team)\b",
    # "I want a human", "need human help", "can I get a real person", "get me someone who can help"
    # ("can I have a person", but not "do you have staff picks?")
    rf"\b(?:want|need|like|prefer|get|give|bring|send|request|requesting|(?:can|could|may) (?:i|we) have)\s+"
    rf"(?:me\s+)?(?:to\s+(?:have|get)\s+)?"
    rf"(?:a\s+|an\s+|some\s+)?(?:real\s+|live\s+|actual\s+|proper\s+)*{_CORE_EN}",
    rf"\b(?:help|assistance|support)\s+(?:from|of|by)\s+{_PERSON_EN}",
    r"\bget me (?:someone|somebody|a person|a human)\b",
    # "Can a human help me?", "could a member of staff help me", "can someone from support contact me?"
    rf"\b(?:can|could|will|would|may|please)\s+{_PERSON_EN}(?:\s+(?:from|of|on|at)\s+\S+(?:\s+\S+)?)?\s+"
    r"(?:please\s+)?(?:help|contact|call|assist|answer|email|text|ring|reach|message|get back to|chat with|"
    r"talk to|speak (?:to|with))\s+(?:me|us)\b",
    # "Is there anyone I can chat with?", "is there a person who can help me?"
    rf"\b(?:is|are) there\s+(?:a\s+|any\s+|some\s+)?(?:real\s+|live\s+|actual\s+)?"
    r"(?:person|human|agent|humans|agents|anyone|anybody|someone|somebody|staff)\s+(?:here\s+)?(?:i|we|who|that|"
    r"to|available|around|there|here|online)\b",
    # "is a live agent available?", "are any humans online?"
    # ("Is anyone there?" alone greets: the assistant answers it)
    r"\b(?:is|are)\s+(?:(?:a|an|any|the|your|some)\s+)?(?:(?:real|live|human|actual)\s+)?(?:(?:person|human|agent|"
    r"humans|agents|staff|representative)\s+(?:available|online|around|there|here|free)|(?:someone|somebody|anyone|"
    r"anybody)\s+(?:available|online|free))\b",
    # "any humans around?", "anyone real there?" ("Hello, anyone there?" alone is a greeting: the assistant answers)
    r"^\W*(?:(?:hello|hi|hey)\W+)?(?:is\s+)?(?:any|anyone|anybody|someone|somebody)\s+(?:humans?|real|alive)"
    r"(?:\s+(?:there|around|here|available|online|home))?\W*$",
    # a person named alone: "operator", "real person plz", "human please", "please, an agent"
    rf"^\W*(?:please\W+)?(?:(?:a|an|the|some|your|real|live|actual|human|proper)\s+)*{_CORE_EN}"
    r"(?:\W+(?:please|now|asap|thanks|thank you))*\W*$",
    # Spanish: "hablar con una persona", "pasame con un agente", "me puede atender una persona"
    r"\b(?:habl\w*|comuni(?:c|qu)\w*|contact\w*|pas(?:a|e|ar|ame|as|en|arme|eme)|pon\w*|atend\w*|atiend\w*|chate\w*|"
    r"convers\w*|escrib\w*)"
    rf"(?:\s+(?:me|ya|ahora|directamente|por favor)){{0,2}}\s+(?:con\s+|a\s+)?{_PERSON_ES}",
    # "quiero un humano", "necesito un agente humano", "quisiera una persona"
    rf"\b(?:quiero|quisiera|necesito|prefiero|dame|pido|solicito)\s+(?:un\s+|una\s+|a\s+)?(?:hablar\s+con\s+)?"
    rf"{_CORE_ES}\b",
    rf"\b(?:ayuda|atencion|asistencia)\s+(?:de|por parte de)\s+{_PERSON_ES}",
    # "hay alguien con quien pueda hablar?", "hay una persona disponible"
    r"\bhay\s+(?:alguien|una persona|algun agente|algun humano)\s+(?:con quien|que|para|disponible|ahi|alli|ahora)\b",
    # "alguien me puede ayudar?" is a question to anyone; "una persona me puede atender" is a request
    rf"\b{_PERSON_ES}\s+(?:me|nos)\s+(?:puede|podria|pueda)\s+(?:ayudar|atender|contactar|llamar|escribir)",
    # "agente por favor", "un humano"
    rf"^\W*(?:por favor\W+)?(?:un\s+|una\s+)?{_CORE_ES}(?:\s+(?:real|humano|de verdad))?(?:\W+(?:por favor|ya|ahora))*\W*$",
)
_REQUEST_PATTERNS += (
    # "I need someone from your support team", "I'd like somebody from customer service to call me"
    r"\b(?:want|need|like|get)\s+(?:to\s+(?:talk|speak)\s+(?:to|with)\s+)?(?:someone|somebody|anyone)\s+"
    r"(?:from|of|on|at|in)\s+(?:your|the)\s+(?:support|customer|service|team|staff|store)\b",
    # French: "parler à un conseiller", "mettez-moi en relation avec quelqu'un", "je veux un humain"
    rf"\b(?:parler|discuter|echanger|joindre|contacter|relation|passer|transferer)"
    rf"(?:\s+(?:moi|me|a|avec|en|directement|maintenant|svp)){{0,3}}\s+(?:a\s+|avec\s+)?{_PERSON_FR}",
    r"\b(?:je\s+)?(?:veux|voudrais|souhaite|souhaiterais|prefere|demande)\s+(?:un|une|parler a)\s+"
    r"(?:vrai\s+|vraie\s+)?(?:humain|personne|conseill(?:er|ere)|agent|operat(?:eur|rice))\b",
    # German: "mit einem Mitarbeiter sprechen", "verbinden Sie mich mit einem Menschen", "ich will einen Menschen"
    rf"\bmit\s+{_PERSON_DE}\s+(?:\w+\s+)?(?:sprechen|reden|chatten|schreiben|verbinden|telefonieren)\b",
    rf"\b(?:verbinden|weiterleiten|durchstellen)\s+(?:sie\s+)?(?:mich|uns)\s+(?:bitte\s+)?(?:mit|an|zu)\s+{_PERSON_DE}",
    r"\b(?:ich\s+)?(?:mochte|will|brauche|hatte gern|hatte gerne|wurde gern|wurde gerne)\s+(?:bitte\s+)?"
    r"(?:einen|eine|ein|mit einem|mit einer)\s+(?:echten\s+)?(?:menschen|mitarbeiter(?:in)?|berater(?:in)?|person)\b",
)
_REQUEST = re.compile("|".join(f"(?:{pattern})" for pattern in _REQUEST_PATTERNS))


def _normalised(text: str) -> str:
    """Lower case, no accents, shorthand and common misspellings written out: "kiero ablar w/ sum1" ->
    "quiero hablar with someone"."""
    plain = unicodedata.normalize("NFKD", text.lower())
    plain = "".join(char for char in plain if not unicodedata.combining(char)).replace("’", "'")
    plain = re.sub(r"(?<=[a-z])'(?=[a-z])", "", plain)  # "i'd" -> "id", "don't" -> "dont"
    return _TOKEN.sub(lambda match: _SHORTHAND.get(match.group(0), match.group(0)), plain)


def asks_for_person(text: str) -> bool:
    """True when the shopper asks to be put through to a person ("can a human help me?", "agent pls",
    "quiero hablar con un agente"); False for questions that only mention people ("a tent for two people")."""
    return bool(_REQUEST.search(_normalised(text)))


def _parse_time(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


def next_opening(hours: dict, now: datetime) -> datetime | None:
    """When agents are next available, in the store's time zone; None when they are available now (or always)."""
    if not hours:
        return None
    try:
        zone = ZoneInfo(hours.get("timezone") or "UTC")
        opens, closes = _parse_time(hours.get("open", "00:00")), _parse_time(hours.get("close", "23:59"))
    except (ZoneInfoNotFoundError, ValueError, AttributeError):
        return None  # a malformed setting must not hide agents; the studio validates it
    weekdays = set(hours.get("weekdays") or range(7))
    local = now.astimezone(zone)
    if local.weekday() in weekdays and opens <= local.time() < closes:
        return None
    for days in range(8):
        day = (local + timedelta(days=days)).date()
        if day.weekday() not in weekdays:
            continue
        start = datetime.combine(day, opens, tzinfo=zone)
        if start > local:
            return start
    return None


def describe_opening(when: datetime, now: datetime) -> str:
    """"09:00 tomorrow (Europe/Berlin)", in the active language (one message per case, so a translation can put
    the day first: "mañana a las 09:00")."""
    local_now = now.astimezone(when.tzinfo)
    clock, zone = when.strftime("%H:%M"), str(when.tzinfo)
    if when.date() == local_now.date():
        return pgettext("agents are back", "{clock} today ({zone})").format(clock=clock, zone=zone)
    if when.date() == local_now.date() + timedelta(days=1):
        return pgettext("agents are back", "{clock} tomorrow ({zone})").format(clock=clock, zone=zone)
    weekday = str(WEEKDAYS[when.weekday()])  # Django's own names: "Monday", "lunes", "lundi", "Montag"
    return pgettext("agents are back", "{clock} {weekday} ({zone})").format(clock=clock, weekday=weekday, zone=zone)


def agents_back(store: Store, now: datetime | None = None) -> str | None:
    """When agents are back ("09:00 Monday (America/New_York)"), or None when they are there now (or always)."""
    now = now or timezone.now()
    opening = next_opening(AnswerSettings.of(store).support_hours or {}, now)
    return None if opening is None else describe_opening(opening, now)


def reply_for(store: Store, now: datetime | None = None) -> str:
    now = now or timezone.now()
    own = AnswerSettings.of(store)
    base = own.handoff_reply.strip() or _(DEFAULT_REPLY)
    opening = next_opening(own.support_hours or {}, now)
    if opening is None:
        return base
    away = _(AWAY_REPLY).format(when=describe_opening(opening, now))
    return away if not own.handoff_reply.strip() else f"{base} {away}"


def request_handoff(conversation: Conversation, now: datetime | None = None) -> Conversation:
    """Record that the shopper wants a person (blocking: database). An agent already on it keeps the chat."""
    now = now or timezone.now()
    fields = []
    if conversation.status == Conversation.Status.BOT:
        conversation.status = Conversation.Status.HANDOFF
        fields.append("status")
    if conversation.handoff_requested_at is None:
        conversation.handoff_requested_at = now
        fields.append("handoff_requested_at")
    if fields:
        Conversation.objects.filter(pk=conversation.pk).update(**{name: getattr(conversation, name) for name in fields})
    return conversation
