"""The quantized panel kernels (``csrc/quant_linear.cpp``) against their reference (``quantization.reference_linear``).

They run where AVX2 and FMA do (the skip reason names this CPU, so CI's log says where they ran)."""

from __future__ import annotations

import pytest
import torch

from inference.worker import quantization
from inference.worker.attention import cpu_kernels

pytestmark = pytest.mark.skipif(
    not quantization.kernels_ready(), reason=f"needs AVX2 and FMA; this CPU: {cpu_kernels.cpu_model_name()}"
)

SCHEMES = ("w8a8", "int4")


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("rows", [1, 3, 16, 17, 40])
@pytest.mark.parametrize("shape", [(64, 128), (960, 576), (160, 1536)])
def test_the_kernel_computes_x_times_the_dequantized_weight(scheme: str, rows: int, shape: tuple[int, int]) -> None:
    torch.manual_seed(rows)
    n, k = shape
    weight = quantization.quantize(torch.randn(n, k) * 0.05, scheme)
    x = torch.randn(rows, k).bfloat16()
    bias = torch.randn(n).bfloat16()
    out = quantization.linear(x, weight, bias)
    want = quantization.reference_linear(x, weight, bias)
    assert out.dtype == torch.bfloat16 and out.shape == (rows, n)
    # fp32 sums in another order, then one bf16 rounding: within 2 bf16 ulps of the exact result. int4: also an
    # activation a hair from a tie (63.499996 x) may round the other way than the reference's, one int8 step.
    atol = 1e-2 * want.abs().max().item()
    assert torch.allclose(out.float(), want, rtol=2 ** -7, atol=atol)
    # Rounded from the sums, not a near miss: most outputs are the exact result rounded to bf16.
    assert (out == want.bfloat16()).float().mean() > 0.6


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_rows_result_is_the_same_whatever_the_rows_beside_it(scheme: str) -> None:
    """A decode step's rows (at most 16: codes turned into bf16 in registers) and a prefill chunk's (codes turned
    into bf16 once per panel) sum in the same order: batch invariant, bit for bit."""
    torch.manual_seed(0)
    weight = quantization.quantize(torch.randn(256, 512) * 0.05, scheme)
    x = torch.randn(45, 512).bfloat16()
    together = quantization.linear(x, weight)
    for i in (0, 16, 44):
        assert torch.equal(quantization.linear(x[i : i + 1], weight)[0], together[i])
    assert torch.equal(quantization.linear(x[:16], weight), together[:16])
    assert torch.equal(quantization.linear(x[3:20], weight), together[3:20])


def test_strided_rows_are_read_in_place() -> None:
    torch.manual_seed(1)
    weight = quantization.quantize(torch.randn(64, 256) * 0.05, "int4")
    wide = torch.randn(5, 512).bfloat16()
    assert torch.equal(quantization.linear(wide[:, :256], weight), quantization.linear(wide[:, :256].contiguous(), weight))


def test_bad_arguments_are_refused_with_the_reason() -> None:
    weight = quantization.quantize(torch.randn(32, 128), "w8a8")
    with pytest.raises(RuntimeError, match="bfloat16"):
        quantization.linear(torch.randn(2, 128), weight)
    with pytest.raises(RuntimeError, match="shapes|layout"):
        torch.ops.shop_assistant.quant_linear_w8a8_(
            torch.empty(2, 48, dtype=torch.bfloat16), torch.randn(2, 128).bfloat16(), weight.q, weight.scales, None,
            weight.group,
        )


def test_the_int8_mode_is_w8a8_on_every_cpu_and_int8_is_no_tensor_scheme() -> None:
    assert quantization.schemes_for([torch.randn(32, 64)], "int8") == ["w8a8"]
    with pytest.raises(ValueError, match="w8a8 or int4"):
        quantization.quantize(torch.randn(32, 128), "int8")
