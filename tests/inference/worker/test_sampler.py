"""Sampler on hand-made logits: each processor's effect, and seeded reproducibility."""

from __future__ import annotations

import math

import pytest
import torch

from inference.worker.sampler import (
    Sampler,
    SamplingRequest,
    apply_min_p,
    apply_min_tokens,
    apply_penalties,
    apply_top_k_top_p,
    build_metadata,
    sample,
)
from inference.core.sampling_params import SamplingParams

V = 8
EOS = 7


def _md(params: list[SamplingParams], prompts=None, outputs=None, generators=None):
    n = len(params)
    prompts = prompts or [[] for _ in range(n)]
    outputs = outputs or [[] for _ in range(n)]
    generators = generators or [None] * n
    reqs = [SamplingRequest(p, pr, o, g) for p, pr, o, g in zip(params, prompts, outputs, generators)]
    return build_metadata(reqs, V, "cpu", eos_token_ids=[EOS])


def test_greedy_rows_take_argmax_after_penalties() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0, 0, 0, 0, 0, 0], [5.0, 4.0, 0, 0, 0, 0, 0, 0]])
    md = _md([SamplingParams(temperature=0), SamplingParams(temperature=0, frequency_penalty=2.0)],
             outputs=[[], [0]])
    # Row 1: token 0 appears once in the output, 5 - 2 = 3 < 4, so token 1 wins.
    assert sample(logits.clone(), md).tolist() == [1, 1]


def test_repetition_penalty_over_prompt_and_output() -> None:
    logits = torch.tensor([[2.0, -2.0, 2.0, -2.0, 2.0, 0, 0, 0]])
    md = _md([SamplingParams(repetition_penalty=2.0)], prompts=[[0, 1]], outputs=[[2, 3, 3]])
    out = apply_penalties(logits.clone(), md)
    # Seen tokens: positive logits divided, negative multiplied; token 4 (unseen) untouched.
    assert out[0, :5].tolist() == [1.0, -4.0, 1.0, -4.0, 2.0]


def test_presence_and_frequency_count_output_tokens_only() -> None:
    logits = torch.zeros(1, V)
    md = _md([SamplingParams(presence_penalty=0.5, frequency_penalty=0.25)], prompts=[[4, 4, 5]],
             outputs=[[1, 2, 2, 2]])
    out = apply_penalties(logits.clone(), md)[0]
    assert out[1].item() == pytest.approx(-(0.5 + 0.25 * 1))
    assert out[2].item() == pytest.approx(-(0.5 + 0.25 * 3))
    # Prompt-only tokens are not penalised by presence/frequency.
    assert out[4].item() == 0.0 and out[5].item() == 0.0


def test_negative_penalties_encourage() -> None:
    md = _md([SamplingParams(presence_penalty=-1.0)], outputs=[[3]])
    out = apply_penalties(torch.zeros(1, V), md)
    assert out[0, 3].item() == 1.0


def test_min_tokens_bans_eos_and_stop_tokens_until_reached() -> None:
    params = SamplingParams(min_tokens=3, stop_token_ids=[5], max_tokens=10)
    logits = torch.zeros(2, V)
    md = _md([params, params], outputs=[[1, 2], [1, 2, 3]])
    out = apply_min_tokens(logits.clone(), md)
    assert math.isinf(out[0, EOS].item()) and math.isinf(out[0, 5].item())
    assert torch.isfinite(out[1]).all()  # min_tokens reached: nothing banned
    # ignore_eos: EOS is not a stop token, so only the explicit stop token is banned.
    md = _md([SamplingParams(min_tokens=3, stop_token_ids=[5], ignore_eos=True)], outputs=[[]])
    out = apply_min_tokens(torch.zeros(1, V), md)
    assert torch.isfinite(out[0, EOS]) and math.isinf(out[0, 5].item())


def test_min_tokens_overrides_a_greedy_eos() -> None:
    logits = torch.zeros(1, V)
    logits[0, EOS] = 10.0
    logits[0, 2] = 1.0
    md = _md([SamplingParams(temperature=0, min_tokens=1)])
    assert sample(logits, md).tolist() == [2]


def test_top_k_keeps_k_best_per_row() -> None:
    logits = torch.tensor([[0.0, 1, 2, 3, 4, 5, 6, 7], [7.0, 6, 5, 4, 3, 2, 1, 0]])
    out = apply_top_k_top_p(logits.clone(), torch.tensor([2, 8]), None)
    assert torch.isfinite(out[0]).tolist() == [False] * 6 + [True, True]
    assert torch.isfinite(out[1]).all()


@pytest.mark.parametrize("top_p,kept", [(0.45, 1), (0.7, 2), (0.85, 3), (1.0, 4)])
def test_top_p_keeps_smallest_set_reaching_p(top_p: float, kept: int) -> None:
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    out = apply_top_k_top_p(probs.log(), None, torch.tensor([top_p]))
    assert torch.isfinite(out[0]).sum().item() == kept
    assert torch.isfinite(out[0, :kept]).all()


def test_min_p_scales_with_the_top_probability() -> None:
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    out = apply_min_p(probs.log(), torch.tensor([0.2]))  # threshold 0.1
    assert torch.isfinite(out[0]).tolist() == [True, True, True, False]


def test_random_sampling_follows_the_distribution() -> None:
    probs = torch.tensor([0.6, 0.3, 0.1, 0, 0, 0, 0, 0])
    n = 4000
    logits = probs.clamp_min(1e-30).log().expand(n, V).clone()
    gen = torch.Generator().manual_seed(1)
    md = _md([SamplingParams(temperature=1.0)] * n)
    counts = torch.bincount(sample(logits, md, gen), minlength=V).float() / n
    assert torch.allclose(counts, probs, atol=0.03)


def test_low_temperature_concentrates_and_top_k_restricts() -> None:
    logits = torch.tensor([[1.0, 0.9, 0.8, 0.7, 0.0, 0, 0, 0]]).expand(500, V).clone()
    gen = torch.Generator().manual_seed(0)
    cold = sample(logits.clone(), _md([SamplingParams(temperature=0.01)] * 500), gen)
    assert (cold == 0).float().mean() > 0.99
    k2 = sample(logits.clone(), _md([SamplingParams(temperature=1.0, top_k=2)] * 500), gen)
    assert set(k2.tolist()) == {0, 1}


def _run(sampler: Sampler, rows: list[tuple[str, SamplingParams, torch.Tensor]], steps: int) -> dict[str, list[int]]:
    outs: dict[str, list[int]] = {rid: [] for rid, _, _ in rows}
    for step in range(steps):
        logits = torch.stack([row_logits[step] for _, _, row_logits in rows])
        toks = sampler(logits, [r for r, _, _ in rows], [p for _, p, _ in rows], [[1, 2]] * len(rows),
                       [outs[r] for r, _, _ in rows]).token_ids
        for (rid, _, _), t in zip(rows, toks):
            outs[rid].append(t)
    return outs


def test_seeded_request_is_reproducible_alone_or_in_a_batch() -> None:
    torch.manual_seed(0)
    steps = 20
    mine = torch.randn(steps, V)
    others = [torch.randn(steps, V) for _ in range(3)]
    seeded = SamplingParams(temperature=1.0, top_p=0.95, seed=1234)
    alone = _run(Sampler(V, [EOS], seed=0), [("a", seeded, mine)], steps)["a"]
    batch_rows = [("x", SamplingParams(temperature=0.8), others[0]), ("a", seeded, mine),
                  ("y", SamplingParams(temperature=1.0, seed=9), others[1]),
                  ("z", SamplingParams(temperature=0), others[2])]
    batched = _run(Sampler(V, [EOS], seed=42), batch_rows, steps)["a"]
    assert alone == batched
    other_seed = _run(Sampler(V, [EOS]), [("a", SamplingParams(temperature=1.0, top_p=0.95, seed=99), mine)], steps)
    assert other_seed["a"] != alone  # 20 draws over ~8 tokens: a collision is vanishingly unlikely


def test_logprobs_are_the_log_softmax_of_the_processed_logits() -> None:
    from inference.worker.sampler import sample_with_logprobs

    torch.manual_seed(3)
    logits = torch.randn(4, V)
    params = [
        SamplingParams(temperature=0, frequency_penalty=1.0, logprobs=0),  # greedy, penalised
        SamplingParams(temperature=0.7, top_k=3, logprobs=0),  # sampled among the top 3 at T=0.7
        SamplingParams(temperature=0.7, n=1, best_of=2),  # best_of > n ranks by logprob: wanted too
        SamplingParams(temperature=0.7),  # not asked: NaN, and no log-sum-exp for it
    ]
    md = _md(params, outputs=[[2, 2], [], [], []])
    tokens, logprobs = sample_with_logprobs(logits.clone(), md, torch.Generator().manual_seed(0))
    penalised = logits[0].clone()
    penalised[2] -= 2.0
    assert tokens[0] == penalised.argmax()
    assert logprobs[0].item() == pytest.approx(torch.log_softmax(penalised, -1)[tokens[0]].item(), abs=1e-6)
    top3 = torch.full((V,), float("-inf"))
    keep = logits[1].topk(3).indices
    top3[keep] = logits[1][keep] / 0.7
    assert tokens[1] in keep.tolist()
    assert logprobs[1].item() == pytest.approx(torch.log_softmax(top3, -1)[tokens[1]].item(), abs=1e-6)
    assert logprobs[2].item() == pytest.approx(torch.log_softmax(logits[2] / 0.7, -1)[tokens[2]].item(), abs=1e-6)
    assert math.isnan(logprobs[3].item())
    assert sample(logits.clone(), md, torch.Generator().manual_seed(0)).tolist() == tokens.tolist()


def test_sampler_reports_logprobs_only_for_the_rows_that_need_them() -> None:
    sampler = Sampler(V, [EOS], seed=0)
    logits = torch.randn(2, V)
    out = sampler(logits, ["a", "b"], [SamplingParams(temperature=0, logprobs=0), SamplingParams(temperature=0)],
                  [[1], [1]], [[], []])
    assert out.token_ids == logits.argmax(-1).tolist()
    assert out.logprobs[0] == pytest.approx(torch.log_softmax(logits[0], -1).max().item())
    assert out.logprobs[1] is None


def test_a_rows_logprob_does_not_depend_on_the_other_rows() -> None:
    """Bit for bit, over a real vocabulary's width: torch's CPU log-sum-exp of a 49,152-wide row can differ in
    the last bit between a 1-row and a 2-row call (seen on a Zen 5 EPYC), and a shopper's logprobs must not
    depend on who shares the step (batch invariance, tests/inference/test_engine.py end to end)."""
    from inference.worker.sampler import token_logprobs

    torch.manual_seed(0)
    for _ in range(200):
        logits = torch.randn(2, 49152) * 5
        tokens = logits.argmax(dim=-1)
        alone, batched = torch.empty(1), torch.empty(2)
        token_logprobs(logits[:1].clone(), tokens[:1], [0], alone)
        token_logprobs(logits.clone(), tokens, [0, 1], batched)
        assert torch.equal(alone, batched[:1])


def test_a_row_that_fails_is_reported_alone_and_the_others_sample_as_without_it(monkeypatch) -> None:
    """Issue 39: one row's failure (its seed's generator, or the batched processors raising because of it) is
    the sampler's ``errors`` for that row; every other row gets the token it gets without that neighbour, seeded
    rows included (their draws of the failed batch attempt are rolled back)."""
    import inference.worker.sampler as sampler_module

    torch.manual_seed(5)
    steps = 6
    rows = [("seeded", SamplingParams(temperature=1.0, seed=11), torch.randn(steps, V)),
            ("greedy", SamplingParams(temperature=0), torch.randn(steps, V))]
    alone = _run(Sampler(V, [EOS]), rows, steps)
    batched = sampler_module.sample_with_logprobs

    def fails_with_the_marked_row(logits, md, default=None):
        tokens, logprobs = batched(logits, md, default)  # the draws happen, then the batch fails
        if md.presence is not None and bool((md.presence == 1.5).any()):
            raise RuntimeError("a processor failed on this row")
        return tokens, logprobs

    monkeypatch.setattr(sampler_module, "sample_with_logprobs", fails_with_the_marked_row)
    sampler = Sampler(V, [EOS])
    setup = sampler._generator

    def generator(rid, seed, device):  # what torch's manual_seed did with a seed past 64 bits
        if rid == "overflow":
            raise ValueError("Overflow when unpacking long long")
        return setup(rid, seed, device)

    monkeypatch.setattr(sampler, "_generator", generator)
    got: dict[str, list[int]] = {"seeded": [], "greedy": []}
    for step in range(steps):
        logits = torch.stack([rows[0][2][step], torch.randn(V), rows[1][2][step], torch.randn(V)])
        params = [rows[0][1], SamplingParams(presence_penalty=1.5), rows[1][1], SamplingParams(seed=3)]
        out = sampler(logits, ["seeded", "marked", "greedy", "overflow"], params, [[1, 2]] * 4,
                      [got["seeded"], [], got["greedy"], []])
        assert sorted(out.errors) == [1, 3] and out.token_ids[1] == out.token_ids[3] == -1
        assert "failed on this row" in str(out.errors[1]) and "Overflow" in str(out.errors[3])
        got["seeded"].append(out.token_ids[0])
        got["greedy"].append(out.token_ids[2])
    assert got == alone


def test_any_integer_seed_seeds_its_generator_modulo_2_64() -> None:
    """SamplingParams refuses seeds outside int64; the sampler stays safe for a caller that bypasses it (the
    issue's 2**80 overflowed torch's manual_seed mid-step): it seeds with the value modulo 2**64, as torch maps
    a negative seed."""
    torch.manual_seed(2)
    logits = torch.randn(10, V)
    rows = []
    for seed in (2**80 + 5, 5, -1, 2**64 - 1):
        params = SamplingParams(temperature=1.0)
        params.seed = seed  # past the validation, as a mutated params object would be
        rows.append(_run(Sampler(V, [EOS]), [("r", params, logits)], 10)["r"])
    assert rows[0] == rows[1] and rows[2] == rows[3]
