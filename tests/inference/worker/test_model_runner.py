"""ModelRunner: the step tensors it builds, which rows sample, KV-cache sizing and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from inference.core.config import EngineConfig
from inference.worker.loader import UnsupportedModelError
from inference.core.scheduler import ScheduledSeq, SchedulerOutput
from inference.core.sequence import Sequence
from inference.worker.cuda_graphs import cuda_graph_batch_sizes
from inference.worker.kv_cache import KVCacheTooSmallError, kv_cache_bytes_per_block
from inference.worker.model_runner import ModelRunner, resolve_dtype


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> Path:
    from tests.inference.conftest import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "llama", "llama")


def make_runner(path: Path, **overrides) -> ModelRunner:
    options = dict(model=str(path), dtype="float32", block_size=4, num_gpu_blocks_override=32, max_model_len=64)
    return ModelRunner(EngineConfig(**{**options, **overrides}))


def seq_with(request_id: str, tokens: list[int], computed: int, table: list[int]) -> Sequence:
    seq = Sequence(request_id, tokens)
    seq.num_computed_tokens = computed
    seq.block_table = table
    return seq


def test_prepare_inputs_builds_the_flat_step(tiny_path: Path) -> None:
    runner = make_runner(tiny_path)
    a = seq_with("a", list(range(10, 21)), computed=3, table=[9, 2, 30])  # chunk 3..9 crosses two block edges
    b = seq_with("b", list(range(40, 46)), computed=5, table=[7, 1, 5])  # decode at position 5, table longer
    c = seq_with("c", list(range(60, 63)), computed=0, table=[4])  # whole prompt
    scheduled = [ScheduledSeq(b, 1), ScheduledSeq(a, 6), ScheduledSeq(c, 3)]
    inputs = runner.prepare_inputs(scheduled)

    assert inputs.input_ids.tolist() == [45] + list(range(13, 19)) + [60, 61, 62]
    assert inputs.positions.tolist() == [5, 3, 4, 5, 6, 7, 8, 0, 1, 2]
    new_positions = ((b, [5]), (a, range(3, 9)), (c, range(3)))
    expected_slots = [s.block_table[p // 4] * 4 + p % 4 for s, positions in new_positions for p in positions]
    assert inputs.meta.slot_mapping.tolist() == expected_slots
    assert inputs.meta.query_start_loc.tolist() == [0, 1, 7, 10]
    assert inputs.meta.context_lens.tolist() == [6, 9, 3]
    assert inputs.meta.block_tables.tolist() == [[7, 1, 5], [9, 2, 30], [4, 0, 0]]  # width: blocks of the longest
    assert (inputs.meta.max_query_len, inputs.meta.max_context_len) == (6, 9)
    # a stops mid-prompt (9 of 11 tokens), so only b and c sample.
    assert inputs.logits_indices.tolist() == [0, 9]
    assert ModelRunner.sampling_sequences(SchedulerOutput(scheduled)) == [b, c]


def test_execute_edge_cases(tiny_path: Path) -> None:
    runner = make_runner(tiny_path)
    assert runner.execute(SchedulerOutput([])).shape == (0, 96)
    seq = seq_with("a", list(range(12)), computed=0, table=[3, 8, 1])
    assert runner.execute(SchedulerOutput([ScheduledSeq(seq, 5)])).shape == (0, 96)  # mid-prompt chunk
    seq.num_computed_tokens = 5
    logits = runner.execute(SchedulerOutput([ScheduledSeq(seq, 7)]))
    assert logits.shape == (1, 96) and logits.dtype == torch.float32
    assert runner.cuda_graphs is None  # CPU never captures CUDA graphs


def test_kv_cache_shape_and_bytes_per_block(tiny_path: Path) -> None:
    runner = make_runner(tiny_path)
    k, v = runner.kv_caches[0]
    assert v.shape == (32, 4, 2, 16)  # [blocks, block_size, kv_heads, head_dim]
    # The cpu backend stores each block's keys transposed, the torch backend like V.
    assert k.shape == ((32, 2, 16, 4) if runner.backend.k_transposed else (32, 4, 2, 16))
    assert len(runner.kv_caches) == 2
    total = sum(t.nbytes for pair in runner.kv_caches for t in pair)
    assert runner.bytes_per_block == total // runner.num_blocks == 2 * 2 * 4 * 2 * 16 * 4


def test_bundled_model_bytes_per_block(model_path: Path) -> None:
    from inference.worker.loader import load_model_config

    # 2 (K, V) x 30 layers x 16 tokens x 3 kv heads x 64 dims x 4 bytes
    assert kv_cache_bytes_per_block(load_model_config(model_path), 16, torch.float32) == 737_280


def test_kv_cache_memory_sets_the_block_count(tiny_path: Path) -> None:
    per_block = 2 * 2 * 4 * 2 * 16 * 4
    runner = make_runner(tiny_path, num_gpu_blocks_override=None, kv_cache_memory=per_block * 40 + 100)
    assert runner.num_blocks == 40
    assert runner.kv_caches[0][0].shape[0] == 40
    runner = make_runner(tiny_path, num_gpu_blocks_override=7, kv_cache_memory=per_block * 40)
    assert runner.num_blocks == 7  # the override wins


def test_too_small_cache_says_what_would_fit(tiny_path: Path) -> None:
    per_block = 2 * 2 * 4 * 2 * 16 * 4
    with pytest.raises(KVCacheTooSmallError) as info:
        make_runner(tiny_path, num_gpu_blocks_override=None, kv_cache_memory=per_block * 10)
    message = str(info.value)
    assert f"{per_block} bytes" in message and "needs 16 blocks" in message and str(16 * per_block) in message


def test_length_limits_are_checked(tmp_path: Path, tiny_path: Path, make_tiny_checkpoint) -> None:
    with pytest.raises(ValueError, match="max_position_embeddings=256"):
        make_runner(tiny_path, max_model_len=512)
    mistral = make_tiny_checkpoint(tmp_path / "mistral", "mistral", sliding_window=32)
    with pytest.raises(ValueError, match="sliding-window"):
        make_runner(mistral, max_model_len=64)


def test_unknown_architecture_fails_before_loading(tmp_path: Path) -> None:
    from transformers import GPT2Config

    GPT2Config(architectures=["GPT2LMHeadModel"]).save_pretrained(tmp_path)
    with pytest.raises(UnsupportedModelError, match="GPT2LMHeadModel"):
        make_runner(tmp_path)


def test_dtypes_and_graph_sizes(monkeypatch) -> None:
    from inference.worker.attention import cpu_kernels

    cpu = torch.device("cpu")
    # auto: bf16 where the CPU multiplies bf16 natively, fp32 elsewhere.
    for flags, expected in [("fpu avx2 avx512f avx512_bf16", torch.bfloat16), ("fpu amx_bf16 amx_tile", torch.bfloat16),
                            ("fpu avx2 avx512f", torch.float32), ("", torch.float32)]:
        monkeypatch.setattr(cpu_kernels, "cpu_flags", lambda flags=flags: flags)
        assert resolve_dtype("auto", cpu) == expected, flags
    assert resolve_dtype("bfloat16", cpu) == torch.bfloat16 and resolve_dtype("half", cpu) == torch.float16
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_dtype("int8", cpu)
    assert cuda_graph_batch_sizes(48) == [1, 2, 4, 8, 16, 32, 48]
    assert cuda_graph_batch_sizes(64) == [1, 2, 4, 8, 16, 32, 64]
    assert cuda_graph_batch_sizes(1) == [1]



def test_cpu_projections_run_on_packed_weights_with_the_same_logits(tiny_path: Path) -> None:
    """Without batch invariance, on CPU every projection runs on a oneDNN-packed copy of its weight (the weight
    itself is dropped); the logits equal those of plain ``F.linear`` up to fp32 summation order."""
    packed = make_runner(tiny_path, batch_invariant=False)
    plain = make_runner(tiny_path, cpu_packed_linears=False)
    assert packed.packed_linears and not plain.packed_linears
    attn = packed.model.layers[0].self_attn
    assert attn.qkv_proj.packed is not None and attn.qkv_proj.weight.numel() == 0
    assert plain.model.layers[0].self_attn.qkv_proj.packed is None
    tokens = list(range(3, 20))
    logits = [
        runner.execute(SchedulerOutput([ScheduledSeq(seq_with("a", tokens, 0, [0, 1, 2, 3, 4]), len(tokens))]))
        for runner in (packed, plain)
    ]
    torch.testing.assert_close(logits[0], logits[1], atol=1e-4, rtol=1e-4)


def test_batch_invariant_projections_run_on_weight_panels_only(tiny_path: Path) -> None:
    """The default (EngineConfig.batch_invariant): every projection on the panel kernel, whatever the rows, and
    no oneDNN copy of the weights; the logits those of oneDNN up to fp32 summation order."""
    invariant, onednn = make_runner(tiny_path), make_runner(tiny_path, cpu_small_linears=False)
    for linear in (invariant.model.layers[0].self_attn.qkv_proj, invariant.model.layers[0].mlp.down_proj):
        assert linear.panels is not None and linear.packed is None and linear.weight.numel() == 0
    assert invariant.model.lm_head_panels is not None and invariant.model.lm_head_packed is None
    assert invariant.projections == "panels-fp32" and onednn.projections == "onednn"  # what the runner logs
    tokens = list(range(3, 40))
    for runner in (invariant, onednn):
        prefill = runner.execute(SchedulerOutput([ScheduledSeq(seq_with("a", tokens, 0, list(range(12))), 37)]))
        decode = runner.execute(SchedulerOutput([ScheduledSeq(seq_with("a", tokens + [7], 37, list(range(12))), 1)]))
        runner.logits = (prefill, decode)
    for got, expected in zip(invariant.logits, onednn.logits):
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_cpu_small_steps_run_on_weight_panels_with_the_same_logits(tiny_path: Path) -> None:
    """Without batch invariance, in fp32 a step of up to 16 rows runs its projections on the panel kernel
    (cpu_kernels.small_linear); a longer one, and a runner without it, on oneDNN. The logits agree up to fp32
    summation order, over a prefill chunk too long for the panels and a decode step short enough."""
    panels = make_runner(tiny_path, batch_invariant=False)
    onednn = make_runner(tiny_path, cpu_small_linears=False)
    assert panels.small_linears and not onednn.small_linears
    mlp = panels.model.layers[0].mlp
    assert mlp.gate_up_proj.panels is not None and onednn.model.layers[0].mlp.gate_up_proj.panels is None
    assert panels.model.small_rows >= 8
    tokens = list(range(3, 3 + panels.model.small_rows + 4))
    n = len(tokens)
    blocks = list(range(8))
    for runner in (panels, onednn):
        prefill = runner.execute(SchedulerOutput([ScheduledSeq(seq_with("a", tokens, 0, blocks), n)]))
        decode = runner.execute(SchedulerOutput([ScheduledSeq(seq_with("a", tokens + [7], n, blocks), 1)]))
        runner.logits = (prefill, decode)
    for got, expected in zip(panels.logits, onednn.logits):
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_cpu_fused_ops_give_the_logits_of_the_torch_ops(tiny_path: Path) -> None:
    """On CPU RMSNorm (with its residual add), RoPE and SiLU * up run as fused C++ ops (cpu_kernels); the
    logits equal those of the plain torch ops up to fp32 summation order, over a prefill and a decode."""
    fused, plain = make_runner(tiny_path), make_runner(tiny_path, cpu_fused_ops=False)
    assert fused.fused_cpu_ops and not plain.fused_cpu_ops
    assert fused.model.layers[0].mlp.fused and not plain.model.layers[0].mlp.fused
    tokens = list(range(3, 20))
    for runner in (fused, plain):
        prefill = runner.execute(SchedulerOutput([ScheduledSeq(seq_with("a", tokens, 0, [0, 1, 2, 3, 4]), 17)]))
        decode = runner.execute(SchedulerOutput([ScheduledSeq(seq_with("a", tokens + [7], 17, [0, 1, 2, 3, 4]), 1)]))
        runner.logits = (prefill, decode)
    for got, expected in zip(fused.logits, plain.logits):
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_blocks_to_copy_run_before_the_forward(tiny_path: Path) -> None:
    """A candidate decoding on a copy of a shared partial block sees the same context as the original."""
    runner = make_runner(tiny_path)
    prompt = list(range(3, 9))  # 6 tokens: block 5 full, block 6 holds 2
    runner.execute(SchedulerOutput([ScheduledSeq(seq_with("p", prompt, 0, [5, 6]), 6)]))
    before = [(k[6].clone(), v[6].clone()) for k, v in runner.kv_caches]
    # The original decodes on block 6; the candidate on block 9, a copy taken by this very step.
    original = seq_with("p", prompt + [11], 6, [5, 6])
    candidate = seq_with("c", prompt + [11], 6, [5, 9])
    logits = runner.execute(SchedulerOutput([ScheduledSeq(original, 1), ScheduledSeq(candidate, 1)],
                                            blocks_to_copy=[(6, 9)]))
    torch.testing.assert_close(logits[0], logits[1], rtol=0, atol=0)
    for (k, v), (k6, v6) in zip(runner.kv_caches, before):
        # The copy holds the prompt's two tokens; each block then got its own write at offset 2.
        assert torch.equal(k[9], k[6]) and torch.equal(v[9], v[6])
        assert not torch.equal(v[6], v6)
    # Without the copy the candidate attends to an empty block: a different result.
    stale = seq_with("s", prompt + [11], 6, [5, 10])
    logits = runner.execute(SchedulerOutput([ScheduledSeq(original, 1), ScheduledSeq(stale, 1)]))
    assert not torch.allclose(logits[0], logits[1])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_tokens_logits_do_not_depend_on_chunking_or_batch(tmp_path: Path, dtype: str) -> None:
    """Batch invariance at the runner (EngineConfig.batch_invariant, the default), on a Qwen2 checkpoint (biases
    on q/k/v, through the panel kernel): the last token's logits, bit for bit, after one prefill of the whole
    prompt, after chunks of 16 + 16 + the rest (the first two standing for prefix-cache hits), after chunks
    ending one token short (the last token a decode), and with other sequences in the same steps."""
    from inference.worker.attention import cpu_kernels
    from tests.inference.conftest import StepHelper, write_tiny_checkpoint

    if dtype == "bfloat16" and not cpu_kernels.small_linear_shape()[2]:
        pytest.skip("bf16 on a CPU without AVX512-BF16: the projections run on oneDNN, not batch invariant")
    # SmolLM2's layer shapes (head_dim 64, 9 heads over 3 KV heads, sums over 576 and 1536), two layers.
    path = write_tiny_checkpoint(tmp_path / "qwen2", "qwen2", hidden_size=576, intermediate_size=1536,
                                 num_attention_heads=9, num_key_value_heads=3, initializer_range=0.05)  # fmt: skip
    runner = make_runner(path, dtype=dtype, block_size=16, num_gpu_blocks_override=64, max_model_len=128)
    assert runner.model.layers[0].self_attn.qkv_proj.panels is not None
    # bf16: through AMX tiles where the CPU has AMX-BF16, else the AVX512-BF16 panels.
    assert runner.projections == ("panels-fp32" if dtype == "float32" else f"panels-{cpu_kernels.bf16_path()}")
    tokens = [int(t) for t in torch.randint(3, 96, (75,), generator=torch.Generator().manual_seed(1))]
    other = [int(t) for t in torch.randint(3, 96, (40,), generator=torch.Generator().manual_seed(2))]
    helper = StepHelper(64, 16, seed=3)

    def last_logits(splits: list[int], with_other: bool = False) -> torch.Tensor:
        seq = helper.new_seq(f"s{len(helper.free)}", tokens)
        companion = helper.new_seq(f"o{len(helper.free)}", other) if with_other else None
        out = None
        for n in splits:
            items = [(seq, n)]
            if companion is not None and companion.num_computed_tokens < len(other):
                items.append((companion, min(13, len(other) - companion.num_computed_tokens)))
            out = helper.step(runner, items)
        assert seq.num_computed_tokens == len(tokens)
        return out[0]

    whole = last_logits([75])
    assert torch.equal(last_logits([16, 16, 43]), whole)
    assert torch.equal(last_logits([64, 10, 1]), whole)
    assert torch.equal(last_logits([30, 45], with_other=True), whole)
