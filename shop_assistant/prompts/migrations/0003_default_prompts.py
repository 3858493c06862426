"""Every store without a published prompt gets the default one, published: since then a store gets it when it is
created (``studio.receivers``), and the chat only reads the published prompt, it never writes one.

The same version ``services.ensure_default_prompt`` makes (the next number, note "default"), written with the
migration's historical models.
"""

from django.db import migrations
from django.db.models import Max
from django.utils import timezone


def publish_default_prompts(apps, schema_editor):
    from shop_assistant.prompts.defaults import DEFAULT_SYSTEM_PROMPT

    Store = apps.get_model("catalog", "Store")
    PromptVersion = apps.get_model("prompts", "PromptVersion")
    for store in Store.objects.exclude(prompt_versions__status="published").order_by("pk"):
        latest = PromptVersion.objects.filter(store=store).aggregate(v=Max("version"))["v"] or 0
        PromptVersion.objects.create(
            store=store,
            version=latest + 1,
            system_prompt=DEFAULT_SYSTEM_PROMPT.format(store=store.name),
            note="default",
            status="published",
            published_at=timezone.now(),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0003_model_text"),
        ("prompts", "0002_studio"),
    ]

    # Nothing to undo: the versions made are ordinary ones, kept like any other.
    operations = [migrations.RunPython(publish_default_prompts, migrations.RunPython.noop)]
