"""python manage.py check_sentences [--split dev|test|fresh] [--file FILE] [--mistakes]"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from shop_assistant.evaluation import sentences


class Command(BaseCommand):
    help = (
        "Run the chat's sentence checker over the sentences labelled by hand and print its precision (the share of "
        "the sentences it shows that a reader found supported) and recall (the share of supported ones it shows)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--split", choices=["dev", "test", "fresh"], help="only this part of the labelled set")
        parser.add_argument("--file", help=f"a labelled file (default: {sentences.LABELLED_PATH.name})")
        parser.add_argument("--mistakes", action="store_true", help="list the sentences it got wrong")

    def handle(self, *args, **options) -> None:
        data = sentences.load(options["file"])
        splits = [options["split"]] if options["split"] else sorted({a["split"] for a in data["answers"]})
        for split in [*splits, None] if len(splits) > 1 else splits:
            score = sentences.measure(data, split)
            self.stdout.write(f"{split or 'all':6} {json.dumps(score.summary())}")
            if options["mistakes"]:
                for mistake in score.mistakes:
                    self.stdout.write(f"    {json.dumps(mistake)}")
