"""Message.kind: what kind of answer an assistant message was. Answers logged before it are classified once, with
the rule analytics used until then (the English start of the built-in no-match reply, or the store's own no-match
reply word for word): those become "no_match", so the "Don't sell" list of past weeks stays as it was. Every other
old answer stays blank (its kind was never recorded, and guessing it from its words is what this field replaces)."""

import re

from django.db import migrations, models

# Frozen copies of what analytics read before (shop_assistant.studio.analytics.is_no_match_reply, as of 0010).
_BUILT_IN = re.compile(r"^Sorry, we don['’]t carry\b")
_FALLBACK = "Sorry, I couldn't find that in our catalog."


def classify_old_no_matches(apps, schema_editor):
    Message = apps.get_model("chat", "Message")
    Store = apps.get_model("catalog", "Store")
    own = {pk: reply.strip() for pk, reply in Store.objects.values_list("pk", "no_match_reply")}
    found = []
    rows = Message.objects.filter(role="assistant", finish_reason="fixed", kind="").values_list(
        "pk", "text", "conversation__store_id"
    )
    for pk, text, store_id in rows.iterator():
        text = text.strip()
        reply = own.get(store_id, "")
        if (text == reply) if reply else (bool(_BUILT_IN.match(text)) or text.startswith(_FALLBACK)):
            found.append(pk)
    for start in range(0, len(found), 500):
        Message.objects.filter(pk__in=found[start : start + 500]).update(kind="no_match")


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0002_store_settings'),
        ('chat', '0010_conversation_first_handoff_requested_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='message',
            name='kind',
            field=models.CharField(blank=True, db_index=True, max_length=20),
        ),
        migrations.RunPython(classify_old_no_matches, migrations.RunPython.noop),
    ]
