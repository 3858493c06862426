"""python manage.py evaluate_answers [--store SLUG] [--questions FILE] [--json OUT] [--subset]"""

from __future__ import annotations

import asyncio
import json

from django.core.management.base import BaseCommand, CommandError

from shop_assistant.runtime import engine_service
from shop_assistant.evaluation import answers as evaluation


class Command(BaseCommand):
    help = (
        "Ask the question set through the chat pipeline (one fresh session each) and report loops, words, "
        "human claims, made-up prices or percentages, products in the cards, facts on screen, no-match and handoff "
        "handling, and the words shown: unsupported (U), disowning (D), narrating (N), contradicting a quote (C), "
        "cut or empty (X)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--store", help="only the questions of this store")
        parser.add_argument("--questions", help=f"a question file (default: {evaluation.QUESTIONS_PATH.name})")
        parser.add_argument("--json", dest="json_out", help="write the per-question report to this file")
        parser.add_argument("--subset", action="store_true", help="only the questions marked for CI")
        parser.add_argument("--limit", type=int, help="at most this many questions")

    def handle(self, *args, **options) -> None:
        questions = evaluation.load_questions(options["questions"], subset=options["subset"])
        if options["store"]:
            questions = [q for q in questions if q.store == options["store"]]
        if options["limit"]:
            questions = questions[: options["limit"]]
        if not questions:
            raise CommandError("no questions to ask")
        evaluation.ensure_stores({q.store for q in questions})

        def progress(outcome: evaluation.Outcome) -> None:
            marks = "".join(
                mark
                for mark, bad in (
                    ("L", outcome.loop),
                    ("H", outcome.human_claim),
                    ("F", bool(outcome.unsupported_figures)),
                    ("U", bool(outcome.unsupported_shown or outcome.checker_flags)),
                    ("D", bool(outcome.disowning)),
                    ("N", bool(outcome.narrating)),
                    ("C", bool(outcome.contradicting)),
                    ("X", outcome.cut or outcome.empty),
                    ("E", bool(outcome.error)),
                )
                if bad
            )
            checks = " ".join(
                f"{name}={'ok' if value else 'MISS'}"
                for name in ("product_in_cards", "fact_on_screen", "no_match_handled", "handoff_recorded")
                if (value := getattr(outcome, name)) is not None
            )
            figures = f" unsupported={outcome.unsupported_figures}" if outcome.unsupported_figures else ""
            flagged = outcome.unsupported_shown + outcome.checker_flags + outcome.disowning + outcome.narrating
            flagged_text = f"\n    flagged: {flagged!r}" if flagged else ""
            self.stdout.write(
                f"[{outcome.store}] {outcome.question!r}: {outcome.words} words ({outcome.model_sentences} model "
                f"sentences), {outcome.finish_reason}{' ' + marks if marks else ''} {checks}{figures}\n"
                f"    {outcome.answer!r}{flagged_text}"
            )

        started_here = engine_service.running_engine() is None
        try:
            outcomes, summary = asyncio.run(evaluation.evaluate(questions, progress=progress))
        finally:
            # An engine this command started stops before the interpreter does: a daemon thread killed inside a
            # kernel at exit aborts the process ("terminate called without an active exception").
            if started_here:
                engine_service.shutdown()
        self.stdout.write("")
        for key, value in summary.items():
            self.stdout.write(f"{key:20} {value}")
        missed = evaluation.failures(summary)
        self.stdout.write("thresholds: " + ("all met" if not missed else "; ".join(missed)))
        if options["json_out"]:
            with open(options["json_out"], "w") as handle:
                json.dump(evaluation.report_json(outcomes, summary), handle, indent=2)
