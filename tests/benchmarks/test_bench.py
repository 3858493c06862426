"""The benchmark (``python -m benchmarks``): workload generation, figures, and a ``--quick`` run's JSON.

The quick run checks shape and sanity: properties that follow from the design (paged wastes less KV than
contiguous, contiguous can never hold more sequences than its reservations allow, prefix caching hits the
shared system prompt, every system did the same work), never speeds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import workload as wl
from benchmarks.driver import RequestRecord, SessionDriver
from benchmarks.metrics import SYSTEM_KEYS, KVSample, KVTrace, summarize
from benchmarks.systems import SYSTEMS
from inference.worker.attention import cpu_kernels

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_kv_trace_weights_samples_by_step_time() -> None:
    trace = KVTrace()
    trace.add(KVSample(t=1, dt=1.0, slots_allocated=100, tokens_stored=50, usage=0.5, running=2, waiting=0))
    trace.add(KVSample(t=4, dt=3.0, slots_allocated=100, tokens_stored=100, usage=0.5, running=5, waiting=1))
    assert trace.waste_frac == pytest.approx(50 / 400)
    assert trace.max_running == 5
    assert KVTrace().waste_frac is None


def test_next_prompt_drops_the_answer_eos_once() -> None:
    turn = wl.WorkloadTurn([2, 7, 8], 5)
    assert wl.next_prompt([1, 1], [5, 6, 2], turn, [2]) == [1, 1, 5, 6, 2, 7, 8]
    assert wl.next_prompt([1, 1], [5, 6], turn, [2]) == [1, 1, 5, 6, 2, 7, 8]


def test_driver_issues_a_turn_when_the_previous_one_finishes() -> None:
    clock = iter(float(t) for t in range(100))
    session = wl.Session("c", "support", 0.0, [wl.WorkloadTurn([1, 2], 3), wl.WorkloadTurn([9], 3)])
    driver = SessionDriver(wl.Workload("w", 0, None, False, [session], [2]), clock=lambda: next(clock))
    driver.start()
    (first,) = driver.due(0.0)
    assert driver.due(100.0) == []  # turn 1 waits for turn 0
    driver.first_token(first.request_id, 1.0)
    driver.finish(first.request_id, [5, 6, 2], "stop", now=3.0)
    (second,) = driver.due(3.0)
    assert second.prompt_token_ids == [1, 2, 5, 6, 9] and second.arrival == 3.0
    driver.finish(second.request_id, [4], "length", cached_tokens=4, now=5.0)
    assert driver.done
    summary = summarize(driver.records, driver.wall_s)
    assert summary["prefix_hit_rate"] == pytest.approx(4 / 7)
    assert summary["ttft_p50_s"] is not None and summary["finish_reasons"] == {"stop": 1, "length": 1}


def test_record_ttft_and_tpot() -> None:
    r = RequestRecord("a", "short", 0, 10, 5, 0, arrival_s=1.0, first_token_s=1.5, finish_s=2.5, finish_reason="length")
    assert r.ttft == pytest.approx(0.5) and r.tpot == pytest.approx(0.25)


def test_generated_workload_is_deterministic_and_shaped(tokenizer, tmp_path: Path) -> None:
    a = wl.generate("ecommerce", tokenizer, 40, seed=3, rate=2.0, eos_token_ids=[2])
    b = wl.generate("ecommerce", tokenizer, 40, seed=3, rate=2.0, eos_token_ids=[2])
    c = wl.generate("ecommerce", tokenizer, 40, seed=4, rate=2.0, eos_token_ids=[2])
    assert a.to_json() == b.to_json() and a.to_json() != c.to_json()
    assert 300 <= a.info["system_prompt_tokens"] <= 500
    shorts = [s for s in a.sessions if s.kind == "short"]
    supports = [s for s in a.sessions if s.kind == "support"]
    assert len(shorts) == 28 and len(supports) == 12
    assert all(len(s.turns) == 1 and 50 <= s.turns[0].max_tokens <= 100 for s in shorts)
    assert all(len(s.turns) >= 3 and 500 <= s.num_output_tokens <= 1000 for s in supports)
    arrivals = [s.arrival_s for s in a.sessions]
    assert arrivals == sorted(arrivals) and arrivals[0] > 0  # Poisson
    # Every session starts with the same system prompt, so a prefix cache can share it.
    system = a.info["system_prompt_tokens"] - 8
    assert len({tuple(s.turns[0].token_ids[:system]) for s in a.sessions}) == 1
    # The file round trip keeps every token.
    a.save(tmp_path / "w.json")
    assert wl.load(tmp_path / "w.json").to_json() == a.to_json()
    single = wl.generate("single", tokenizer, 1)
    assert 250 <= len(single.sessions[0].turns[0].token_ids) <= 350 and single.sessions[0].turns[0].max_tokens == 128


def test_a_model_without_a_gguf_file_skips_llama_cpp(tmp_path: Path) -> None:
    """``--model`` takes what ENGINE_MODEL takes; llama.cpp runs GGUF files only, so a Hugging Face folder skips it
    with that reason (the packaged 1.5B and the bundled model have theirs, ``loader.source_gguf``)."""
    from benchmarks.__main__ import _skip_reason, build_parser
    from inference.worker.loader import source_gguf

    args = build_parser().parse_args(["--model", str(tmp_path), "--llama-cpp-python", sys.executable])
    args.gguf = source_gguf(args.model)
    assert args.gguf is None
    assert "no GGUF file" in _skip_reason("llama-cpp", args, ["llama-cpp"])
    assert source_gguf("smollm2-135m").suffix == ".gguf"


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.untimed
@pytest.mark.backend_agnostic
def test_quick_run_writes_sane_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "benchmarks", "--quick", "--ignore-eos", "--out", str(out),
           "--vllm-python", "/nonexistent/python", "--llama-cpp-python", "/nonexistent/python"]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert out.with_suffix(".png").stat().st_size > 10_000

    assert set(doc) >= {"model", "workload", "machine", "systems", "ratios", "targets"}
    assert doc["model"]["name"] == "smollm2-135m" and doc["model"]["gguf"].endswith(".gguf")
    assert set(doc["systems"]) == set(SYSTEMS)
    assert {"paged_vs_hf_static_throughput", "paged_vs_contiguous_concurrency", "paged_vs_vllm_throughput"} <= set(
        doc["ratios"])
    assert doc["machine"]["matmul_gflops"] > 0 and len(doc["machine"]["loadavg_start"]) == 3
    # --dtype auto: the engine's choice on this CPU
    assert doc["config"]["dtype"] == ("bfloat16" if cpu_kernels.cpu_has_bf16_instructions() else "float32")
    for peer in ("vllm", "llama-cpp"):
        assert doc["systems"][peer]["skipped"].startswith("not installed")
        assert doc["ratios"]["paged_vs_vllm_throughput"] is None
    for name in SYSTEMS:
        assert name in proc.stdout  # the table lists every system, measured or skipped

    measured = {n: doc["systems"][n] for n in ("paged", "paged-no-prefix", "contiguous", "hf-static")}
    expected_tokens = doc["workload"]["max_output_tokens"]
    for name, s in measured.items():
        assert s["skipped"] is None, name
        assert set(SYSTEM_KEYS) <= set(s)
        assert s["output_tokens_per_s"] > 0 and s["requests_per_s"] > 0
        assert s["num_requests"] == doc["workload"]["num_requests"]
        # ignore_eos: every system generated exactly the workload's tokens, so they all did the same work.
        assert s["output_tokens"] == expected_tokens and s["finish_reasons"] == {"length": s["num_requests"]}
        assert 0 < s["ttft_p50_s"] <= s["ttft_p99_s"] and s["tpot_p50_s"] > 0
        assert 0.0 <= s["kv_waste_frac"] <= 1.0 and 0.0 <= s["prefix_hit_rate"] <= 1.0
        assert s["max_concurrent_seqs"] >= 1 and s["peak_rss_mb"] > 100

    paged, contiguous = measured["paged"], measured["contiguous"]
    assert paged["kv_waste_frac"] < contiguous["kv_waste_frac"]
    blocks_per_reservation = -(-doc["config"]["max_model_len"] // doc["config"]["block_size"])
    assert contiguous["max_concurrent_seqs"] <= doc["config"]["kv_blocks"] // blocks_per_reservation
    assert paged["max_concurrent_seqs"] > contiguous["max_concurrent_seqs"]
    # The shared system prompt is most of every prompt, so prefix caching serves most prompt tokens; the
    # systems without it never hit.
    assert paged["prefix_hit_rate"] > 0.5
    for name in ("paged-no-prefix", "contiguous", "hf-static"):
        assert measured[name]["prefix_hit_rate"] == 0.0, name
    # The roofline is the machine's matmul rate in the dtype the engine ran in (bf16 beats fp32 by 3-8x where
    # the CPU has bf16 instructions: against fp32's rate a bf16 run could pass 100%).
    assert doc["machine"]["matmul_dtype"] == doc["config"]["dtype"]
    assert 0 < paged["roofline_frac"] < 1
    for t in doc["targets"]:
        assert t["holds"] in (True, False, None) and t["detail"]


def test_parallel_sampling_run_shares_the_prompt(llm) -> None:
    """The --parallel-sampling figures on two short prompts: n=3 computes each prompt once and holds it once."""
    from benchmarks.parallel_sampling import run_once

    engine = llm.llm_engine
    bs = engine.config.block_size
    prompts = [list(range(9000, 9000 + 4 * bs + 3)), list(range(9500, 9500 + 4 * bs + 7))]
    workload = wl.Workload("w", 0, None, True, [wl.Session(f"s{i}", "short", 0.0, [wl.WorkloadTurn(p, 6)])
                                                for i, p in enumerate(prompts)])
    engine.reset(enable_prefix_caching=False)
    try:
        one = run_once(engine, workload, 1)
        engine.reset(enable_prefix_caching=False)
        three = run_once(engine, workload, 3)
    finally:
        engine.reset(enable_prefix_caching=True)
    prompt_tokens = sum(len(p) for p in prompts)
    assert (one["requests"], three["requests"], three["sequences"]) == (2, 2, 6)
    assert (one["output_tokens"], three["output_tokens"]) == (12, 36)
    # Prompts computed once either way; then one decode token per sampled token after the first.
    assert one["computed_tokens"] == prompt_tokens + 2 * 5 and three["computed_tokens"] == prompt_tokens + 6 * 5
    # Peak: 2 x 5 prompt blocks held once, plus a copied tail (6 tokens fill it: no new block) per extra
    # candidate; three separate requests would hold 3 x 10.
    assert one["peak_kv_blocks"] == 10 and three["peak_kv_blocks"] == 10 + 2 * 2
    assert three["time_per_request_s"] > 0 and three["output_tokens_per_s"] > 0


def test_quantization_agreement_counts_tokens_up_to_the_first_difference_and_identical_outputs() -> None:
    from benchmarks.quantization import agreement

    reference = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 9]]
    other = [[1, 2, 0, 4], [5, 6, 7, 8], [9, 1]]
    a = agreement(reference, other)
    assert a == {"tokens_before_divergence": (2 + 4 + 1) / 10, "identical_outputs": 1, "outputs": 3}
