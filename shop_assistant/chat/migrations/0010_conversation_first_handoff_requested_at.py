from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("chat", "0009_message_client_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="first_handoff_requested_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
