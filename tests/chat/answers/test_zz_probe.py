import pytest
from catalog import language
from shop_assistant.chat.answers.planning import rules
from shop_assistant.chat.answers.retrieval import retrieve
from shop_assistant.chat.answers.tools import Context, execute
from shop_assistant.chat.answers.opening import opening_for
from tests.chat.answers.conftest import cards_of

pytestmark = pytest.mark.django_db
LINES = [l.rstrip("\n") for l in open("/tmp/exp/qs.txt") if l.strip()]

def test_probe(shop):
    for line in LINES:
        q, _, shown = line.partition(" || ")
        cards = cards_of(shop, *shown.split(" ;; ")) if shown else []
        ctx = Context(shop, q, retrieve, "", cards, language.detect(q))
        calls = rules.plan(ctx)
        c = execute(ctx, calls)
        text = c.reply if c.fixed else " ".join(c.lead + [opening_for(shop, q, c.products, c.answers).text if (c.products or c.answers) else ""])
        print("\nQ:", q, ("[shown: " + shown + "]") if shown else "", [(x.name, x.arguments.model_dump(exclude_none=True)) for x in calls][:2])
        print("A:", c.kind, "|", text[:700])
