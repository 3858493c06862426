"""catalog.language: the language of a shopper's message, on held-out messages written before any detector ran."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from catalog import language

SAMPLES = json.loads((Path(__file__).parent / "language_samples.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("lang", ["en", "es", "fr", "de"])
def test_held_out_messages_of_each_language(lang):
    """Measured 2026-12-05 with py3langid 0.4.0: 30 of 30 in each language (see the module's table)."""
    wrong = [(text, language.detect(text)) for text in SAMPLES[lang] if language.detect(text) != lang]
    assert len(SAMPLES[lang]) == 30
    assert wrong == []


def test_short_messages_are_english():
    assert len(SAMPLES["en_short"]) == 20
    assert {text: language.detect(text) for text in SAMPLES["en_short"]} == {text: "en" for text in SAMPLES["en_short"]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ok", "en"),
        ("hi", "en"),
        ("boots?", "en"),
        ("sun hat", "en"),  # py3langid alone: German at 0.76
        ("", "en"),
        ("44 10 12", "en"),  # numbers are no words
        ("¿Tienen chaquetas impermeables?", "es"),
        ("Avez-vous des vestes imperméables ?", "fr"),
        ("Habt ihr wasserdichte Jacken?", "de"),
    ],
)
def test_detect(text, expected):
    assert language.detect(text) == expected


@pytest.mark.parametrize(
    ("text", "earlier", "expected"),
    [
        ("¿en azul?", "¿Tienen chaquetas impermeables?", "es"),  # too short to tell: the conversation's language
        ("en bleu ?", "Avez-vous des vestes imperméables ?", "fr"),
        ("und blau?", "Habt ihr wasserdichte Jacken?", "de"),
        ("in blue?", "Do you have rain jackets?", "en"),
        ("¿en azul?", "", "en"),  # nothing before it: the store's default
        ("¿en azul?", "hola", "en"),  # nor does one word before it tell
        ("Do you have rain jackets?", "¿Tienen chaquetas impermeables?", "en"),  # a message that tells is its own
    ],
)
def test_a_message_too_short_to_tell_is_in_the_language_of_the_one_before(text, earlier, expected):
    assert language.detect(text, earlier=earlier) == expected


def test_only_the_four_languages_come_back():
    assert language.detect("Hebt u waterdichte jassen voor de winter?") in language.LANGUAGES  # Dutch
    assert language.detect("Vocês têm jaquetas impermeáveis para o inverno?") in language.LANGUAGES  # Portuguese


def test_the_model_is_loaded_once_for_all_threads(monkeypatch):
    from py3langid import langid

    loads = []
    real = langid.LanguageIdentifier.from_model_file.__func__

    def counting(cls, *args, **kwargs):
        loads.append(threading.get_ident())
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(langid.LanguageIdentifier, "from_model_file", classmethod(counting))
    monkeypatch.setattr(language, "_identifier", None)
    results: list[str] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        results.append(language.detect("¿Cuánto cuesta el saco de dormir?"))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["es"] * 8
    assert len(loads) == 1
    assert language.detect("wie lange dauert die Lieferung") == "de" and len(loads) == 1
