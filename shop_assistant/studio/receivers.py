"""A new store gets the default prompt, published, the moment it is created: however it is created (the admin,
``create_store``, the demo loader, a test, the shell), a store always has a published prompt, so the chat only ever
reads one (``services.published_prompt``). Stores made before this existed got theirs from migration 0003.
"""

from __future__ import annotations

from typing import Any

from catalog.models import Store

from .services import ensure_default_prompt


def give_new_store_the_default_prompt(sender: type[Store], instance: Store, created: bool, raw: bool, **_: Any) -> None:
    # raw: a fixture being loaded; its prompt versions, if any, come with it.
    if created and not raw:
        ensure_default_prompt(instance)
