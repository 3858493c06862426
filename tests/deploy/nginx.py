"""nginx for the multi-node tests (``tools.nginx``), as a service CI must have: missing, the test fails under CI
and is skipped with the reason elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import service_unavailable
from tools import nginx


@contextmanager
def run_nginx(directory: Path, node_ports: list[int]) -> Iterator[int]:
    if nginx.nginx_binary() is None:
        service_unavailable("nginx (Debian's package: apt-get install nginx)")
    with nginx.run_nginx(directory, node_ports) as port:
        yield port
