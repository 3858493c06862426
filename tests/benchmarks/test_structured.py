"""``python -m benchmarks.structured`` on a tiny run: its counts add up, and constrained output holds."""

from __future__ import annotations

import pytest

from benchmarks.structured import run_throughput, run_validity
from benchmarks.structured_schemas import SCHEMAS, validate


def test_validity_run_counts_every_sample_and_each_stopped_one_validates(llm) -> None:
    v = run_validity(llm, schemas=2, samples=2, max_tokens=64)
    assert list(v["per_schema"]) == [name for name, _, _ in SCHEMAS[:2]]
    t = v["total"]
    assert t["samples"] == 4 and t["stopped"] > 0
    # Every output the grammar ended validates (one cut by max_tokens parses only if cut right at its end).
    assert t["stopped_invalid"] == 0 and t["validated"] == t["parsed"] >= t["stopped"]
    assert v["output_tokens"] > 0 and v["output_tokens_per_s"] > 0
    assert llm.llm_engine.structured.num_live == 0


def test_throughput_pair_does_equal_work(llm) -> None:
    r = run_throughput(llm, requests=4, max_tokens=8)
    assert (r["50%"]["constrained"], r["0%"]["constrained"]) == (2, 0)
    assert r["50%"]["output_tokens"] == r["0%"]["output_tokens"] > 0
    assert r["ratio"] == pytest.approx(r["50%"]["output_tokens_per_s"] / r["0%"]["output_tokens_per_s"])


@pytest.mark.parametrize("value, errors", [
    ({"sku": "ABC-1234"}, 0), ({"sku": "abc-1234"}, 1), ({"sku": "ABC-1234", "x": 1}, 1), ({}, 1), ([], 1),
])
def test_the_validator_checks_what_the_schema_says(value, errors) -> None:
    schema = next(s for n, s, _ in SCHEMAS if n == "sku")
    assert len(validate(value, schema)) == errors


def test_the_peers_run_takes_the_same_arguments_but_its_own_engine_model_and_output() -> None:
    """vLLM's run is this module again: the same samples, schemas, seeds and lengths; its own engine, the folder our
    loader made of the model, the resolved dtype, and no JSON file of its own (its figures come back on stdout)."""
    from benchmarks.structured import _without, build_parser

    argv = ["--samples", "4", "--vllm-python=/x/python", "--mix", "8", "--out", "f.json", "--model", "m", "--seed", "3"]
    kept = _without(argv, "--vllm-python", "--out", "--model", "--dtype")
    assert kept == ["--samples", "4", "--mix", "8", "--seed", "3"]
    peer = build_parser().parse_args([*kept, "--engine", "vllm", "--model", "/cache/m", "--dtype", "bfloat16"])
    assert (peer.engine, peer.samples, peer.mix, peer.seed, peer.model, peer.vllm_python, peer.out) == (
        "vllm", 4, 8, 3, "/cache/m", None, None
    )
