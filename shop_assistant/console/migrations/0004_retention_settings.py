"""The store's retention moves off catalog.Store into the console, whose job applies it: RetentionSettings, filled
here for every store that had one (the others keep everything, the default); catalog 0008 then removes the old
column. Reversed, the values go back."""

import django.db.models.deletion
from django.db import migrations, models


def copy_from_stores(apps, schema_editor):
    Store = apps.get_model("catalog", "Store")
    RetentionSettings = apps.get_model("console", "RetentionSettings")
    RetentionSettings.objects.bulk_create(
        RetentionSettings(store=store, retention_days=store.retention_days)
        for store in Store.objects.filter(retention_days__isnull=False).order_by("pk")
    )


def copy_back_to_stores(apps, schema_editor):
    Store = apps.get_model("catalog", "Store")
    RetentionSettings = apps.get_model("console", "RetentionSettings")
    for row in RetentionSettings.objects.filter(retention_days__isnull=False):
        Store.objects.filter(pk=row.store_id).update(retention_days=row.retention_days)


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0007_store_widget_key_not_unique"),
        ("console", "0003_label_color_notifications"),
    ]

    operations = [
        migrations.CreateModel(
            name="RetentionSettings",
            fields=[
                ("store", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name="retention_settings", serialize=False, to="catalog.store")),
                ("retention_days", models.PositiveIntegerField(blank=True, null=True)),
            ],
            options={
                "verbose_name_plural": "retention settings",
            },
        ),
        migrations.RunPython(copy_from_stores, copy_back_to_stores),
    ]
