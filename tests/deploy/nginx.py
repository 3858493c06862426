"""nginx for the multi-node tests (``tools.nginx``), as a service CI must have: missing, the test fails under CI
and is skipped with the reason elsewhere."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.conftest import service_unavailable
from tools import nginx


@contextmanager
def run_nginx(directory: Path, node_ports: list[int], down: int | None = None) -> Iterator[int]:
    if nginx.nginx_binary() is None:
        service_unavailable("nginx (Debian's package: apt-get install nginx)")
    with nginx.run_nginx(directory, node_ports, down=down) as port:
        yield port


class _SaysItsPort(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = str(self.server.server_port).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@contextmanager
def stub_nodes(count: int) -> Iterator[list[int]]:
    """``count`` HTTP servers on free ports that answer every GET with their own port: where nginx sent a request,
    without starting the app."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _SaysItsPort) for _ in range(count)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield [server.server_port for server in servers]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
