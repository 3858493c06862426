"""The store's answer and widget settings move off catalog.Store into the chat, which reads them: AnswerSettings
and WidgetSettings, one row per store, filled here with each store's values (its widget key included, so signed
customer identities stay valid); catalog 0008 then removes the old columns. Reversed, the values go back."""

import django.db.models.deletion
from django.db import migrations, models

import shop_assistant.chat.models

ANSWER_FIELDS = (
    "greeting", "no_match_reply", "handoff_reply", "model_text", "opening_templates", "support_hours",
    "answer_max_tokens", "temperature", "repetition_penalty", "frequency_penalty", "presence_penalty",
)


def copy_from_stores(apps, schema_editor):
    Store = apps.get_model("catalog", "Store")
    AnswerSettings = apps.get_model("chat", "AnswerSettings")
    WidgetSettings = apps.get_model("chat", "WidgetSettings")
    stores = list(Store.objects.order_by("pk"))
    AnswerSettings.objects.bulk_create(
        AnswerSettings(store=store, **{name: getattr(store, name) for name in ANSWER_FIELDS}) for store in stores
    )
    WidgetSettings.objects.bulk_create(
        WidgetSettings(store=store, allowed_origins=store.widget_allowed_origins, key=store.widget_key)
        for store in stores
    )


def copy_back_to_stores(apps, schema_editor):
    Store = apps.get_model("catalog", "Store")
    AnswerSettings = apps.get_model("chat", "AnswerSettings")
    WidgetSettings = apps.get_model("chat", "WidgetSettings")
    answers = {row.store_id: row for row in AnswerSettings.objects.all()}
    widgets = {row.store_id: row for row in WidgetSettings.objects.all()}
    for store in Store.objects.all():
        # A store whose settings were never read has no rows: the defaults, and a key of its own.
        own = answers.get(store.pk) or AnswerSettings()
        widget = widgets.get(store.pk) or WidgetSettings()
        for name in ANSWER_FIELDS:
            setattr(store, name, getattr(own, name))
        store.widget_allowed_origins, store.widget_key = widget.allowed_origins, widget.key
        store.save(update_fields=[*ANSWER_FIELDS, "widget_allowed_origins", "widget_key"])


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0007_store_widget_key_not_unique"),
        ("chat", "0011_message_kind"),
    ]

    operations = [
        migrations.CreateModel(
            name="AnswerSettings",
            fields=[
                ("store", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name="answer_settings", serialize=False, to="catalog.store")),
                ("greeting", models.TextField(blank=True, help_text="First line the widget shows; empty: the default greeting.")),
                ("no_match_reply", models.TextField(blank=True, help_text="Fixed reply when the catalog has nothing for a request; empty: a reply built from the store's product types.")),
                ("handoff_reply", models.TextField(blank=True, help_text="Fixed reply when a shopper asks for a person.")),
                ("model_text", models.CharField(choices=[("off", "Off: openings only, no model text"), ("checked", "Checked: each model sentence shown only if the store's data supports it"), ("unchecked", "Unchecked: the model's text as it comes (prices and stock still guarded)")], default="checked", max_length=10)),
                ("opening_templates", models.JSONField(blank=True, default=dict)),
                ("support_hours", models.JSONField(blank=True, default=dict)),
                ("answer_max_tokens", models.PositiveIntegerField(blank=True, null=True)),
                ("temperature", models.FloatField(blank=True, null=True)),
                ("repetition_penalty", models.FloatField(blank=True, null=True)),
                ("frequency_penalty", models.FloatField(blank=True, null=True)),
                ("presence_penalty", models.FloatField(blank=True, null=True)),
            ],
            options={
                "verbose_name_plural": "answer settings",
            },
        ),
        migrations.CreateModel(
            name="WidgetSettings",
            fields=[
                ("store", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name="widget_settings", serialize=False, to="catalog.store")),
                ("allowed_origins", models.TextField(blank=True)),
                ("key", models.CharField(default=shop_assistant.chat.models.new_widget_key, editable=False, max_length=64, unique=True)),
            ],
            options={
                "verbose_name_plural": "widget settings",
            },
        ),
        migrations.RunPython(copy_from_stores, copy_back_to_stores),
    ]
