"""inference/worker/quantization.py: group-wise codes, their panels, a 4-bit source's grid kept, and the engine
on quantized weights (the bundled model, whose GGUF is Q4_1: int4 keeps its weights as they are)."""

from __future__ import annotations

import pytest
import torch

from inference.core.sampling_params import SamplingParams
from inference.worker import quantization
from inference.worker.attention import cpu_kernels


@pytest.mark.parametrize("scheme", ["w8a8", "int4"])
def test_codes_survive_the_panels_and_dequantize_within_half_a_step(scheme: str) -> None:
    torch.manual_seed(0)
    w = torch.randn(48, 256)
    q = quantization.quantize(w, scheme)
    codes = quantization.codes(q)
    assert codes.shape == (48, 256)
    assert int(codes.min()) >= (0 if scheme == "int4" else -127) and int(codes.max()) <= (15 if scheme == "int4" else 127)
    step = quantization._per_output(q.scales, q.group)
    err = (quantization.dequantize(q) - w).abs()
    # Half a step, plus what rounding the scale (and int4's minimum) to bf16 moves the grid.
    assert bool((err <= step * 0.5 + w.abs() * 2 ** -7 + 1e-6).all())
    rows = torch.tensor([0, 15, 16, 47])
    assert torch.equal(quantization.dequantize_rows(q, rows), quantization.dequantize(q)[rows])


def test_int4_keeps_a_4bit_grid_that_does_not_use_both_ends() -> None:
    """A Q4 group whose codes run 3..12 only: spread over 15 steps anyway, every value would move; kept on its
    own 9 steps, each comes back as it was."""
    torch.manual_seed(1)
    step, low = 0.0123, -0.05
    q = torch.randint(3, 13, (32, 64))
    q[:, ::32] = 3  # each group uses both of its ends
    q[:, 1::32] = 12
    w = (low + step * q).bfloat16().float()
    back = quantization.dequantize(quantization.quantize(w, "int4"))
    assert torch.allclose(back, w, atol=step * 0.02)
    groups = w.reshape(-1, 32)
    lo, s = groups.amin(-1, keepdim=True), (groups.amax(-1, keepdim=True) - groups.amin(-1, keepdim=True)) / 15
    plain_rtn = lo + torch.round((groups - lo) / s) * s  # what spreading each group over 15 steps would do
    assert (plain_rtn - groups).abs().max() > step * 0.15


def test_int4_follows_a_4bit_sources_mix_and_a_plain_model_is_all_int4() -> None:
    torch.manual_seed(2)
    on_grid = (torch.randint(0, 16, (64, 128)) * 0.01 - 0.07).bfloat16().float()
    fine = torch.randn(64, 128) * 0.05  # no 4-bit grid (a Q6_K tensor, or any bf16 model)
    assert quantization.on_4bit_grid(on_grid) and not quantization.on_4bit_grid(fine)
    assert quantization.schemes_for([on_grid, on_grid, fine], "int4") == ["int4", "int4", "w8a8"]
    assert quantization.schemes_for([fine, fine, on_grid], "int4") == ["int4"] * 3
    eight = quantization.EIGHT_BIT  # the int8 mode's tensors: w8a8 on every CPU
    assert quantization.schemes_for([on_grid, on_grid, fine], "auto") == [eight] * 3
    assert quantization.schemes_for([on_grid, on_grid, fine], "int8") == [eight] * 3


def test_an_unknown_scheme_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="none, int8, int4 or auto"):
        quantization.resolve_scheme("int3")


needs_kernels = pytest.mark.skipif(
    not quantization.kernels_ready(), reason=f"needs AVX2 and FMA; this CPU: {cpu_kernels.cpu_model_name()}"
)


@needs_kernels
def test_the_bundled_model_quantized_reads_fewer_bytes_and_predicts_almost_as_bf16_does(model_path) -> None:
    """Measured on a held-out text: int8 (w8a8: activations on int8 steps too) moves perplexity by well under 1%; int4 (4-bit grids of
    the Q4_1 file kept, activations on int8 steps) by a few percent on this small model."""
    from benchmarks.quantization import HELD_OUT_TEXT, perplexity, weight_bytes
    from inference.llm import LLM

    # The baseline in the CPU's own unquantized mode: bf16 where it has bf16 instructions, else fp32 (an AVX2 CPU
    # runs no bf16 projections; quantized weights take bf16 activations on both, "auto" picks it).
    bf16 = cpu_kernels.cpu_has_bf16_instructions()
    results = {}
    for scheme in ("none", "int8", "int4"):
        llm = LLM(str(model_path), dtype="bfloat16" if bf16 or scheme != "none" else "float32", quantization=scheme,
                  max_model_len=512, kv_cache_memory=32 * 2**20)
        try:
            runner = llm.llm_engine.runner
            out = llm.generate(["The best way to keep a tent dry is"], SamplingParams(temperature=0.0, max_tokens=8))
            assert len(out[0].outputs[0].token_ids) == 8
            results[scheme] = (runner.quantization, runner.projections, weight_bytes(runner.model),
                               perplexity(llm, HELD_OUT_TEXT))
        finally:
            llm.close()
    base = results["none"]
    bf16_bytes = base[2] if bf16 else base[2] / 2
    for scheme, (most_bytes, most_loss) in {"int8": (0.5, 0.01), "int4": (1 / 3, 0.06)}.items():
        applied, kernel, nbytes, ppl = results[scheme]
        ran = quantization.EIGHT_BIT if scheme == "int8" else scheme  # the int8 mode's tensors are w8a8
        assert applied == ran and kernel == f"panels-{ran}"
        assert nbytes < bf16_bytes * most_bytes
        assert abs(ppl - base[3]) / base[3] < most_loss, (scheme, ppl, base[3])


def test_quantization_is_not_applied_to_fp32_weights_and_says_so(model_path, caplog) -> None:
    from inference.llm import LLM

    llm = LLM(str(model_path), dtype="float32", quantization="int8", max_model_len=256, kv_cache_memory=16 * 2**20)
    try:
        assert llm.llm_engine.runner.quantization == "none"
    finally:
        llm.close()
    if quantization.kernels_ready():
        assert "not applied" in caplog.text
