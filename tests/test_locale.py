"""shop_assistant/locale: the chat's translations (Spanish, French, German), compiled and committed.

The committed django.mo files must say what their django.po files say: a fresh machine needs no gettext, so a .po
edited without compiling would silently answer with the old text. After editing a .po (or marking new strings and
running ``cd shop_assistant/chat && django-admin makemessages -l es -l fr -l de --add-location file
--no-obsolete``), compile with ``cd shop_assistant && django-admin compilemessages``.
"""

from __future__ import annotations

import ast
import gettext
import re
import shutil
import string
import subprocess
from pathlib import Path

import pytest

LOCALE = Path(__file__).resolve().parent.parent / "shop_assistant" / "locale"
LANGUAGES = ("es", "fr", "de")
_LINE = re.compile(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?) (".*")$')


def po_catalog(path: Path) -> dict:
    """A .po file's messages as ``gettext.GNUTranslations`` keys them: "ctxt\\x04msgid" -> msgstr, and
    (msgid, n) -> each plural form. The format is gettext's own; its quoted strings are C-escaped, which Python's
    literal syntax reads the same for what these files hold (\\n, \\", \\\\)."""
    catalog: dict = {}
    entry: dict = {}
    field = None

    def flush() -> None:
        if "msgid" not in entry or not entry["msgid"]:
            return
        key = entry["msgid"] if "msgctxt" not in entry else f"{entry['msgctxt']}\x04{entry['msgid']}"
        forms = {name: value for name, value in entry.items() if name.startswith("msgstr[")}
        if forms:
            for name, value in forms.items():
                catalog[(key, int(name[7:-1]))] = value
        elif entry.get("msgstr"):
            catalog[key] = entry["msgstr"]

    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            flush()
            entry, field = {}, None
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            entry[field] += ast.literal_eval(line)
        else:
            match = _LINE.match(line)
            assert match, f"{path}: unreadable line {line!r}"
            field = match.group(1)
            entry[field] = ast.literal_eval(match.group(3))
    flush()
    return catalog


def mo_catalog(path: Path) -> dict:
    with path.open("rb") as handle:
        translations = gettext.GNUTranslations(handle)
    return {key: value for key, value in translations._catalog.items() if key != ""}  # "": the header


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_committed_mo_says_what_the_po_says(language):
    folder = LOCALE / language / "LC_MESSAGES"
    po, mo = po_catalog(folder / "django.po"), mo_catalog(folder / "django.mo")
    assert po, "no translated message"
    assert set(po) == set(mo), "django.mo is out of date: run compilemessages (this file's docstring)"
    stale = [key for key in po if po[key] != mo[key]]
    assert stale == [], f"django.mo is out of date for {stale[:3]}: run compilemessages"


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_message_is_translated_with_the_same_placeholders(language):
    """A translation that drops or renames a {placeholder} would fail ``str.format`` in the middle of an answer."""
    path = LOCALE / language / "LC_MESSAGES" / "django.po"
    text = path.read_text(encoding="utf-8")
    blocks = [block for block in text.split("\n\n")[1:] if "msgid" in block]
    for block in blocks:
        single = po_catalog_of_block(block)
        for msgid, msgstr in single:
            assert msgstr, f"{language}: {msgid!r} is not translated"
            assert placeholders(msgstr) == placeholders(msgid), f"{language}: {msgid!r} -> {msgstr!r}"
    assert "#, fuzzy" not in text.split("\n\n", 1)[1], "a fuzzy message is not used by gettext"


def po_catalog_of_block(block: str) -> list[tuple[str, str]]:
    """(msgid, msgstr) pairs of one .po entry: the plural forms each against the plural msgid (a one form may say
    the number in words, so it is checked against the plural's placeholders too: they are the same here)."""
    fields: dict[str, str] = {}
    field = None
    for line in block.splitlines():
        if line.startswith("#"):
            continue
        if line.startswith('"'):
            fields[field] += ast.literal_eval(line)
            continue
        match = _LINE.match(line)
        assert match, line
        field = match.group(1)
        fields[field] = ast.literal_eval(match.group(3))
    msgid = fields.get("msgid_plural", fields["msgid"])
    return [(msgid, value) for name, value in fields.items() if name.startswith("msgstr")]


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="GNU msgfmt is not installed: its format check is skipped")
@pytest.mark.parametrize("language", LANGUAGES)
def test_msgfmt_finds_no_error_and_compiles_the_same_mo(language, tmp_path):
    folder = LOCALE / language / "LC_MESSAGES"
    compiled = tmp_path / "django.mo"
    subprocess.run(["msgfmt", "--check", "-o", str(compiled), str(folder / "django.po")], check=True)
    assert mo_catalog(compiled) == mo_catalog(folder / "django.mo")
