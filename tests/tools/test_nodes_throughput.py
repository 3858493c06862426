"""The throughput tool's choice of stores: where the shipped nginx config sends each store (asked of nginx, not
computed beside it), and as many stores on each node, so the two-node figure does not depend on the hash's luck
with a handful of stores."""

from __future__ import annotations

from types import SimpleNamespace
from urllib.request import urlopen

import pytest

from tests.deploy.nginx import run_nginx, stub_nodes
from tools.nodes_throughput import balanced, placement


def test_placement_is_where_nginx_sends_each_store_and_balanced_keeps_as_many_per_node(tmp_path):
    slugs = [f"store-{i}" for i in range(24)]
    with stub_nodes(2) as ports, run_nginx(tmp_path, ports) as front:
        nodes = [SimpleNamespace(name=f"node-{port}", port=port) for port in ports]
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
