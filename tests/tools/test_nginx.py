"""The shipped nginx config, with the tools' node addresses, is one nginx accepts (``nginx -t``) and routes to
exactly the nodes named."""

from __future__ import annotations

import subprocess

from tests.conftest import service_unavailable
from tools.nginx import nginx_binary, render_nginx_conf


def test_the_rendered_config_names_the_nodes_and_passes_nginx_t(tmp_path):
    conf = render_nginx_conf(tmp_path, 18080, [18001, 18002])
    nodes = (tmp_path / "nginx-nodes.conf").read_text().splitlines()
    assert [line.split()[1] for line in nodes] == ["127.0.0.1:18001", "127.0.0.1:18002"]
    assert "listen 127.0.0.1:18080;" in conf.read_text()
    nginx = nginx_binary()
    if nginx is None:
        service_unavailable("nginx (Debian's package: apt-get install nginx)")
    checked = subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-c", str(conf), "-g", f"pid {tmp_path / 'nginx.pid'};"],
        capture_output=True, text=True, timeout=30,
    )
    assert checked.returncode == 0, checked.stderr
