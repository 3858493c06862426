"""The docs say what the code does (issue 23): the files they name exist, the counts they give are the data's."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
TOP_LEVEL = ("shop_assistant/", "inference/", "catalog/", "tests/", "scripts/", "docs/", "static/", "templates/",
             "tools/", "benchmarks/", "requirements/")
EVALUATION = REPO_ROOT / "shop_assistant" / "evaluation"


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_every_file_a_doc_names_exists(doc):
    named = set(re.findall(r"`([\w./-]+\.(?:py|json|md|yml|sh|txt|css|js|html))`", doc.read_text()))
    missing = sorted(path for path in named if path.startswith(TOP_LEVEL) and not (REPO_ROOT / path).exists())
    assert missing == []


def test_the_readme_counts_the_evaluation_s_questions_and_labelled_sentences():
    readme = REPO_ROOT / "README.md"
    questions = json.loads((EVALUATION / "questions.json").read_text())
    labelled = json.loads((EVALUATION / "labelled_sentences.json").read_text())
    sentences = sum(len(answer["sentences"]) for answer in labelled["answers"])
    text = readme.read_text()
    assert re.search(r"asks (\d+) shopper\s+questions", text).group(1) == str(len(questions))
    assert re.search(r"on (\d+) hand-labelled sentences", text).group(1) == str(sentences)
    protocol = (REPO_ROOT / "docs" / "chat-protocol.md").read_text()
    assert re.search(r"\((\d+) questions over the demo store", protocol).group(1) == str(len(questions))


def test_the_chat_models_say_when_a_conversation_row_is_made():
    """A conversation is saved with its first message (conversations.draft_conversation), not on connect."""
    from shop_assistant.chat import models

    doc = " ".join(models.__doc__.split())
    assert "created synchronously when a websocket connects" not in doc
    assert "first message" in doc


def test_no_doc_offers_the_widget_key_nobody_reads():
    for doc in DOCS:
        assert "widget key" not in doc.read_text().lower(), doc
    assert "data-key" not in (REPO_ROOT / "shop_assistant" / "studio" / "views.py").read_text()


def test_the_runtime_page_names_every_thread_the_code_starts():
    """docs/runtime.md draws the processes and threads: a thread started under a name it does not list is a
    thread nobody reading it knows about."""
    page = (REPO_ROOT / "docs" / "runtime.md").read_text()
    started = set()
    for package in ("shop_assistant", "inference", "catalog"):
        for path in (REPO_ROOT / package).rglob("*.py"):
            text = path.read_text()
            started |= set(re.findall(r"Thread\([^)]*name=\"([\w-]+)\"", text))
            started |= {f"{prefix}-*" for prefix in re.findall(r"thread_name_prefix=\"([\w-]+)\"", text)}
    assert {"engine-loader", "engine-node-listener", "chat-spool-replayer", "studio-scoring"} <= started
    assert sorted(name for name in started if f"`{name}`" not in page) == []
