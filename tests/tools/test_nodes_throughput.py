"""The throughput tool's choice of stores: where the shipped nginx config sends each store (asked of nginx, not
computed beside it), and as many stores on each node, so the two-node figure does not depend on the hash's luck
with a handful of stores."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from urllib.request import urlopen

import pytest

from tests.conftest import service_unavailable
from tools import nginx
from tools.nodes_throughput import balanced, placement


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
def stub_nodes(count: int) -> Iterator[list[ThreadingHTTPServer]]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _SaysItsPort) for _ in range(count)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield servers
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_placement_is_where_nginx_sends_each_store_and_balanced_keeps_as_many_per_node(tmp_path):
    if nginx.nginx_binary() is None:
        service_unavailable("nginx (Debian's package: apt-get install nginx)")
    slugs = [f"store-{i}" for i in range(24)]
    with stub_nodes(2) as servers, nginx.run_nginx(tmp_path, [s.server_port for s in servers]) as front:
        nodes = [SimpleNamespace(name=f"node-{s.server_port}", port=s.server_port) for s in servers]
        placed = placement(front, slugs, nodes)
        for name, on_node in placed.items():
            for slug in on_node:
                with urlopen(f"http://127.0.0.1:{front}/?store={slug}", timeout=10) as response:
                    assert f"node-{response.read().decode()}" == name
    assert sorted(s for on_node in placed.values() for s in on_node) == sorted(slugs)
    share = min(len(on_node) for on_node in placed.values())
    chosen = balanced(placed, 2 * share)
    assert len(chosen) == len(set(chosen)) == 2 * share
    assert all(len(set(chosen) & set(on_node)) == share for on_node in placed.values())


def test_balanced_refuses_when_a_node_has_too_few_stores():
    assert balanced({"a": ["s1", "s2", "s3"], "b": ["s4", "s5"]}, 4) == ["s1", "s2", "s4", "s5"]
    with pytest.raises(SystemExit, match="too few"):
        balanced({"a": ["s1", "s2", "s3"], "b": ["s4"]}, 4)
