"""The sentence checker against sentences labelled by hand (``labelled_sentences.json``).

Each answer in the file keeps what its sentences were checked against (the opening, the cards' products, the
quotes, the store's documents), so the measure needs no database and gives the same figures on every machine.
"Shown" is the positive class: precision is the share of the sentences the checker lets through that a reader
found supported, recall the share of supported sentences it lets through.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from catalog.grounding import ProductFacts

from shop_assistant.chat.guard.checker import Evidence, check

LABELLED_PATH = Path(__file__).resolve().parent / "labelled_sentences.json"


@dataclass
class Score:
    shown_supported: int = 0  # true positives
    shown_unsupported: int = 0  # a bad sentence let through
    dropped_supported: int = 0  # a good sentence lost
    dropped_unsupported: int = 0
    mistakes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def sentences(self) -> int:
        return self.shown_supported + self.shown_unsupported + self.dropped_supported + self.dropped_unsupported

    @property
    def precision(self) -> float:
        shown = self.shown_supported + self.shown_unsupported
        return self.shown_supported / shown if shown else 1.0

    @property
    def recall(self) -> float:
        supported = self.shown_supported + self.dropped_supported
        return self.shown_supported / supported if supported else 1.0

    def summary(self) -> dict[str, Any]:
        return {
            "sentences": self.sentences,
            "supported": self.shown_supported + self.dropped_supported,
            "shown": self.shown_supported + self.shown_unsupported,
            "precision": round(self.precision, 3),
            "recall": round(self.recall, 3),
            "unsupported_shown": self.shown_unsupported,
            "supported_dropped": self.dropped_supported,
        }


def load(path: str | Path | None = None) -> dict[str, Any]:
    return json.loads(Path(path or LABELLED_PATH).read_text())


def _product(raw: dict[str, Any]) -> ProductFacts:
    values = dict(raw)
    values["price"] = Decimal(values["price"])
    values["compare_at_price"] = Decimal(values["compare_at_price"]) if values["compare_at_price"] else None
    values["tags"] = tuple(values["tags"])
    return ProductFacts(**values)


def evidence_of(answer: dict[str, Any], stores: dict[str, Any]) -> Evidence:
    store = stores[answer["store"]]
    return Evidence(
        question=answer["question"],
        opening=answer["opening"],
        products=tuple(_product(p) for p in answer["products"]),
        quotes=tuple(answer["quotes"]),
        documents=tuple(store["documents"]),
        store_name=store["name"],
    )


def measure(data: dict[str, Any] | None = None, split: str | None = None) -> Score:
    """Run the checker over every labelled sentence (of ``split``: "dev" or "test"; None: all)."""
    data = data or load()
    score = Score()
    for answer in data["answers"]:
        if split is not None and answer["split"] != split:
            continue
        evidence = evidence_of(answer, data["stores"])
        shown = [answer["opening"]]
        for sentence in answer["sentences"]:
            verdict = check(sentence["text"], evidence, shown)
            if verdict.ok and sentence["supported"]:
                score.shown_supported += 1
            elif verdict.ok:
                score.shown_unsupported += 1
                score.mistakes.append({"sentence": sentence["text"], "question": answer["question"], "was": "shown"})
            elif sentence["supported"]:
                score.dropped_supported += 1
                score.mistakes.append(
                    {"sentence": sentence["text"], "question": answer["question"], "was": "dropped",
                     "reason": verdict.reason}  # fmt: skip
                )
            else:
                score.dropped_unsupported += 1
            if sentence["supported"]:
                shown.append(sentence["text"])
    return score
