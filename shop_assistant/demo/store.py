"""The demo store behind the README's run command: "Demo Outfitters", an outdoor gear shop."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from catalog.embeddings import embed_products
from catalog.ingest import read_source
from catalog.ingest.upsert import apply_catalog
from catalog import synonyms
from catalog.models import SearchSynonym, Store
from shop_assistant.chat.models import AnswerSettings
from shop_assistant.console.models import Label
from shop_assistant.demo.orders import load_demo_orders
from shop_assistant.studio import services
from shop_assistant.prompts.defaults import DEFAULT_SYSTEM_PROMPT
from shop_assistant.prompts.models import SampleQuestion

CATALOG_PATH = Path(__file__).resolve().parent / "demo_catalog.json"
# Its search synonyms (Spanish, French, German -> the catalog's words), reviewed data like the products.
SYNONYMS_PATH = Path(__file__).resolve().parent / "demo_synonyms.csv"
STORE_SLUG = "demo"
STORE_NAME = "Demo Outfitters"
STAFF_USERNAME = "staff"
# As its FAQ says: "Agents answer Monday to Friday, 9:00 to 17:00" (the store's base is on the US east coast).
SUPPORT_HOURS = {"timezone": "America/New_York", "weekdays": [0, 1, 2, 3, 4], "open": "09:00", "close": "17:00"}
# What the studio's preview asks, and the widget offers as buttons before the shopper has said anything.
SAMPLE_QUESTIONS = (
    "Do you have rain jackets?",
    "Which tent is best for backpacking?",
    "What is your return policy?",
    "How long does shipping take?",
)

# The labels agents start with (Label.COLORS): what an outdoor shop's support sorts its chats by.
LABELS = (("order-status", "#1f6feb"), ("returns", "#bf8700"), ("product-question", "#2da44e"),
          ("complaint", "#cf222e"))


NO_POLICIES_NOTE = "default: the policies are the knowledge documents"


def _restates_policies(store: Store) -> bool:
    """The demo's published prompt is one from before the knowledge documents became a policy's one copy: its own
    policy lines ("Returns: ... 30 days") are no longer sent, and the prompt that refers to the documents is the
    default now. A prompt the owner wrote since is theirs: only one that still carries policy lines is replaced."""
    published = services.published_prompt(store)
    return published is not None and bool(published.policies.strip())


def demo_password() -> tuple[str, bool]:
    """The demo accounts' password and whether it came from ``DEMO_STAFF_PASSWORD``. Never a fixed one: the demo
    runs on LANs and in docker-compose, where a password printed in a public README opens the admin to anyone."""
    chosen = os.environ.get("DEMO_STAFF_PASSWORD", "")
    return (chosen, True) if chosen else (secrets.token_urlsafe(12), False)


@dataclass
class DemoResult:
    store: Store
    changes: list[str] = field(default_factory=list)
    password: str = ""  # the demo accounts' password (set on accounts made by this run only)
    password_from_env: bool = False
    user_created: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def load_demo_store(embed: bool = True, password: str | None = None) -> DemoResult:
    """Create or refresh the demo store; a second call changes nothing and reports no changes. A superuser made
    now gets ``password``, or ``demo_password()``'s (random unless ``DEMO_STAFF_PASSWORD`` is set)."""
    with transaction.atomic():
        store, created = Store.objects.get_or_create(
            slug=STORE_SLUG,
            defaults={
                "name": STORE_NAME,
                "currency": "USD",
                "base_url": "https://demo-outfitters.example",
            },
        )
        result = DemoResult(store=store)
        if created:
            answers = AnswerSettings.of(store)
            answers.support_hours = SUPPORT_HOURS
            answers.save()
            result.changes.append(f'created the store "{STORE_NAME}" ({STORE_SLUG})')
        imported = apply_catalog(store, read_source("json", str(CATALOG_PATH)))
        if imported.errors:
            raise RuntimeError(f"the demo catalog has errors: {imported.errors[:3]}")
        for kind in ("products", "variants", "documents"):
            counts = imported.summary[kind]
            if counts["created"] or counts["updated"]:
                result.changes.append(f"{kind}: {counts['created']} created, {counts['updated']} updated")
        if created:  # a new store gets it with its row (studio.receivers)
            result.changes.append("published the default prompt")
        elif _restates_policies(store):
            default = DEFAULT_SYSTEM_PROMPT.format(store=store.name)
            services.publish(services.create_draft(store, default, note=NO_POLICIES_NOTE))
            result.changes.append("published the default prompt: the policies are the knowledge documents")
        if not SampleQuestion.objects.filter(store=store).exists():
            SampleQuestion.objects.bulk_create(
                SampleQuestion(store=store, text=text, position=position) for position, text in enumerate(SAMPLE_QUESTIONS)
            )
            result.changes.append(f"added {len(SAMPLE_QUESTIONS)} sample questions")
        if not SearchSynonym.objects.filter(store=store).exists():  # the owner's edits are theirs to keep
            loaded = synonyms.import_csv(store, SYNONYMS_PATH.read_text(encoding="utf-8"), SearchSynonym.Source.DEMO)
            if loaded.errors:
                raise RuntimeError(f"the demo synonyms have errors: {loaded.errors[:3]}")
            result.changes.append(f"added {loaded.added} search synonyms")
        added = load_demo_orders(store)
        if added:
            result.changes.append(f"added {added} demo orders")
        if not Label.objects.filter(store=store).exists():  # an owner's own labels are theirs to keep
            Label.objects.bulk_create(Label(store=store, name=name, color=color) for name, color in LABELS)
            result.changes.append(f"added {len(LABELS)} labels")

        result.password, result.password_from_env = (password, False) if password else demo_password()
        User = get_user_model()
        if not User.objects.filter(username=STAFF_USERNAME).exists():
            User.objects.create_superuser(STAFF_USERNAME, email="", password=result.password)
            result.user_created = True
            result.changes.append(f'created the staff user "{STAFF_USERNAME}"')
    if embed:
        embedded = embed_products(store)
        if embedded["embedded"]:
            result.changes.append(f"computed {embedded['embedded']} embeddings in {embedded['seconds']:.1f}s")
    return result
