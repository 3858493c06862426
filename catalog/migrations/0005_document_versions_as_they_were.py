"""Every store document made before versions gets its text as a published v1 ("as it was"), and one whose text an
import or the admin changed since its published version gets that text as a new published version: from here on
such changes are recorded when they are saved (the studio's receivers), so the studio's pages only read.

Self-contained (the historical models, not the studio's code), as a migration must be."""

from django.db import migrations
from django.utils import timezone


def record_texts(apps, schema_editor) -> None:
    StoreDocument = apps.get_model("catalog", "StoreDocument")
    DocumentVersion = apps.get_model("catalog", "DocumentVersion")
    db = schema_editor.connection.alias
    now = timezone.now()
    for document in StoreDocument.objects.using(db).order_by("pk").iterator():
        versions = DocumentVersion.objects.using(db).filter(document_id=document.pk)
        published = versions.filter(status="published").first()
        if published is None and not document.body.strip():
            continue  # an empty document quotes nothing: nothing to record (a studio draft, say)
        if published is not None and (published.title, published.body) == (document.title, document.body):
            continue
        if published is not None:
            versions.filter(pk=published.pk).update(status="archived")
        latest = versions.order_by("-version").values_list("version", flat=True).first() or 0
        DocumentVersion.objects.using(db).create(
            document_id=document.pk, version=latest + 1, title=document.title, body=document.body,
            status="published", published_at=now,
            note="as it was" if latest == 0 else "changed outside the studio (import or admin)",
        )


class Migration(migrations.Migration):
    dependencies = [("catalog", "0004_studio_sources_and_document_versions")]

    operations = [migrations.RunPython(record_texts, migrations.RunPython.noop)]
