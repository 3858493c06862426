"""A new store gets the default prompt, published, the moment it is created: however it is created (the admin,
``create_store``, the demo loader, a test, the shell), a store always has a published prompt, so the chat only ever
reads one (``services.published_prompt``). Stores made before this existed got theirs from migration 0003.

A store document's text written outside the studio (a catalog import, the admin, the shell) is recorded as a
published version when it is saved, so the knowledge pages only read. Documents made before versions got their
v1 from catalog's migration 0005.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from catalog.models import Store, StoreDocument

from .services import ensure_default_prompt


def give_new_store_the_default_prompt(sender: type[Store], instance: Store, created: bool, raw: bool, **_: Any) -> None:
    # raw: a fixture being loaded; its prompt versions, if any, come with it.
    if created and not raw:
        ensure_default_prompt(instance)


def record_a_document_written_outside_the_studio(
    sender: type[StoreDocument], instance: StoreDocument, update_fields: frozenset[str] | None = None,
    using: str = "default", **_: Any,
) -> None:
    if update_fields is not None and not {"title", "body"} & update_fields:
        return  # not its text (the owner's questions, say)
    # After the commit: the studio's own publish writes the text and its version in one transaction, so by then
    # they are in step and nothing is recorded; an import's is recorded once its transaction has committed (and
    # not at all if it rolls back). Robust: a failed record must not fail the import that has committed; the
    # document page shows the text as not recorded, and the studio's next write records it.
    from .documents import record_outside_change  # here: documents imports the catalog's tasks and passages

    document = StoreDocument(pk=instance.pk, store_id=instance.store_id)
    transaction.on_commit(lambda: record_outside_change(document), using=using, robust=True)
