"""The owner's settings leave catalog.Store: chat 0012 and console 0004 copied them into the apps that read them
(chat.AnswerSettings, chat.WidgetSettings, console.RetentionSettings)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0007_store_widget_key_not_unique"),
        ("chat", "0012_answer_and_widget_settings"),
        ("console", "0004_retention_settings"),
    ]

    operations = [
        migrations.RemoveField(model_name="store", name="answer_max_tokens"),
        migrations.RemoveField(model_name="store", name="frequency_penalty"),
        migrations.RemoveField(model_name="store", name="greeting"),
        migrations.RemoveField(model_name="store", name="handoff_reply"),
        migrations.RemoveField(model_name="store", name="model_text"),
        migrations.RemoveField(model_name="store", name="no_match_reply"),
        migrations.RemoveField(model_name="store", name="opening_templates"),
        migrations.RemoveField(model_name="store", name="presence_penalty"),
        migrations.RemoveField(model_name="store", name="repetition_penalty"),
        migrations.RemoveField(model_name="store", name="retention_days"),
        migrations.RemoveField(model_name="store", name="support_hours"),
        migrations.RemoveField(model_name="store", name="temperature"),
        migrations.RemoveField(model_name="store", name="widget_allowed_origins"),
        migrations.RemoveField(model_name="store", name="widget_key"),
    ]
