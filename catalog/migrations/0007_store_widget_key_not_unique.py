"""The store's widget key stops being unique here, for one step: it moves to chat.WidgetSettings (chat 0012), which
copies it, and catalog 0008 removes it. Undone the other way round, 0008 adds the column back with one default for
every row, chat 0012 copies each store's own key back, and only then is it unique again."""

import secrets

from django.db import migrations, models


def new_widget_key():
    return f"pk_{secrets.token_urlsafe(18)}"  # frozen copy of chat.models.new_widget_key


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0007_search_synonyms"),  # after the synonyms, merged from another branch the same day
    ]

    operations = [
        migrations.AlterField(
            model_name="store",
            name="widget_key",
            field=models.CharField(default=new_widget_key, editable=False, max_length=64),
        ),
    ]
