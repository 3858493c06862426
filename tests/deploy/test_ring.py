"""The shipped nginx config's ring (deploy/nginx.conf, consistent hashing on the store): a node that leaves, drained
(marked ``down``) or removed, moves only its own stores to the others, and they come back when it returns. Three
stand-in nodes that answer with their port, so nothing here needs the app."""

from __future__ import annotations

from pathlib import Path
from urllib.request import urlopen

from tests.deploy.nginx import run_nginx, stub_nodes

STORES = [f"store-{i}" for i in range(90)]


def placement(directory: Path, ports: list[int], down: int | None = None) -> dict[str, int]:
    """Where nginx sends each store's page, with the node on ``down`` marked down (the runbook's drain)."""
    directory.mkdir()
    with run_nginx(directory, ports, down=down) as front:
        return {slug: int(urlopen(f"http://127.0.0.1:{front}/?store={slug}", timeout=10).read()) for slug in STORES}


def test_a_node_that_leaves_moves_only_its_stores_and_gets_them_back(tmp_path):
    with stub_nodes(3) as ports:
        before = placement(tmp_path / "three", ports)
        leaving = ports[2]
        drained = placement(tmp_path / "drained", ports, down=leaving)
        removed = placement(tmp_path / "removed", ports[:2])
        back = placement(tmp_path / "back", ports)

    assert set(before.values()) == set(ports)  # every node has stores
    stayed = {slug for slug, port in before.items() if port != leaving}
    for after in (drained, removed):
        assert leaving not in after.values()
        assert {slug: after[slug] for slug in stayed} == {slug: before[slug] for slug in stayed}
    assert drained == removed  # draining is leaving: the same stores go to the same nodes
    assert back == before
