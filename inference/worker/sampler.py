"""Logits processing and sampling for one engine step, vectorised over the batch.

Semantics follow vLLM: penalties first (repetition over prompt + output, presence and frequency over output
only), then a constrained row's disallowed tokens are masked off (structured output: the row's allowed-token
bitmask, so greedy picks the best allowed token and sampling draws only allowed ones), then greedy rows take one argmax, the others go through temperature, min-p, top-k and top-p and are
sampled from the resulting distribution. A request with a seed draws from its own ``torch.Generator``, so its
tokens do not depend on what else is in the batch.

Rows that ask for it (``SamplingParams.needs_logprobs``: ``logprobs=0``, or ``best_of > n``, which ranks the
candidates by their sum) also get the sampled token's logprob: the log-softmax of the processed logits the
token was drawn from (after penalties; for sampled rows also after temperature, min-p, top-k and top-p), as
vLLM's processed logprobs. Only those rows pay for the log-sum-exp.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
import math
from dataclasses import dataclass, field

import torch

from inference.core.sampling_params import SamplingParams

# Rows whose output is shorter than min_tokens must not pick one of these; -inf keeps them out even after
# temperature, top-k or top-p.
_NEG_INF = float("-inf")


@dataclass
class SamplingRequest:
    """What the sampler needs to know about one row of the logits."""

    params: SamplingParams
    prompt_token_ids: Sequence[int]
    output_token_ids: Sequence[int]
    generator: torch.Generator | None = None
    # Structured output: int32 words, bit ``t % 32`` of word ``t // 32`` set when token ``t`` may be sampled
    # (xgrammar's layout); None for a free row. Ids past the bitmask's bits are not allowed.
    allowed_bitmask: torch.Tensor | None = None


@dataclass
class SamplingMetadata:
    """Per-row settings as tensors on the logits' device, built once per step."""

    temperature: torch.Tensor  # [B], 1.0 for greedy rows so dividing is harmless
    greedy: torch.Tensor  # [B] bool
    all_greedy: bool
    top_k: torch.Tensor | None  # [B] long, vocab size where disabled; None if no row uses it
    top_p: torch.Tensor | None  # [B]; None if no row uses it
    min_p: torch.Tensor | None  # [B]; None if no row uses it
    presence: torch.Tensor | None  # [B]
    frequency: torch.Tensor | None  # [B]
    repetition: torch.Tensor | None  # [B]
    output_counts: torch.Tensor | None  # [B, V] occurrences of each token in the output
    prompt_mask: torch.Tensor | None  # [B, V] token occurs in the prompt
    banned_rows: list[int]  # rows still under min_tokens...
    banned_ids: list[list[int]]  # ...and the stop tokens each of them must not sample
    generators: list[torch.Generator | None]
    # Rows whose sampled token's logprob is wanted, split by how the token was chosen.
    greedy_logprob_rows: list[int]
    random_logprob_rows: list[int]
    # Constrained rows and the tokens each may not sample ([C, V] bool on the logits' device); none: [] and None.
    constrained_rows: list[int] = field(default_factory=list)
    disallowed: torch.Tensor | None = None


def build_metadata(
    requests: Sequence[SamplingRequest],
    vocab_size: int,
    device: torch.device | str,
    eos_token_ids: Iterable[int] = (),
) -> SamplingMetadata:
    params = [r.params for r in requests]
    greedy_list = [p.greedy for p in params]
    temps = [1.0 if g else p.temperature for p, g in zip(params, greedy_list)]

    def column(values: list[float], neutral: float) -> torch.Tensor | None:
        if all(v == neutral for v in values):
            return None
        return torch.tensor(values, dtype=torch.float32, device=device)

    sampled = [p for p, g in zip(params, greedy_list) if not g]
    top_k = None
    if any(0 < p.top_k < vocab_size for p in sampled):
        top_k = torch.tensor(
            [p.top_k if 0 < p.top_k < vocab_size else vocab_size for p in params], dtype=torch.long, device=device
        )
    presence = column([p.presence_penalty for p in params], 0.0)
    frequency = column([p.frequency_penalty for p in params], 0.0)
    repetition = column([p.repetition_penalty for p in params], 1.0)
    output_counts = prompt_mask = None
    if presence is not None or frequency is not None or repetition is not None:
        output_counts = _token_counts([r.output_token_ids for r in requests], vocab_size, device)
    if repetition is not None:
        prompt_mask = _token_counts([r.prompt_token_ids for r in requests], vocab_size, device) > 0

    eos = list(eos_token_ids)
    banned_rows: list[int] = []
    banned_ids: list[list[int]] = []
    for i, r in enumerate(requests):
        if len(r.output_token_ids) < r.params.min_tokens:
            stops = list(r.params.stop_token_ids) + ([] if r.params.ignore_eos else eos)
            stops = [t for t in stops if 0 <= t < vocab_size]
            if stops:
                banned_rows.append(i)
                banned_ids.append(stops)

    wanted = [i for i, p in enumerate(params) if p.needs_logprobs]
    constrained_rows = [i for i, r in enumerate(requests) if r.allowed_bitmask is not None]
    disallowed = None
    if constrained_rows:
        words = torch.stack([requests[i].allowed_bitmask for i in constrained_rows]).to(device)  # type: ignore[misc]
        disallowed = ~unpack_bitmask(words, vocab_size)
    return SamplingMetadata(
        temperature=torch.tensor(temps, dtype=torch.float32, device=device),
        greedy=torch.tensor(greedy_list, dtype=torch.bool, device=device),
        all_greedy=all(greedy_list),
        top_k=top_k,
        top_p=column([1.0 if g else p.top_p for p, g in zip(params, greedy_list)], 1.0),
        min_p=column([0.0 if g else p.min_p for p, g in zip(params, greedy_list)], 0.0),
        presence=presence,
        frequency=frequency,
        repetition=repetition,
        output_counts=output_counts,
        prompt_mask=prompt_mask,
        banned_rows=banned_rows,
        banned_ids=banned_ids,
        generators=[r.generator for r in requests],
        greedy_logprob_rows=[i for i in wanted if greedy_list[i]],
        random_logprob_rows=[i for i in wanted if not greedy_list[i]],
        constrained_rows=constrained_rows,
        disallowed=disallowed,
    )


def unpack_bitmask(words: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """[C, W] int32 bitmask words -> [C, vocab_size] bool; ids past the words' 32 * W bits are False."""
    bit = torch.tensor([1 << i for i in range(31)] + [-(2**31)], dtype=torch.int32, device=words.device)
    bits = ((words.to(torch.int32).unsqueeze(-1) & bit) != 0).reshape(words.shape[0], -1)
    if bits.shape[1] >= vocab_size:
        return bits[:, :vocab_size]
    return torch.nn.functional.pad(bits, (0, vocab_size - bits.shape[1]), value=False)


def apply_allowed_tokens(logits: torch.Tensor, md: SamplingMetadata) -> torch.Tensor:
    """-inf (in place) on every token a constrained row may not sample. Raises if a constrained row under
    min_tokens is left with no token (its grammar allows only the end, which min_tokens bans): that row's
    request fails, not the batch. A grammar that is not complete always allows some token."""
    if md.disallowed is None:
        return logits
    if len(md.constrained_rows) == logits.shape[0]:
        logits.masked_fill_(md.disallowed, _NEG_INF)
    else:
        index = torch.tensor(md.constrained_rows, dtype=torch.long, device=logits.device)
        logits[index] = logits.index_select(0, index).masked_fill_(md.disallowed, _NEG_INF)
    both = sorted(set(md.constrained_rows) & set(md.banned_rows))
    if both and bool(torch.isneginf(logits[both].amax(dim=-1)).any()):
        raise ValueError("the structured output constraint leaves no token to sample (min_tokens bans the end?)")
    return logits


def _token_counts(rows: Sequence[Sequence[int]], vocab_size: int, device: torch.device | str) -> torch.Tensor:
    """[B, V] float counts; rows are padded with an extra out-of-vocab column that is dropped afterwards."""
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), max(width, 1)), vocab_size, dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, : len(r)] = torch.as_tensor(list(r), dtype=torch.long)
    ids = ids.to(device)
    counts = torch.zeros(len(rows), vocab_size + 1, dtype=torch.float32, device=device)
    counts.scatter_add_(1, ids, torch.ones_like(ids, dtype=torch.float32))
    return counts[:, :vocab_size]


def apply_penalties(logits: torch.Tensor, md: SamplingMetadata) -> torch.Tensor:
    """vLLM order: repetition (prompt + output), then frequency and presence (output only)."""
    if md.repetition is not None:
        assert md.output_counts is not None and md.prompt_mask is not None
        seen = md.prompt_mask | (md.output_counts > 0)
        r = md.repetition.unsqueeze(1)
        penalised = torch.where(logits > 0, logits / r, logits * r)
        logits = torch.where(seen, penalised, logits)
    if md.frequency is not None:
        assert md.output_counts is not None
        logits = logits - md.frequency.unsqueeze(1) * md.output_counts
    if md.presence is not None:
        assert md.output_counts is not None
        logits = logits - md.presence.unsqueeze(1) * (md.output_counts > 0).float()
    return logits


def apply_min_tokens(logits: torch.Tensor, md: SamplingMetadata) -> torch.Tensor:
    if not md.banned_rows:
        return logits
    rows = [r for r, ids in zip(md.banned_rows, md.banned_ids) for _ in ids]
    cols = [t for ids in md.banned_ids for t in ids]
    logits[rows, cols] = _NEG_INF
    return logits


def apply_min_p(logits: torch.Tensor, min_p: torch.Tensor) -> torch.Tensor:
    probs = torch.softmax(logits, dim=-1)
    threshold = probs.amax(dim=-1, keepdim=True) * min_p.unsqueeze(1)
    return logits.masked_fill(probs < threshold, _NEG_INF)


def apply_top_k_top_p(logits: torch.Tensor, top_k: torch.Tensor | None, top_p: torch.Tensor | None) -> torch.Tensor:
    if top_k is not None:
        k_max = int(top_k.max())
        top_values = logits.topk(k_max, dim=-1).values
        # k-th largest value per row; ties with it are kept, as in vLLM.
        kth = top_values.gather(1, (top_k.clamp(max=k_max) - 1).unsqueeze(1))
        logits = logits.masked_fill(logits < kth, _NEG_INF)
    if top_p is not None:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        # Mass strictly before each token: a token is dropped once the ones above it already reach top_p,
        # so the most likely token always survives.
        before = probs.cumsum(dim=-1) - probs
        drop_sorted = before >= top_p.unsqueeze(1)
        drop = torch.zeros_like(drop_sorted).scatter(1, order, drop_sorted)
        logits = logits.masked_fill(drop, _NEG_INF)
    return logits


def random_sample(
    probs: torch.Tensor, generators: Sequence[torch.Generator | None], default: torch.Generator | None
) -> torch.Tensor:
    """Inverse-CDF sampling: one uniform draw per row, so a seeded row's stream advances by exactly one number
    per step, whatever else is in the batch."""
    u = torch.empty(probs.shape[0], 1, dtype=torch.float64, device=probs.device)
    if all(g is None for g in generators):
        u.uniform_(generator=default)
    else:
        for i, g in enumerate(generators):
            u[i].uniform_(generator=g if g is not None else default)
    cdf = probs.double().cumsum(dim=-1)
    # First token whose cumulative mass exceeds u * total: a zero-probability token never has a cdf step,
    # so it can never be picked.
    tokens = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(1)
    return tokens.clamp_(max=probs.shape[-1] - 1)


def _each_row(op, x: torch.Tensor) -> torch.Tensor:
    """``op(x, dim=-1)`` computed row by row on the CPU: torch's CPU reductions split a long row differently
    depending on how many rows there are (a 2-row logsumexp of 49,152 logits can differ in the last bit from the
    1-row one), and a shopper's answer must not depend on who else is in the batch. CUDA's kernels reduce each row
    on its own already."""
    if x.device.type != "cpu" or x.shape[0] <= 1:
        return op(x, dim=-1)
    return torch.cat([op(x[i : i + 1], dim=-1) for i in range(x.shape[0])])


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, rows: list[int], out: torch.Tensor) -> None:
    """``out[r] = log_softmax(logits[r])[tokens[r]]`` for each row ``r`` of ``rows``."""
    if not rows:
        return
    index = torch.tensor(rows, dtype=torch.long, device=logits.device)
    picked = logits.index_select(0, index)
    chosen = picked.gather(1, tokens.index_select(0, index).unsqueeze(1)).squeeze(1)
    out[index] = chosen - _each_row(torch.logsumexp, picked)


def sample_with_logprobs(
    logits: torch.Tensor, md: SamplingMetadata, default_generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids [B] for logits [B, V], and each token's logprob [B] (NaN in rows that did not ask for it).
    ``logits`` may be modified in place."""
    logits = logits.float()
    logits = apply_min_tokens(logits, md)
    logits = apply_penalties(logits, md)
    logits = apply_allowed_tokens(logits, md)
    greedy_tokens = logits.argmax(dim=-1)
    logprobs = torch.full(greedy_tokens.shape, math.nan, dtype=torch.float32, device=logits.device)
    # A greedy row's distribution is the penalised logits (temperature does not apply to it).
    token_logprobs(logits, greedy_tokens, md.greedy_logprob_rows, logprobs)
    if md.all_greedy:
        return greedy_tokens, logprobs
    logits = logits / md.temperature.unsqueeze(1)
    if md.min_p is not None:
        logits = apply_min_p(logits, md.min_p)
    logits = apply_top_k_top_p(logits, md.top_k, md.top_p)
    random_tokens = random_sample(_each_row(torch.softmax, logits), md.generators, default_generator)
    token_logprobs(logits, random_tokens, md.random_logprob_rows, logprobs)
    return torch.where(md.greedy, greedy_tokens, random_tokens), logprobs


def sample(
    logits: torch.Tensor, md: SamplingMetadata, default_generator: torch.Generator | None = None
) -> torch.Tensor:
    """Token ids [B] for logits [B, V]; ``logits`` may be modified in place."""
    return sample_with_logprobs(logits, md, default_generator)[0]


@dataclass
class SamplerOutput:
    token_ids: list[int]  # -1 in a row of ``errors``
    # The sampled token's logprob in each row that asked for it (SamplingParams.needs_logprobs), else None.
    logprobs: list[float | None]
    # Rows that could not be sampled, with why: their requests fail alone, the other rows are sampled as usual.
    errors: dict[int, Exception] = field(default_factory=dict)


class Sampler:
    """Samples a step's tokens; keeps one generator per seeded request (created on its first step, dropped by
    ``free``) and one default generator, seeded from the engine seed, for the rest."""

    def __init__(self, vocab_size: int, eos_token_ids: Iterable[int] = (), seed: int = 0) -> None:
        self.vocab_size = vocab_size
        self.eos_token_ids = sorted(set(eos_token_ids))
        self.seed = seed
        self._generators: dict[str, torch.Generator] = {}
        self._default: dict[str, torch.Generator] = {}

    def free(self, request_id: str) -> None:
        """Forget a finished request's generator."""
        self._generators.pop(request_id, None)

    def _generator(self, request_id: str, seed: int | None, device: torch.device) -> torch.Generator | None:
        if seed is None:
            return None
        gen = self._generators.get(request_id)
        if gen is None:
            gen = torch.Generator(device=device)
            # manual_seed takes [-2**63, 2**64 - 1] (a negative seed as its 64-bit pattern); the modulo is that
            # same mapping, extended to any int, so a candidate's seed + i past 2**63 - 1 cannot fail the step.
            gen.manual_seed(seed % 2**64)
            self._generators[request_id] = gen
        return gen

    def _default_generator(self, device: torch.device) -> torch.Generator:
        key = str(device)
        gen = self._default.get(key)
        if gen is None:
            gen = torch.Generator(device=device)
            gen.manual_seed(self.seed)
            self._default[key] = gen
        return gen

    @torch.inference_mode()
    def __call__(
        self,
        logits: torch.Tensor,
        request_ids: Sequence[str],
        params: Sequence[SamplingParams],
        prompt_token_ids: Sequence[Sequence[int]],
        output_token_ids: Sequence[Sequence[int]],
        allowed_bitmasks: Sequence[torch.Tensor | None] | None = None,
    ) -> SamplerOutput:
        """Row ``i`` of ``logits`` belongs to request ``request_ids[i]``; one token per row. ``allowed_bitmasks``
        (structured output): row ``i``'s allowed-token bitmask (``SamplingRequest.allowed_bitmask``), or None.

        A row whose own setup or sampling raises is reported in ``errors`` instead of failing the call: one
        request's bad settings must not cost the other requests of the batch their tokens."""
        device = logits.device
        errors: dict[int, Exception] = {}
        rows: list[int] = []
        requests: list[SamplingRequest] = []
        masks = allowed_bitmasks if allowed_bitmasks is not None else [None] * len(request_ids)
        for row, (rid, p, prompt, out) in enumerate(zip(request_ids, params, prompt_token_ids, output_token_ids)):
            try:  # the per-request part: its generator (seed)
                requests.append(SamplingRequest(p, prompt, out, self._generator(rid, p.seed, device), masks[row]))
            except Exception as exc:
                errors[row] = exc
                continue
            rows.append(row)
        token_ids: list[int] = [-1] * len(request_ids)
        values: list[float | None] = [None] * len(request_ids)
        if not rows:
            return SamplerOutput(token_ids, values, errors)
        if len(rows) < logits.shape[0]:
            logits = logits[rows]
        # Draws are rolled back if the batch fails, so a seeded neighbour's retried row draws what it would have.
        states = self._generator_states(requests, device)
        try:
            # Only the min_tokens and structured output masks write into ``logits`` in place (-inf where a row may
            # not sample); writing them again on a retry is harmless, and penalties leave -inf as it is.
            results = [self._sample_batch(logits, requests, device)]
            groups = [rows]
        except Exception as exc:
            if len(rows) == 1:
                errors[rows[0]] = exc
                return SamplerOutput(token_ids, values, errors)
            for gen, state in states:
                gen.set_state(state)
            # Row by row: only the rows that fail alone are reported (each row's tokens are its own already:
            # the processors work per row and seeded rows have their own generators).
            results, groups = [], []
            for i, (row, request) in enumerate(zip(rows, requests)):
                try:
                    results.append(self._sample_batch(logits[i : i + 1], [request], device))
                except Exception as exc:
                    errors[row] = exc
                    continue
                groups.append([row])
        for group, (tokens, logprobs) in zip(groups, results):
            for row, token, value in zip(group, tokens, logprobs):
                token_ids[row] = token
                values[row] = value
        return SamplerOutput(token_ids, values, errors)

    def _sample_batch(
        self, logits: torch.Tensor, requests: list[SamplingRequest], device: torch.device
    ) -> tuple[list[int], list[float | None]]:
        md = build_metadata(requests, logits.shape[-1], device, self.eos_token_ids)
        default = None if md.all_greedy else self._default_generator(device)
        tokens, logprobs = sample_with_logprobs(logits, md, default)
        wanted = md.greedy_logprob_rows + md.random_logprob_rows
        values: list[float | None] = [None] * len(requests)
        if wanted:
            for row, value in zip(wanted, logprobs[wanted].tolist()):
                values[row] = value
        return tokens.tolist(), values

    def _generator_states(
        self, requests: list[SamplingRequest], device: torch.device
    ) -> list[tuple[torch.Generator, torch.Tensor]]:
        """The state of every generator a sampled (not greedy) row would draw from."""
        sampled = [r for r in requests if not r.params.greedy]
        if not sampled:
            return []
        gens = {id(r.generator): r.generator for r in sampled if r.generator is not None}
        if any(r.generator is None for r in sampled):
            default = self._default_generator(device)
            gens[id(default)] = default
        return [(g, g.get_state()) for g in gens.values()]

