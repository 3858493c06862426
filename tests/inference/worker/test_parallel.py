"""Tensor parallelism (worker/parallel.py): the split layers against the whole ones on two gloo ranks, greedy
TP=2 against TP=1 through the engine, config errors, a dead worker and a clean shutdown."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from inference import LLM, SamplingParams
from inference.core.config import EngineConfig
from inference.worker.loader import ModelConfig, load_tokenizer, load_weights
from inference.worker.parallel import (
    TensorParallel,
    TensorParallelError,
    check_shapes,
    init_group,
    kv_head_start,
    shard_weights,
    vocab_shard,
)

# Split KV heads with biases everywhere (the row-parallel o_proj bias is rank 0's alone); one KV head
# replicated on both ranks with a vocabulary that leaves padding rows on rank 1, untied and tied.
CASES = {
    "llama-split-kv-bias": ("llama", dict(attention_bias=True)),
    "qwen2-replicated-kv-padded-vocab": ("qwen2", dict(num_key_value_heads=1, vocab_size=100)),
    "llama-tied-replicated-kv": ("llama", dict(num_key_value_heads=1, tie_word_embeddings=True)),
}


def _model_config(heads: int, kv: int, inter: int = 1536) -> ModelConfig:
    return ModelConfig("LlamaForCausalLM", 49152, 576, inter, 30, heads, kv, 64, 1e-5, 1e4, None, 2048, True,
                       False, False)  # fmt: skip


def test_shapes_that_do_not_split_are_a_config_error_naming_the_sizes_that_do() -> None:
    smollm2 = _model_config(heads=9, kv=3)
    with pytest.raises(ValueError, match=r"tensor_parallel_size=2 .*num_attention_heads=9 .*work for this model: 1, 3"):
        check_shapes(smollm2, 2)
    check_shapes(smollm2, 3)  # 3 query heads and 1 KV head per rank
    with pytest.raises(ValueError, match="num_key_value_heads=4 neither divides"):
        check_shapes(_model_config(heads=12, kv=4), 6)  # 4 KV heads over 6 ranks: neither split nor replicated
    with pytest.raises(ValueError, match="intermediate_size=100"):
        check_shapes(_model_config(heads=8, kv=8, inter=100), 8)


def test_the_bundled_model_refuses_two_ranks_before_starting_a_process(model_path: Path) -> None:
    from inference.worker.model_runner import ModelRunner

    with pytest.raises(ValueError, match="num_attention_heads=9 is not divisible"):
        ModelRunner(EngineConfig(model=str(model_path), tensor_parallel_size=2))
    assert multiprocessing.active_children() == []


def test_kv_heads_split_or_replicate_and_vocabulary_slices_pad() -> None:
    assert [kv_head_start(r, 4, 2) for r in range(2)] == [0, 2]  # two heads each
    assert [kv_head_start(r, 2, 4) for r in range(4)] == [0, 0, 1, 1]  # each head on two ranks
    assert [kv_head_start(r, 1, 2) for r in range(2)] == [0, 0]
    assert [vocab_shard(100, r, 2) for r in range(2)] == [(0, 64, 64), (64, 100, 64)]
    assert vocab_shard(100, 0, 1) == (0, 100, 100)
    with pytest.raises(ValueError, match="tensor_parallel_size must be positive"):
        EngineConfig(tensor_parallel_size=0)


def _compare_layers(rank: int, size: int, init_method: str, folders: list[str]) -> None:
    """One rank: this rank's share of each layer, summed or gathered over gloo, against the whole layer."""
    tp = init_group(rank, size, init_method, torch.device("cpu"))
    for folder in folders:
        _compare_model_layers(tp, rank, size, folder)  # a failure raises: spawn reports its traceback
    torch.distributed.barrier()  # neither rank leaves while the other still talks to it
    torch.distributed.destroy_process_group()
    # Out without the interpreter's teardown, as serve_rank leaves: with gloo's threads about, it once
    # aborted on CI ("terminate called without an active exception") after every check had passed.
    os._exit(0)


def _compare_model_layers(tp: TensorParallel, rank: int, size: int, folder: str) -> None:
    from inference.worker.attention import get_attention_backend
    from inference.worker.models.llama import build_model

    mc, weights = load_weights(folder, torch.float32)
    backend = get_attention_backend("torch", torch.device("cpu"))
    whole = build_model(mc, weights, backend, 64, torch.float32, "cpu")
    part = build_model(mc, shard_weights(weights, mc, rank, size), backend, 64, torch.float32, "cpu", tp)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(7, mc.hidden_size, generator=gen)  # the same on every rank
    close = dict(rtol=1e-5, atol=1e-5)
    with torch.inference_mode():
        # Column-parallel gate/up then row-parallel down with its all-reduce.
        torch.testing.assert_close(part.layers[0].mlp(x), whole.layers[0].mlp(x), **close)
        # Column-parallel q/k/v: this rank's query heads and its (possibly replicated) KV heads.
        attn, ref = part.layers[1].self_attn, whole.layers[1].self_attn
        hd, kv_total = mc.head_dim, mc.num_key_value_heads
        q, k, v = attn.qkv_proj(x).split([attn.q_size, attn.kv_size, attn.kv_size], dim=1)
        q_ref, k_ref, v_ref = ref.qkv_proj(x).split([ref.q_size, ref.kv_size, ref.kv_size], dim=1)
        kv0 = kv_head_start(rank, kv_total, size) * hd
        torch.testing.assert_close(q, q_ref[:, rank * attn.q_size : (rank + 1) * attn.q_size], **close)
        torch.testing.assert_close(k, k_ref[:, kv0 : kv0 + attn.kv_size], **close)
        torch.testing.assert_close(v, v_ref[:, kv0 : kv0 + attn.kv_size], **close)
        # Row-parallel o_proj: each rank's input columns, the sum over ranks (the bias once).
        heads_out = torch.randn(7, ref.q_size, generator=gen)
        mine = heads_out[:, rank * attn.q_size : (rank + 1) * attn.q_size]
        torch.testing.assert_close(tp.all_reduce(attn.o_proj(mine)), ref.o_proj(heads_out), **close)
        # Vocabulary-parallel embedding: exact (one real row plus zeros).
        ids = torch.arange(mc.vocab_size).flip(0)
        assert torch.equal(part.embed_tokens(ids), whole.embed_tokens(ids))
        # The LM head's columns gathered on rank 0 only, cut to the vocabulary.
        logits = part.compute_logits(x[:3])
        if rank == 0:
            assert logits is not None and logits.shape == (3, mc.vocab_size)
            torch.testing.assert_close(logits, whole.compute_logits(x[:3]), **close)
        else:
            assert logits is None


def test_split_layers_on_two_gloo_ranks_match_the_whole_layers(tmp_path: Path, make_tiny_checkpoint) -> None:
    folders = [str(make_tiny_checkpoint(tmp_path / case, arch, **kw)) for case, (arch, kw) in CASES.items()]
    mp.spawn(_compare_layers, args=(2, f"file://{tmp_path}/rendezvous", folders), nprocs=2, join=True)


def _greedy(llm: LLM, prompts: list[list[int]]) -> list[tuple[list[int], list[float], int]]:
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True, logprobs=0)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params)
    return [(o.outputs[0].token_ids, o.outputs[0].logprobs, o.num_cached_tokens) for o in outs]


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_greedy_output_with_two_ranks_equals_one_rank(case: str, tmp_path: Path, make_tiny_checkpoint,
                                                      model_path: Path) -> None:  # fmt: skip
    """TP=2 on CPU (gloo, two processes) against TP=1, fp32, prefix caching on: the same tokens, logprobs
    within the all-reduce's change of summation order; the second round of prompts hits the prefix cache."""
    arch, overrides = CASES[case]
    folder = make_tiny_checkpoint(tmp_path / case, arch, **overrides)
    load_tokenizer(model_path).save_pretrained(folder)  # the engine needs one; the tiny vocabulary is a prefix
    vocab = overrides.get("vocab_size", 96)
    prompts = [[(7 * i + 3 * j + 1) % vocab for j in range(5 + 9 * i)] for i in range(4)]
    options = dict(dtype="float32", num_gpu_blocks_override=64, block_size=4, max_model_len=128,
                   enable_prefix_caching=True)  # fmt: skip
    results = {}
    for size in (1, 2):
        llm = LLM(str(folder), tensor_parallel_size=size, **options)
        try:
            results[size] = _greedy(llm, prompts) + _greedy(llm, prompts)
        finally:
            llm.close()
    assert [r[0] for r in results[2]] == [r[0] for r in results[1]]
    assert [r[2] for r in results[2]] == [r[2] for r in results[1]]
    assert sum(r[2] for r in results[2]) > 0  # the second round was served from the prefix cache
    for (_, lp1, _), (_, lp2, _) in zip(results[1], results[2]):
        torch.testing.assert_close(torch.tensor(lp2), torch.tensor(lp1), rtol=0, atol=1e-4)


@pytest.mark.slow
def test_a_dead_worker_is_a_clear_error_and_close_stops_the_workers(tmp_path: Path, make_tiny_checkpoint,
                                                                    model_path: Path) -> None:  # fmt: skip
    folder = make_tiny_checkpoint(tmp_path / "tiny", "llama")
    load_tokenizer(model_path).save_pretrained(folder)
    prompt = [{"prompt_token_ids": [5, 6, 7, 8, 9]}]
    params = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    llm = LLM(str(folder), dtype="float32", tensor_parallel_size=2, num_gpu_blocks_override=32, block_size=4,
              max_model_len=64)  # fmt: skip
    workers = llm.llm_engine.runner.workers
    assert workers is not None and len(workers.procs) == 1
    worker = workers.procs[0]
    try:
        assert len(llm.generate(prompt, params)[0].outputs[0].token_ids) == 4
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(10)
        with pytest.raises(TensorParallelError, match=r"rank 1: exited with code -9"):
            llm.generate(prompt, params)
        with pytest.raises(TensorParallelError, match="rank 1"):  # and every later step, not a hang
            llm.llm_engine.step()
    finally:
        llm.close()
    assert not torch.distributed.is_initialized()

    llm = LLM(str(folder), dtype="float32", tensor_parallel_size=2, num_gpu_blocks_override=32, block_size=4,
              max_model_len=64)  # fmt: skip
    worker = llm.llm_engine.runner.workers.procs[0]
    llm.generate(prompt, params)
    llm.close()
    assert worker.exitcode == 0  # stopped by its command, not terminated
    assert not torch.distributed.is_initialized() and multiprocessing.active_children() == []


def test_a_single_rank_group_is_the_identity() -> None:
    tp = TensorParallel()
    x = torch.randn(3, 5)
    assert tp.all_reduce(x) is x and torch.equal(tp.gather_columns(x, 4), x[:, :4])
    assert tp.all_min(7, torch.device("cpu")) == 7
