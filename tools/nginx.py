"""Debian's nginx with the repository's config (deploy/nginx.conf, deploy/nginx-nodes.conf) in front of nodes on
this machine, on free ports: the load balancer of the multi-node tests and of ``tools.nodes_throughput``, run as
production runs it, with only the addresses changed."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def nginx_binary() -> str | None:
    return shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def render_nginx_conf(directory: Path, listen_port: int, node_ports: list[int], down: int | None = None) -> Path:
    """deploy/nginx.conf as shipped, listening on ``listen_port``, with nginx-nodes.conf naming these nodes; the
    node on port ``down`` marked ``down``, as the runbook drains one."""
    conf = (REPO_ROOT / "deploy" / "nginx.conf").read_text()
    if conf.count("listen 80;") != 1:
        raise ValueError("deploy/nginx.conf must listen once, on port 80")
    (directory / "nginx.conf").write_text(conf.replace("listen 80;", f"listen 127.0.0.1:{listen_port};"))
    nodes = (REPO_ROOT / "deploy" / "nginx-nodes.conf").read_text().splitlines()
    template = next(line for line in nodes if line.startswith("server web1:8000"))
    lines = [template.replace("web1:8000", f"127.0.0.1:{port}") for port in node_ports]
    lines = [line.replace(";", " down;") if port == down else line for line, port in zip(lines, node_ports)]
    (directory / "nginx-nodes.conf").write_text("\n".join(lines) + "\n")
    return directory / "nginx.conf"


@contextlib.contextmanager
def run_nginx(
    directory: Path, node_ports: list[int], timeout: float = 20.0, down: int | None = None
) -> Iterator[int]:
    """nginx in the foreground in front of ``node_ports`` (``down``: one marked down); yields the port it listens
    on, stops it on exit."""
    nginx = nginx_binary()
    if nginx is None:
        raise RuntimeError("nginx is not installed (Debian's package: apt-get install nginx)")
    port = free_port()
    conf = render_nginx_conf(directory, port, node_ports, down)
    log = directory / "nginx.log"
    process = subprocess.Popen(
        [nginx, "-p", str(directory), "-c", str(conf), "-g", f"daemon off; pid {directory / 'nginx.pid'};"],
        stdout=log.open("w"), stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"nginx exited:\n{log.read_text()}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"nginx did not listen in {timeout} s:\n{log.read_text()}")
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
