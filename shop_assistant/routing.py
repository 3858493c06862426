"""Websocket routes of the site: the shopper's chat and the staff console, each behind its own Origin check
(see ``shop_assistant.runtime.origins``: a store's widget origins open the chat, never the console).

Only routes: what the web process starts besides (the engine's loader, the node listener, the spool replayer)
is started by ``shop_assistant.startup``, which ``shop_assistant.serve`` calls; importing this starts nothing.
"""

from __future__ import annotations

from channels.routing import URLRouter

from shop_assistant.chat.routing import websocket_urlpatterns as chat_urlpatterns
from shop_assistant.console.routing import websocket_urlpatterns as console_urlpatterns

# Each route checks its Origin before anything else; only the console reads the session (chat/console routing).
websocket_application = URLRouter(chat_urlpatterns + console_urlpatterns)
