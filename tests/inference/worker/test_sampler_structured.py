"""Sampler with allowed-token bitmasks (structured output): only constrained rows are masked, after penalties and
before greedy / temperature / top-k, in the same batch as free rows."""

from __future__ import annotations

import torch

from inference.core.sampling_params import SamplingParams
from inference.worker.sampler import Sampler, SamplingRequest, build_metadata, sample, unpack_bitmask

V = 40  # two 32-bit words, the second partly used


def pack(allowed: list[int], words: int = 2) -> torch.Tensor:
    """xgrammar's layout, written out by hand: bit t % 32 of int32 word t // 32."""
    values = [0] * words
    for t in allowed:
        values[t // 32] |= 1 << (t % 32)
    return torch.tensor([v - 2**32 if v >= 2**31 else v for v in values], dtype=torch.int32)


def test_unpack_reads_every_bit_including_the_sign_bit() -> None:
    allowed = [0, 5, 31, 32, 39]
    bits = unpack_bitmask(pack(allowed).unsqueeze(0), V)
    assert bits.shape == (1, V) and torch.nonzero(bits[0]).flatten().tolist() == allowed
    # A bitmask narrower than the vocabulary (lm_head rows past it): those ids are not allowed.
    wide = unpack_bitmask(pack([1, 63]).unsqueeze(0), 70)
    assert torch.nonzero(wide[0]).flatten().tolist() == [1, 63]


def test_greedy_picks_the_best_allowed_token_after_penalties() -> None:
    logits = torch.zeros(1, V)
    logits[0, [3, 7, 9]] = torch.tensor([5.0, 4.0, 3.0])
    # Token 3 is the best overall but not allowed; token 7 is allowed but penalised below token 9.
    reqs = [SamplingRequest(SamplingParams(temperature=0, frequency_penalty=2.0), [], [7], None, pack([7, 9]))]
    assert sample(logits.clone(), build_metadata(reqs, V, "cpu")).tolist() == [9]


def test_sampled_rows_draw_only_allowed_tokens_and_free_rows_are_untouched() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, V) * 3
    allowed = [2, 17, 33]
    gen = torch.Generator().manual_seed(1)
    seen = set()
    for _ in range(200):
        reqs = [
            SamplingRequest(SamplingParams(temperature=1.5, top_k=20), [], [], None, pack(allowed)),
            SamplingRequest(SamplingParams(temperature=0), [], [], None, None),
        ]
        tokens = sample(logits.clone(), build_metadata(reqs, V, "cpu"), gen).tolist()
        seen.add(tokens[0])
        assert tokens[1] == int(logits[1].argmax())
    assert seen == set(allowed)  # every allowed token drawn at some point, nothing else


def test_a_free_rows_tokens_do_not_depend_on_a_constrained_neighbour() -> None:
    torch.manual_seed(3)
    logits = torch.randn(3, V)
    free = SamplingParams(temperature=0.8, seed=11)

    def run(with_neighbour: bool) -> int:
        sampler = Sampler(V, seed=0)
        rows = [0, 1] if with_neighbour else [0]
        masks = [None, pack([4])] if with_neighbour else None
        params = [free, SamplingParams(temperature=1.0, seed=5)][: len(rows)]
        out = sampler(logits[rows].clone(), ["free", "c"][: len(rows)], params, [[]] * len(rows), [[]] * len(rows), masks)
        if with_neighbour:
            assert out.token_ids[1] == 4
        return out.token_ids[0]

    assert all(run(True) == run(False) for _ in range(5))


def test_a_row_left_with_no_token_fails_alone() -> None:
    logits = torch.randn(2, V)
    eos = 5
    sampler = Sampler(V, eos_token_ids=[eos])
    # The grammar allows only the end token, which min_tokens bans: nothing can be sampled in that row.
    params = [SamplingParams(temperature=0, min_tokens=3), SamplingParams(temperature=0)]
    out = sampler(logits.clone(), ["a", "b"], params, [[], []], [[], []], [pack([eos]), None])
    assert set(out.errors) == {0} and "no token" in str(out.errors[0])
    assert out.token_ids[1] == int(logits[1].argmax())
