"""The CPU attention backends (plain torch, and the C++ kernels) against a naive per-sequence, per-token
reference on random paged layouts; the C++ prefill path's batch invariance, bit for bit."""

from __future__ import annotations

import pytest
import torch

from inference.worker.attention import AttentionMetadata, cpu_kernels, get_attention_backend, keys_by_token
from inference.worker.attention.torch_backend import TorchAttentionBackend, _context_buckets

BACKENDS = ["torch", "cpu"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param == "cpu" and not cpu_kernels.load():
        pytest.fail(f"the C++ kernels must build here: {cpu_kernels.unavailable_reason()}")
    return get_attention_backend(request.param, "cpu")


def with_cascade(backend):
    """``backend`` with the cascade on (the cpu backend's can be turned off)."""
    backend.cascade = True
    return backend


def in_layout(k_by_token: torch.Tensor, backend) -> torch.Tensor:
    """A K cache built as ``[blocks, block_size, kv_heads, head_dim]``, stored the way ``backend`` keeps it."""
    return k_by_token.permute(0, 2, 3, 1).contiguous() if backend.k_transposed else k_by_token


def cascade_used(meta: AttentionMetadata) -> bool:
    state = meta.state
    return state.decodes is not None if hasattr(state, "decodes") else state.prefix is not None


def naive_paged_attention(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata, scale: float
) -> torch.Tensor:
    """Reads each key position through the block table one by one and attends in float64."""
    block_size = k_cache.shape[1]
    group = q.shape[1] // k_cache.shape[2]
    out = torch.zeros(q.shape, dtype=torch.float64)
    qsl = meta.query_start_loc.tolist()
    for s, ctx in enumerate(meta.context_lens.tolist()):
        table = meta.block_tables[s].tolist()
        q_len = qsl[s + 1] - qsl[s]
        for j in range(q_len):
            pos = ctx - q_len + j
            keys = torch.stack([k_cache[table[p // block_size], p % block_size] for p in range(pos + 1)]).double()
            values = torch.stack([v_cache[table[p // block_size], p % block_size] for p in range(pos + 1)]).double()
            for h in range(q.shape[1]):
                scores = keys[:, h // group] @ q[qsl[s] + j, h].double() * scale
                out[qsl[s] + j, h] = scores.softmax(0) @ values[:, h // group]
    return out


def random_case(seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)

    def pick(options: list) -> object:
        return options[int(torch.randint(len(options), (1,), generator=gen))]

    num_seqs = int(torch.randint(1, 6, (1,), generator=gen))
    query_lens, context_lens = [], []
    for _ in range(num_seqs):
        kind = pick(["decode", "fresh", "continuation"])
        ctx = int(torch.randint(1, 40, (1,), generator=gen))
        q_len = {"decode": 1, "fresh": ctx, "continuation": max(1, ctx // 2)}[kind]
        query_lens.append(q_len)
        context_lens.append(ctx)
    heads, kv_heads = pick([(4, 4), (6, 2), (9, 3), (8, 1)])
    return dict(query_lens=query_lens, context_lens=context_lens, block_size=pick([1, 3, 4, 16]),
                heads=heads, kv_heads=kv_heads, head_dim=pick([8, 16, 64]), gen=gen)  # fmt: skip


def run_case(case: dict, paged_layout) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
    gen, bs = case["gen"], case["block_size"]
    num_blocks = sum(-(-c // bs) for c in case["context_lens"]) + 5
    meta = paged_layout(case["query_lens"], case["context_lens"], bs, num_blocks, gen)
    num_tokens = sum(case["query_lens"])
    kv_shape = (num_blocks, bs, case["kv_heads"], case["head_dim"])
    k_cache, v_cache = torch.randn(kv_shape, generator=gen), torch.randn(kv_shape, generator=gen)
    q = torch.randn(num_tokens, case["heads"], case["head_dim"], generator=gen)
    k = torch.randn(num_tokens, case["kv_heads"], case["head_dim"], generator=gen)
    v = torch.randn(num_tokens, case["kv_heads"], case["head_dim"], generator=gen)
    return q, k, v, meta, {"k_cache": k_cache, "v_cache": v_cache}


@pytest.mark.parametrize("seed", range(24))
def test_backend_matches_naive_reference(seed: int, paged_layout, backend) -> None:
    case = random_case(seed)
    q, k, v, meta, caches = run_case(case, paged_layout)
    k_cache, v_cache = in_layout(caches["k_cache"], backend), caches["v_cache"]
    scale = case["head_dim"] ** -0.5
    backend.prepare(meta, case["block_size"])
    out = backend.forward(q, k, v, k_cache, v_cache, meta, scale)

    k_cache = keys_by_token(k_cache, backend.k_transposed)
    flat_k = k_cache.reshape(-1, case["kv_heads"], case["head_dim"])
    flat_v = v_cache.view(-1, case["kv_heads"], case["head_dim"])
    assert torch.equal(flat_k[meta.slot_mapping], k) and torch.equal(flat_v[meta.slot_mapping], v)
    expected = naive_paged_attention(q, k_cache, v_cache, meta, scale)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "query_lens,context_lens",
    [
        ([5, 1, 9, 1, 3], [5, 12, 20, 3, 30]),  # decodes interleaved with chunks, not decodes-first
        ([7, 3, 11], [7, 3, 11]),  # fresh prompts of different lengths (padded, no cache read)
        ([1, 1, 1], [1, 17, 4]),  # decode-only, one of them the first token
        ([16], [40]),  # one chunk after a long cached prefix
        ([1] * 8, [3, 400, 5, 350, 7, 9, 380, 2]),  # decodes of very different lengths: split into groups
        ([1, 30, 1, 1], [500, 30, 4, 480]),  # the same, mixed with a fresh prompt
    ],
)
def test_explicit_layouts(query_lens, context_lens, paged_layout, backend) -> None:
    case = dict(query_lens=query_lens, context_lens=context_lens, block_size=4, heads=6, kv_heads=2,
                head_dim=16, gen=torch.Generator().manual_seed(7))  # fmt: skip
    q, k, v, meta, caches = run_case(case, paged_layout)
    k_cache = in_layout(caches["k_cache"], backend)
    backend.prepare(meta, 4)
    out = backend.forward(q, k, v, k_cache, caches["v_cache"], meta, 0.25)
    k_cache = keys_by_token(k_cache, backend.k_transposed)
    expected = naive_paged_attention(q, k_cache, caches["v_cache"], meta, 0.25)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)


def test_backend_selection(monkeypatch) -> None:
    assert get_attention_backend("auto", "cpu").name == "cpu"  # the kernels build on every machine we run on
    assert get_attention_backend("torch", "cpu").name == "torch"
    with pytest.raises(ValueError, match="unknown attention backend"):
        get_attention_backend("flash", "cpu")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="needs a CUDA device"):
        get_attention_backend("triton", "cpu")
    # Where the kernels cannot be built (no compiler), "auto" falls back to plain torch and "cpu" says why.
    monkeypatch.setattr(cpu_kernels, "_state", {"ok": False, "reason": "no C++ compiler"})
    assert get_attention_backend("auto", "cpu").name == "torch"
    with pytest.raises(RuntimeError, match=r"no C\+\+ compiler"):
        get_attention_backend("cpu", "cpu")


def test_decodes_are_bucketed_by_context_length() -> None:
    seqs = torch.arange(10)
    uniform = torch.full((10,), 100)
    assert [b.tolist() for b in _context_buckets(seqs, uniform, 16)] == [list(range(10))]
    bimodal = torch.tensor([900, 20, 30, 880, 25, 10, 15, 890, 12, 40])
    buckets = [sorted(b.tolist()) for b in _context_buckets(seqs, bimodal, 16)]
    assert sorted(i for b in buckets for i in b) == list(range(10))  # a partition
    assert [0, 3, 7] in buckets  # the long ones are padded together, apart from the short ones


def shared_prefix_layout(prefix_blocks: int, own_lens: list[int], block_size: int, gen: torch.Generator):
    """Decodes whose block tables start with the same ``prefix_blocks`` physical blocks (a shared system
    prompt), then blocks of their own; plus one prefill chunk that does not share them."""
    num_blocks = prefix_blocks + sum(-(-n // block_size) for n in own_lens) + 8
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    shared, perm = perm[:prefix_blocks], perm[prefix_blocks:]
    tables, slots, context_lens, query_start = [], [], [], [0]
    for own in own_lens:
        ctx = prefix_blocks * block_size + own
        need = -(-ctx // block_size) - prefix_blocks
        table, perm = shared + perm[:need], perm[need:]
        tables.append(table)
        slots.append(table[(ctx - 1) // block_size] * block_size + (ctx - 1) % block_size)
        context_lens.append(ctx)
        query_start.append(query_start[-1] + 1)
    chunk = perm[:2]  # a 5-token chunk continuing a 3-token context, in blocks of its own
    tables.append(chunk)
    slots += [chunk[p // block_size] * block_size + p % block_size for p in range(3, 8)]
    context_lens.append(8)
    query_start.append(query_start[-1] + 5)
    width = max(len(t) for t in tables)
    meta = AttentionMetadata(
        slot_mapping=torch.tensor(slots, dtype=torch.int64),
        block_tables=torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32),
        context_lens=torch.tensor(context_lens, dtype=torch.int32),
        query_start_loc=torch.tensor(query_start, dtype=torch.int32),
        max_query_len=5,
        max_context_len=max(context_lens),
    )
    return meta, num_blocks


@pytest.mark.parametrize("own_lens", [[1, 5, 40, 3], [16, 17, 1], [200, 2, 90, 7, 31]])
def test_cascade_over_a_shared_prefix_matches_the_reference(own_lens, monkeypatch, backend) -> None:
    from inference.worker.attention import torch_backend

    gen, bs, heads, kv_heads, dim = torch.Generator().manual_seed(len(own_lens)), 4, 9, 3, 16
    meta, num_blocks = shared_prefix_layout(20, own_lens, bs, gen)
    backend = with_cascade(backend)
    k_cache = in_layout(torch.randn(num_blocks, bs, kv_heads, dim, generator=gen), backend)
    v_cache = torch.randn(num_blocks, bs, kv_heads, dim, generator=gen)
    num_tokens = meta.slot_mapping.numel()
    q = torch.randn(num_tokens, heads, dim, generator=gen)
    k = torch.randn(num_tokens, kv_heads, dim, generator=gen)
    v = torch.randn(num_tokens, kv_heads, dim, generator=gen)
    backend.prepare(meta, bs)
    assert cascade_used(meta)
    out = backend.forward(q, k, v, k_cache, v_cache, meta, 0.25)
    expected = naive_paged_attention(q, keys_by_token(k_cache, backend.k_transposed), v_cache, meta, 0.25)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)

    monkeypatch.setattr(torch_backend, "CASCADE_MIN_TOKENS", 10**9)  # the same step without the cascade
    backend.prepare(meta, bs)
    assert not cascade_used(meta)
    plain = backend.forward(q, k, v, k_cache, v_cache, meta, 0.25)
    torch.testing.assert_close(out, plain, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_cpu_kernel_in_half_precision_matches_fp32(dtype, monkeypatch) -> None:
    """The kernel reads bf16/fp16 caches and accumulates in fp32: as close to the fp32 result as the inputs'
    rounding allows, with and without the cascade."""
    from inference.worker.attention import torch_backend

    gen, bs, heads, kv_heads, dim = torch.Generator().manual_seed(3), 16, 9, 3, 64
    meta, num_blocks = shared_prefix_layout(6, [100, 3, 250, 17, 64], bs, gen)
    caches = [torch.randn(num_blocks, bs, kv_heads, dim, generator=gen) for _ in range(2)]
    num_tokens = meta.slot_mapping.numel()
    q, k, v = (torch.randn(num_tokens, h, dim, generator=gen) for h in (heads, kv_heads, kv_heads))
    cpu = with_cascade(get_attention_backend("cpu", "cpu"))
    for cascade in (True, False):
        if not cascade:
            monkeypatch.setattr(torch_backend, "CASCADE_MIN_TOKENS", 10**9)
        cpu.prepare(meta, bs)
        assert cascade_used(meta) == cascade
        low = [in_layout(caches[0], cpu).to(dtype), caches[1].to(dtype)]
        out = cpu.forward(q.to(dtype), k.to(dtype), v.to(dtype), *low, meta, dim**-0.5)
        low[0] = keys_by_token(low[0], True)
        expected = naive_paged_attention(q.to(dtype).float(), *(c.float() for c in low), meta, dim**-0.5)
        assert out.dtype == dtype
        torch.testing.assert_close(out.double(), expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("heads,kv_heads,dim", [(4, 4, 64), (8, 4, 64), (9, 3, 64), (8, 2, 128), (14, 2, 64)])
def test_cpu_kernel_grouped_fast_path_matches_the_reference(heads, kv_heads, dim, monkeypatch) -> None:
    """head_dim 64/128 with blocks of 16 take the kernel's compile-time variant (one per group size), which
    scores a KV head's query heads together and prefetches the next block: same result as the float64
    reference and as the generic loop (a group size it has no variant for, 5, runs that one)."""
    from inference.worker.attention import torch_backend

    gen, bs = torch.Generator().manual_seed(heads * dim), 16
    meta, num_blocks = shared_prefix_layout(6, [1, 15, 16, 17, 95, 160], bs, gen)
    k_by_token = torch.randn(num_blocks, bs, kv_heads, dim, generator=gen)
    v_cache = torch.randn(num_blocks, bs, kv_heads, dim, generator=gen)
    num_tokens = meta.slot_mapping.numel()
    q, k, v = (torch.randn(num_tokens, h, dim, generator=gen) for h in (heads, kv_heads, kv_heads))
    cpu = with_cascade(get_attention_backend("cpu", "cpu"))
    for cascade in (True, False):
        if not cascade:
            monkeypatch.setattr(torch_backend, "CASCADE_MIN_TOKENS", 10**9)
        k_cache, v_copy = in_layout(k_by_token.clone(), cpu), v_cache.clone()
        cpu.prepare(meta, bs)
        assert cascade_used(meta) == cascade
        out = cpu.forward(q, k, v, k_cache, v_copy, meta, dim**-0.5)
        expected = naive_paged_attention(q, keys_by_token(k_cache, True), v_copy, meta, dim**-0.5)
        torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)

    # The generic loop on the same inputs: a group of 5 has no compile-time variant.
    wide_q = q.repeat_interleave(5, dim=1)[:, : kv_heads * 5]
    k_cache, v_copy = in_layout(k_by_token.clone(), cpu), v_cache.clone()
    cpu.prepare(meta, bs)
    out = cpu.forward(wide_q, k, v, k_cache, v_copy, meta, dim**-0.5)
    expected = naive_paged_attention(wide_q, keys_by_token(k_cache, True), v_copy, meta, dim**-0.5)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("heads,kv_heads,dim", [(4, 4, 64), (8, 4, 64), (9, 3, 64), (8, 2, 128), (14, 2, 64)])
def test_cpu_kernel_fast_path_in_bf16_matches_fp32(heads, kv_heads, dim) -> None:
    """The bf16 variants of the fast path (bf16 dot products where the CPU has AVX512-BF16, the softmax
    weights rounded to bf16 for the V sum): the fp32 result of the same bf16 inputs, within bf16 rounding,
    for odd and even context lengths (an odd last token is paired with zeros), prefix read by the kernel."""
    gen, bs = torch.Generator().manual_seed(heads + dim), 16
    meta, num_blocks = shared_prefix_layout(6, [1, 2, 15, 16, 17, 95, 160, 333], bs, gen)
    k_by_token = torch.randn(num_blocks, bs, kv_heads, dim, generator=gen).bfloat16()
    v_cache = torch.randn(num_blocks, bs, kv_heads, dim, generator=gen).bfloat16()
    num_tokens = meta.slot_mapping.numel()
    q, k, v = (torch.randn(num_tokens, h, dim, generator=gen).bfloat16() for h in (heads, kv_heads, kv_heads))
    cpu = get_attention_backend("cpu", "cpu")
    cpu.cascade = False
    k_cache = in_layout(k_by_token.clone(), cpu)
    cpu.prepare(meta, bs)
    assert not cascade_used(meta)
    out = cpu.forward(q, k, v, k_cache, v_cache, meta, dim**-0.5)
    expected = naive_paged_attention(q.float(), keys_by_token(k_cache, True).float(), v_cache.float(), meta, dim**-0.5)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.double(), expected, atol=1e-2, rtol=1e-2)


def _one_sequence(gen, ctx: int, bs: int, heads: int, kv_heads: int, dim: int, dtype: torch.dtype):
    """A K/V cache holding one sequence of ``ctx`` tokens in shuffled blocks, and a query for each position."""
    num_blocks = -(-ctx // bs) + 6
    table = torch.randperm(num_blocks, generator=gen)[: -(-ctx // bs)].to(torch.int32)
    k_cache = torch.randn(num_blocks, kv_heads, dim, bs, generator=gen).to(dtype)  # transposed per block
    v_cache = torch.randn(num_blocks, bs, kv_heads, dim, generator=gen).to(dtype)
    q = torch.randn(ctx, heads, dim, generator=gen).to(dtype)
    return table, k_cache, v_cache, q


def _paged_attention(q, k_cache, v_cache, pieces: list[tuple[torch.Tensor, int, int]], scale: float) -> torch.Tensor:
    """One ``paged_attention`` call over sequences ``(table, first query position, end position)``: query rows
    in order, each sequence's queries its positions ``first..end - 1`` (q's rows of those positions)."""
    rows = torch.cat([torch.arange(a, b) for _, a, b in pieces])
    width = max(t.numel() for t, _, _ in pieces)
    tables = torch.stack([torch.cat([t, t.new_zeros(width - t.numel())]) for t, _, _ in pieces])
    qsl = torch.tensor([0] + [b - a for _, a, b in pieces]).cumsum(0).to(torch.int32)
    ctx = torch.tensor([b for _, _, b in pieces], dtype=torch.int32)
    qq = q.index_select(0, rows)
    out = torch.full_like(qq, float("nan"))
    cpu_kernels.paged_attention(out, qq, k_cache, v_cache, qsl, tables, ctx, scale)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "heads,kv_heads,dim,bs", [(9, 3, 64, 16), (8, 2, 128, 16), (4, 4, 64, 16), (6, 2, 16, 4), (5, 1, 64, 16)]
)
def test_paged_attention_prefill_matches_the_reference(dtype, heads, kv_heads, dim, bs, paged_layout) -> None:
    """The C++ prefill path: several causal queries per sequence read back from the paged cache, against the
    float64 reference: fp32 tightly, bf16 within bf16 rounding of the same bf16 inputs. Covers the compile-time
    variants (head_dim 64/128, blocks of 16, bf16 dot products), the generic loop (other shapes, a group of 5)
    and chunks starting mid-block, next to decodes."""
    if not cpu_kernels.load():
        pytest.fail(f"the C++ kernels must build here: {cpu_kernels.unavailable_reason()}")
    gen = torch.Generator().manual_seed(heads * dim + bs)
    case = dict(query_lens=[37, 1, 150, 13, 1], context_lens=[37, 90, 150, 221, 5], block_size=bs, heads=heads,
                kv_heads=kv_heads, head_dim=dim, gen=gen)  # fmt: skip
    q, k, v, meta, caches = run_case(case, paged_layout)
    k_cache = caches["k_cache"].permute(0, 2, 3, 1).contiguous().to(dtype)
    v_cache, q = caches["v_cache"].to(dtype), q.to(dtype)
    out = torch.full_like(q, float("nan"))
    cpu_kernels.paged_attention(out, q, k_cache, v_cache, meta.query_start_loc, meta.block_tables,
                                meta.context_lens, dim**-0.5)  # fmt: skip
    expected = naive_paged_attention(q.float(), keys_by_token(k_cache, True).float(), v_cache.float(), meta, dim**-0.5)
    tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(out.double(), expected, **tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("heads,kv_heads,dim,bs", [(9, 3, 64, 16), (8, 2, 128, 16), (6, 2, 16, 4)])
def test_a_token_attends_the_same_whatever_the_chunking(dtype, heads, kv_heads, dim, bs) -> None:
    """Batch invariance of attention, bit for bit: each token's output is the same in one chunk of the whole
    prompt, in chunks of any split (each reading the earlier ones back from the cache, as after a prefix-cache
    hit), as a decode of that token (paged_attention with one query, and paged_decode_attention), and with other
    sequences in the same call."""
    if not cpu_kernels.load():
        pytest.fail(f"the C++ kernels must build here: {cpu_kernels.unavailable_reason()}")
    gen, ctx = torch.Generator().manual_seed(dim + bs), 300
    table, k_cache, v_cache, q = _one_sequence(gen, ctx, bs, heads, kv_heads, dim, dtype)
    scale = dim**-0.5
    whole = _paged_attention(q, k_cache, v_cache, [(table, 0, ctx)], scale)
    assert not whole.isnan().any()
    for cuts in ([0, 288, 300], [0, 1, 17, 160, 161, 299, 300], [0, 100, 300]):
        parts = [_paged_attention(q, k_cache, v_cache, [(table, a, b)], scale) for a, b in zip(cuts, cuts[1:])]
        assert torch.equal(torch.cat(parts), whole), cuts
    for pos in (0, 1, 15, 16, 17, 150, 287, 288, 299):
        assert torch.equal(_paged_attention(q, k_cache, v_cache, [(table, pos, pos + 1)], scale)[0], whole[pos])
        out = torch.full_like(q[:1], float("nan"))
        cpu_kernels.paged_decode_attention(out, q[pos : pos + 1], k_cache, v_cache, torch.zeros(1, dtype=torch.long),
                                           table[None].contiguous(), torch.tensor([pos + 1], dtype=torch.int32), scale)  # fmt: skip
        assert torch.equal(out[0], whole[pos]), pos
    # With other sequences in the same call (over the same blocks, at other lengths): the same rows.
    mixed = _paged_attention(q, k_cache, v_cache, [(table, 10, 11), (table, 200, 300), (table, 0, 57)], scale)
    assert torch.equal(mixed[0], whole[10]) and torch.equal(mixed[1:101], whole[200:300])
    assert torch.equal(mixed[101:], whole[:57])
