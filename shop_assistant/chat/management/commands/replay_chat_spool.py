"""``manage.py replay_chat_spool``: write the chat messages spooled while the database was down."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from shop_assistant.chat.log import spool


class Command(BaseCommand):
    help = "Write spooled chat messages (settings.CHAT_SPOOL_DIR) to the database; the rest stay spooled."

    def handle(self, *args: Any, **options: Any) -> None:
        written = spool.replay()
        self.stdout.write(f"written {written}, still spooled {spool.depth()}")
