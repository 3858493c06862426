"""``python -m shop_assistant.serve``: the web process (daphne: HTTP, the chat websocket, the engine in-process),
and the threads it runs besides (``shop_assistant.startup``, docs/runtime.md).

The one place daphne's flags live, so scripts/run.sh, the Dockerfile, docker-compose.yml and the tests cannot
drift apart. Address from ``-b/--bind`` and ``-p/--port`` (or ``HOST``/``PORT``; 127.0.0.1:8000); any other
argument goes to daphne as it is (``-v 2``), except daphne's ``--proxy-headers``: it would believe any peer's
X-Forwarded-For; behind a proxy, set ``TRUSTED_PROXIES`` instead (shop_assistant/runtime/proxy.py).
"""

from __future__ import annotations

import argparse
import os
import sys

from shop_assistant.environment import MissingSetting

APPLICATION = "shop_assistant.asgi:application"
# daphne closes a socket (1009) on a message or frame over 1 MiB by default, before the chat can answer it with
# `frame_too_large` (docs/chat-protocol.md); 4 MiB leaves room for any frame a client may reasonably send.
WEBSOCKET_MAX_BYTES = 4 * 1024 * 1024
# daphne's 5 s handshake timeout drops sockets when hundreds of shoppers connect at once.
WEBSOCKET_CONNECT_TIMEOUT = 30
# daphne's --proxy-headers takes the left-most X-Forwarded-For address from any peer: the client's own choice.
PROXY_HEADERS_REFUSED = (
    "--proxy-headers is not used: the client's address comes from X-Forwarded-For only when the peer is one of "
    "TRUSTED_PROXIES (default: 127.0.0.1 and ::1); set TRUSTED_PROXIES to your proxy's address or network instead."
)


def daphne_argv(host: str, port: int, extra: list[str] | None = None) -> list[str]:
    """daphne's command line (without the program name) for this app on ``host``:``port``."""
    return [
        "-b", host,
        "-p", str(port),
        "--websocket-max-message-size", str(WEBSOCKET_MAX_BYTES),
        "--websocket-max-frame-size", str(WEBSOCKET_MAX_BYTES),
        "--websocket_connect_timeout", str(WEBSOCKET_CONNECT_TIMEOUT),
        *(extra or []),
        APPLICATION,
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m shop_assistant.serve", description=__doc__.splitlines()[0])
    parser.add_argument("-b", "--bind", default=os.environ.get("HOST") or "127.0.0.1", help="address to listen on")
    parser.add_argument("-p", "--port", type=int, default=int(os.environ.get("PORT") or 8000))
    args, extra = parser.parse_known_args(argv)
    if any(arg.startswith("--proxy-headers") for arg in extra):
        sys.exit(PROXY_HEADERS_REFUSED)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_assistant.settings")
    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018 - loads the settings: a missing one is one line, not a traceback
    except MissingSetting as error:
        sys.exit(str(error))

    import django
    from daphne.cli import CommandLineInterface

    from shop_assistant.startup import start_web_process

    django.setup()
    start_web_process()  # the engine's loader, the node listener, the spool replayer (docs/runtime.md)
    CommandLineInterface().run(daphne_argv(args.bind, args.port, extra))


if __name__ == "__main__":
    main()
