"""python manage.py evaluate_conversations [--split dev|test|fresh|all] [--planner rules|model] [--json OUT]
[--only ID,ID]"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from shop_assistant.evaluation import conversations as evaluation
from shop_assistant.runtime import engine_service


class Command(BaseCommand):
    help = (
        "Run the conversation set through the chat pipeline (one session per conversation, its turns in order) "
        "and report, per kind and split, the conversations whose every expectation held, the wrong facts on "
        "screen, the model-written share of the sentences and the time to the first visible text."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--split", choices=(*evaluation.SPLITS, "all"), default="all",
                            help="all: dev and test (fresh, the held-out split, is run only on its own)")  # fmt: skip
        parser.add_argument("--planner", choices=evaluation.PLANNERS, default=evaluation.DEFAULT_PLANNER,
                            help="the ANSWER_PLANNER setting to run under")  # fmt: skip
        parser.add_argument("--json", dest="json_out", help="write every turn's text and verdict to this file")
        parser.add_argument("--only", help="comma-separated conversation ids")
        parser.add_argument("--conversations", help=f"a set file (default: {evaluation.CONVERSATIONS_PATH.name})")
        parser.add_argument("--quiet", action="store_true", help="no line per conversation")
        parser.add_argument("--sampled", action="store_true",
                            help="decode with the shipped CHAT settings instead of greedy with seed 0")  # fmt: skip

    def handle(self, *args, **options) -> None:
        from shop_assistant.evaluation.answers import ensure_stores

        only = [part.strip() for part in (options["only"] or "").split(",") if part.strip()]
        try:
            store, conversations = evaluation.load_conversations(
                options["conversations"], split=options["split"], only=only or None
            )
        except ValueError as error:
            raise CommandError(str(error)) from error
        if not conversations:
            raise CommandError("no conversations to run")
        ensure_stores({store})

        def progress(conversation: evaluation.Conversation) -> None:
            if options["quiet"]:
                return
            self.stdout.write(f"{'RIGHT' if conversation.right else 'WRONG'} {conversation.id} ({conversation.split})")
            for record in conversation.records:
                failed = [key for key, value in record.checks.items() if value is False]
                self.stdout.write(
                    f"  > {record.shopper!r}\n    {record.text!r}\n"
                    f"    cards={[card['sku'] for card in record.cards]} quotes={len(record.quotes)} "
                    f"handoff={record.handoff} model_sentences={record.model_sentences} "
                    f"first={record.first_text_ms}ms total={record.seconds}s"
                    + (f" FAILED={failed}" if failed else "")
                    + "".join(f"\n    WRONG FACT: {fact}" for fact in record.wrong_facts)
                )

        started_here = engine_service.running_engine() is None
        try:
            result = asyncio.run(evaluation.evaluate(
                conversations, store, options["planner"], progress, decoding={} if options["sampled"] else None
            ))
        finally:
            # An engine this command started stops before the interpreter does (see evaluate_answers).
            if started_here:
                engine_service.shutdown()
        self.stdout.write(table(result))
        if options["json_out"]:
            with open(options["json_out"], "w") as handle:
                json.dump(result, handle, indent=2, default=str)


def cell(tally: dict[str, Any] | None) -> str:
    return f"{tally['right']}/{tally['total']}" if tally else "-"


def table(result: dict[str, Any]) -> str:
    """Kind x split as right/total, then the totals, the wrong facts and the figures."""
    summary = result["summary"]
    splits = [*summary["by_split"], "all"]
    lines = [
        f"\nplanner: {result['planner']}; decoding over the shipped settings: {result.get('decoding')}",
        f"{'kind':12}" + "".join(f"{split:>8}" for split in splits),
    ]
    for kind, tallies in summary["by_kind"].items():
        lines.append(f"{kind:12}" + "".join(f"{cell(tallies.get(split)):>8}" for split in splits))
    overall = {**summary["by_split"], "all": summary["overall"]}
    lines.append(f"{'ALL':12}" + "".join(f"{cell(overall[split]):>8}" for split in splits))
    lines.append(f"{'%':12}" + "".join(f"{overall[split]['percent']:>8}" for split in splits))
    turns = [f"{overall[split]['turns_right']}/{overall[split]['turns']}" for split in splits]
    lines.append(f"{'turns':12}" + "".join(f"{cell:>8}" for cell in turns))
    lines.append(f"checks failed: {summary['checks_failed']}")
    lines.append(f"not measured: {summary['not_measured']}")
    lines.append(
        f"model sentences: {summary['model_sentences']} of {summary['sentences']} "
        f"(share {summary['model_sentence_share']}); errors: {summary['errors']}"
    )
    lines.append(
        f"first visible text: median {summary['first_text_ms_median']} ms; turn: median "
        f"{summary['turn_seconds_median']} s, max {summary['turn_seconds_max']} s"
    )
    lines.append(f"wrong facts: {summary['wrong_facts']} (in {summary['turns_with_wrong_facts']} turns)")
    for conversation in result["conversations"]:
        for number, turn in enumerate(conversation["turns"], 1):
            lines += [f"  {conversation['id']} turn {number}: {fact}" for fact in turn["wrong_facts"]]
    return "\n".join(lines)
