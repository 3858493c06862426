"""What the web process starts besides daphne, in one place (docs/runtime.md draws it).

``python -m shop_assistant.serve`` calls ``start_web_process`` once, before daphne takes the process; nothing is
started by importing a module (the ASGI routing, a view), so a management command, the Celery worker or a test
that imports the app starts none of it.

- the engine's loader thread (``ENGINE_AUTOSTART``): the model loads while daphne starts accepting;
- the node listener thread (``NODE_LISTENER`` too): once the model is loaded, pre-warms the published prompts,
  then whatever a publish on any node announces (``runtime.nodes``, ``studio.prewarm``);
- the chat's spool replayer thread: messages spooled while the database was down are written once it is back.

All are daemon threads that end with the process; the listener is stopped first at exit, so the node leaves the
board at once instead of when its heartbeat ages.
"""

from __future__ import annotations

import atexit

from django.conf import settings


def start_web_process() -> None:
    """Start the web process's background threads (once; each start is idempotent)."""
    from shop_assistant.chat.log import spool
    from shop_assistant.runtime import engine_service, nodes
    from shop_assistant.studio import prewarm

    if settings.ENGINE_AUTOSTART:
        engine_service.start_in_background()
        if settings.NODE_LISTENER:
            prewarm.start_node()
            atexit.register(nodes.stop_listener)
    spool.start_replayer()
