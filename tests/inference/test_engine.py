"""LLMEngine and LLM on the bundled model: request lifecycle, stop conditions, streaming, seeds, aborts."""

from __future__ import annotations

import random

import pytest

from inference import LLM, RequestTooLongError, SamplingParams
from inference.engine import LLMEngine

GREEDY = dict(temperature=0.0)
SHORT_ANSWER = [{"role": "user", "content": "What is 2+2? Answer with a number only."}]


def _decode(tokenizer, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=True)


def _assert_blocks_released(engine: LLMEngine) -> None:
    stats = engine.stats()
    assert stats["num_blocks_used"] == 0
    assert stats["num_running"] == 0 and stats["num_waiting"] == 0
    assert not engine.has_unfinished()


def test_generate_keeps_input_order_for_text_and_token_prompts(llm: LLM, tokenizer) -> None:
    texts = ["The best hiking boots for wet trails are", "Our summer dress collection"]
    params = SamplingParams(max_tokens=6, ignore_eos=True, **GREEDY)
    ids_prompt = tokenizer.encode(texts[1])
    outs = llm.generate([texts[0], ids_prompt], params)
    assert [o.prompt_token_ids for o in outs] == [tokenizer.encode(texts[0]), ids_prompt]
    assert outs[0].prompt == texts[0] and outs[1].prompt is None
    swapped = llm.generate([ids_prompt, texts[0]], params)
    assert [o.outputs[0].token_ids for o in swapped] == [o.outputs[0].token_ids for o in reversed(outs)]
    for out in outs:
        completion = out.outputs[0]
        assert out.finished and len(completion.token_ids) == 6 and completion.finish_reason == "length"
        assert completion.text == _decode(tokenizer, completion.token_ids)
    single = llm.generate(texts[0], params)  # one prompt, not in a list
    assert len(single) == 1 and single[0].outputs[0].token_ids == outs[0].outputs[0].token_ids
    assert llm.generate(ids_prompt, params)[0].outputs[0].token_ids == outs[1].outputs[0].token_ids


def test_metrics_and_prefix_cache_hits(llm: LLM, tokenizer) -> None:
    block = llm.llm_engine.config.block_size
    prompt = "Trail runner, waterproof, size 42, breathable mesh, recycled sole. " * 6
    params = SamplingParams(max_tokens=5, ignore_eos=True, **GREEDY)
    first, second = llm.generate([prompt], params)[0], llm.generate([prompt], params)[0]
    n_prompt = len(first.prompt_token_ids)
    assert first.num_cached_tokens == 0 and first.metrics.num_cached_tokens == 0
    # The second run finds every full block of the prompt, but always computes the last prompt token.
    assert second.num_cached_tokens == (n_prompt - 1) // block * block > 0
    assert second.outputs[0].token_ids == first.outputs[0].token_ids
    m = first.metrics
    assert m.time_to_first_token is not None and m.time_to_first_token > 0
    assert m.time_per_output_token is not None and m.time_per_output_token > 0
    assert m.arrival_time <= m.first_scheduled_time <= m.first_token_time <= m.last_token_time <= m.finished_time
    assert first.usage is not None and first.usage.prompt_tokens == n_prompt
    assert first.usage.completion_tokens == 5 and second.usage.cached_tokens == second.num_cached_tokens


def test_eos_stops_and_ignore_eos_continues(llm: LLM) -> None:
    eos = llm.llm_engine.eos_token_ids
    out = llm.chat(SHORT_ANSWER, SamplingParams(max_tokens=40, **GREEDY))[0].outputs[0]
    assert out.finish_reason == "stop" and out.stop_reason is None
    assert out.token_ids[-1] in eos and "<|im_end|>" not in out.text
    n = len(out.token_ids)
    longer = llm.chat(SHORT_ANSWER, SamplingParams(max_tokens=n + 4, ignore_eos=True, **GREEDY))[0].outputs[0]
    assert longer.finish_reason == "length" and len(longer.token_ids) == n + 4
    assert longer.token_ids[:n] == out.token_ids  # same greedy path through the EOS, then onwards


def test_min_tokens_suppresses_stop_tokens(llm: LLM) -> None:
    base = llm.chat(SHORT_ANSWER, SamplingParams(max_tokens=12, ignore_eos=True, **GREEDY))[0].outputs[0]
    first = base.token_ids[0]
    stopped = llm.chat(SHORT_ANSWER, SamplingParams(max_tokens=12, stop_token_ids=[first], **GREEDY))[0].outputs[0]
    assert stopped.token_ids == [first] and stopped.finish_reason == "stop" and stopped.stop_reason == first
    assert stopped.text == ""  # a stop token's text is left out by default
    held = llm.chat(SHORT_ANSWER, SamplingParams(max_tokens=12, min_tokens=4, stop_token_ids=[first],
                                                 ignore_eos=True, **GREEDY))[0].outputs[0]
    assert len(held.token_ids) >= 4
    assert first not in held.token_ids[:4]
    if first in held.token_ids:
        assert held.token_ids[-1] == first and held.finish_reason == "stop"
    # min_tokens also holds EOS back: the short answer normally ends after a few tokens.
    eos_len = len(llm.chat(SHORT_ANSWER, SamplingParams(max_tokens=40, **GREEDY))[0].outputs[0].token_ids)
    padded = llm.chat(SHORT_ANSWER, SamplingParams(max_tokens=40, min_tokens=eos_len + 3, **GREEDY))[0].outputs[0]
    assert len(padded.token_ids) >= eos_len + 3
    assert not set(padded.token_ids[: eos_len + 2]) & llm.llm_engine.eos_token_ids


@pytest.mark.parametrize("include", [False, True])
def test_stop_string_cuts_the_text_exactly(llm: LLM, include: bool) -> None:
    prompt = "A short description of our best-selling leather backpack:"
    full = llm.generate(prompt, SamplingParams(max_tokens=24, ignore_eos=True, **GREEDY))[0].outputs[0].text
    words = full.split()
    stop = words[len(words) // 2][:3]  # may end in the middle of a token
    idx = full.index(stop)
    out = llm.generate(prompt, SamplingParams(max_tokens=24, ignore_eos=True, stop=[stop],
                                              include_stop_str_in_output=include, **GREEDY))[0].outputs[0]
    assert out.finish_reason == "stop" and out.stop_reason == stop
    assert out.text == full[: idx + len(stop) if include else idx]


def test_step_deltas_join_to_the_final_text(llm: LLM, tokenizer) -> None:
    engine = llm.llm_engine
    params = {
        "plain": SamplingParams(max_tokens=20, ignore_eos=True, **GREEDY),
        "stopped": SamplingParams(max_tokens=20, ignore_eos=True, stop=["e"], **GREEDY),
        "emoji": SamplingParams(max_tokens=20, ignore_eos=True, **GREEDY),
    }
    prompts = {"plain": "Gift ideas for a hiker:", "stopped": "Gift ideas for a hiker:",
               "emoji": "Reply with three dessert emoji: 🍮🍰"}
    for rid in params:
        engine.add_request(rid, prompts[rid], params[rid])
    text = {rid: "" for rid in params}
    tokens: dict[str, list[int]] = {rid: [] for rid in params}
    finals = {}
    while engine.has_unfinished():
        for out in engine.step():
            assert len(out.outputs) <= 1
            for c in out.outputs:
                text[out.request_id] += c.text
                tokens[out.request_id] += c.token_ids
                assert "\ufffd" not in c.text or c.finish_reason is not None
            if out.finished:
                finals[out.request_id] = out
    assert set(finals) == set(params)
    assert text["plain"] == _decode(tokenizer, tokens["plain"])
    assert text["emoji"] == _decode(tokenizer, tokens["emoji"])
    full = text["plain"]
    assert text["stopped"] == full[: full.index("e")]
    assert finals["stopped"].outputs[0].stop_reason == "e"
    _assert_blocks_released(engine)


def test_seeded_sampling_is_reproducible_alone_and_in_a_batch(llm: LLM) -> None:
    prompt = "Describe a cozy wool sweater:"
    seeded = SamplingParams(temperature=1.0, top_p=0.9, seed=2024, max_tokens=12, ignore_eos=True)
    alone = llm.generate(prompt, seeded)[0].outputs[0].token_ids
    others = [SamplingParams(temperature=1.0, max_tokens=12, ignore_eos=True),
              SamplingParams(temperature=0.7, seed=7, max_tokens=8, ignore_eos=True)]
    batch = llm.generate(["Gift ideas for a cyclist:", prompt, "Socks"], [others[0], seeded, others[1]])
    assert batch[1].outputs[0].token_ids == alone
    again = llm.generate(prompt, seeded)[0].outputs[0].token_ids
    assert again == alone
    other_seed = SamplingParams(temperature=1.0, top_p=0.9, seed=2025, max_tokens=12, ignore_eos=True)
    assert llm.generate(prompt, other_seed)[0].outputs[0].token_ids != alone


def test_too_long_prompt_is_rejected_at_add_time(llm: LLM) -> None:
    engine = llm.llm_engine
    too_long = [100] * (engine.config.max_model_len + 1)
    with pytest.raises(RequestTooLongError, match="at most"):
        engine.add_request("too-long", too_long, SamplingParams())
    with pytest.raises(ValueError, match="vocabulary"):
        engine.add_request("bad-ids", [1, 2, 10**9], SamplingParams())
    assert not engine.has_unfinished()
    with pytest.raises(ValueError):
        llm.generate(["fine", too_long], SamplingParams(max_tokens=2))
    _assert_blocks_released(engine)


def test_abort_frees_blocks_and_reports_abort(llm: LLM) -> None:
    engine = llm.llm_engine
    engine.add_request("to-abort", "Tell me about our return policy. " * 4, SamplingParams(max_tokens=50))
    engine.add_request("keeps-going", "Hello", SamplingParams(max_tokens=3, ignore_eos=True, **GREEDY))
    engine.step()
    engine.step()
    assert engine.stats()["num_blocks_used"] > 0
    assert engine.abort("to-abort") and not engine.abort("to-abort")
    finals = {}
    while engine.has_unfinished():
        for out in engine.step():
            if out.finished:
                finals[out.request_id] = out.outputs[0] if out.outputs else None
    assert finals["to-abort"] is not None and finals["to-abort"].finish_reason == "abort"
    assert finals["keeps-going"].finish_reason == "length"
    _assert_blocks_released(engine)


def _random_request_storm(model: str, num_requests: int, seed: int) -> None:
    """Many tiny random requests through a small block pool (so preemptions happen) with random aborts."""
    # Blocks of 2 tokens: a request grows by several blocks while decoding, more than the scheduler's headroom
    # of one free block per running request, so some are preempted.
    engine = LLM(model, dtype="float32", block_size=2, num_gpu_blocks_override=64, max_num_seqs=24,
                 max_num_batched_tokens=64, max_model_len=64).llm_engine
    rng = random.Random(seed)
    vocab = min(engine.vocab_size, 5000)
    pending = list(range(num_requests))
    live: set[str] = set()
    finished: dict[str, str] = {}
    max_tokens: dict[str, int] = {}
    num: dict[str, int] = {}
    produced: dict[tuple[str, int], int] = {}
    reasons: dict[tuple[str, int], str] = {}
    while pending or engine.has_unfinished():
        for _ in range(rng.randint(0, 12)):
            if not pending:
                break
            rid = f"r{pending.pop()}"
            max_tokens[rid] = rng.randint(1, 8)
            prompt = [rng.randrange(3, vocab) for _ in range(rng.randint(1, 24))]
            # Some requests sample several candidates (forks sharing the prompt), some rank them (best_of).
            num[rid] = rng.choice([1, 1, 1, 2, 3])
            best_of = num[rid] + rng.choice([0, 0, 1])
            params = SamplingParams(n=num[rid], best_of=best_of, max_tokens=max_tokens[rid], temperature=1.0,
                                    seed=rng.randrange(99))
            engine.add_request(rid, prompt, params)
            live.add(rid)
        for rid in rng.sample(sorted(live), k=min(len(live), rng.randint(0, 2))):
            engine.abort(rid)
            live.discard(rid)
        for out in engine.step():
            for c in out.outputs:
                key = (out.request_id, c.index)
                produced[key] = produced.get(key, 0) + len(c.token_ids)
                if c.finish_reason is not None:
                    reasons[key] = c.finish_reason
            if out.finished:
                assert out.request_id not in finished, "a request finished twice"
                finished[out.request_id] = out.outputs[0].finish_reason if out.outputs else "abort"
                live.discard(out.request_id)
        stats = engine.stats()
        assert stats["num_blocks_used"] <= stats["num_blocks_total"]
    assert len(finished) == num_requests
    for (rid, index), count in produced.items():
        assert index < num[rid] and count <= max_tokens[rid]
        if reasons.get((rid, index)) == "length":
            assert count == max_tokens[rid]
    assert engine.stats()["num_preemptions"] > 0
    assert engine.stats()["num_requests_aborted"] > 0
    _assert_blocks_released(engine)


def test_thousands_of_random_requests_with_random_aborts_leave_no_blocks(
    tmp_path, make_tiny_checkpoint, tokenizer
) -> None:
    """The block accounting does not depend on the weights: a tiny random Llama keeps 3,000 requests cheap."""
    folder = make_tiny_checkpoint(tmp_path / "tiny")
    tokenizer.save_pretrained(folder)  # the engine needs one; the tiny vocabulary is a prefix of it
    _random_request_storm(str(folder), num_requests=3000, seed=0)


@pytest.mark.slow
def test_random_requests_on_the_bundled_model_leave_no_blocks(model_path) -> None:
    _random_request_storm(str(model_path), num_requests=500, seed=1)


def _run(engine: LLMEngine, request_id: str, ids: list[int], session_id: str | None = None) -> int:
    """Run one greedy 1-token request to the end; its cached prompt tokens."""
    engine.add_request(request_id, {"prompt_token_ids": ids}, SamplingParams(max_tokens=1, **GREEDY),
                       session_id=session_id)
    cached = None
    while engine.has_unfinished():
        for out in engine.step():
            if out.finished:
                cached = out.num_cached_tokens
    assert cached is not None
    return cached


def test_an_ended_session_is_evicted_before_a_live_one(llm: LLM) -> None:
    engine = llm.llm_engine
    bs = engine.config.block_size
    engine.reset(num_gpu_blocks_override=12)
    try:
        live, ended = list(range(3000, 3000 + 4 * bs + 1)), list(range(4000, 4000 + 4 * bs + 1))
        _run(engine, "live", live, session_id="live")  # 4 full blocks cached, then freed: retained
        _run(engine, "ended", ended, session_id="ended")
        engine.end_session("ended")  # the conversation closed: its blocks become ordinary ones
        _run(engine, "one-off", list(range(5000, 5000 + 5 * bs + 1)))  # needs 6 of the 12 blocks
        assert _run(engine, "live-again", live + [1]) == 4 * bs  # the live conversation kept every block
        assert _run(engine, "ended-again", ended + [1]) < 4 * bs  # the ended one paid for the one-off
        _assert_blocks_released(engine)
    finally:
        engine.reset(num_gpu_blocks_override=None)


def test_prefill_only_request_caches_the_prompt_and_samples_nothing(llm: LLM) -> None:
    engine = llm.llm_engine
    engine.reset_prefix_cache()
    bs = engine.config.block_size
    prompt = list(range(6000, 6000 + 2 * bs + 3))
    (out,) = llm.generate({"prompt_token_ids": prompt}, SamplingParams(max_tokens=0))
    assert out.finished and out.outputs[0].token_ids == [] and out.outputs[0].finish_reason == "length"
    assert out.usage.completion_tokens == 0 and out.metrics.first_token_time is None
    assert _run(engine, "after-prefill", prompt + [5]) == 2 * bs
    _assert_blocks_released(engine)
    with pytest.raises(ValueError):
        SamplingParams(max_tokens=0, n=2)


# -- parallel sampling: n candidates from one prefill, sharing the prompt's blocks -----------------------------


def _pool_refs(engine: LLMEngine) -> dict[int, int]:
    return {b.block_id: b.ref_cnt for b in engine.scheduler.kv.pool.blocks if b.ref_cnt}


def _run_to_end(engine: LLMEngine) -> dict[int, list[int]]:
    """Step until idle; each completion index's tokens."""
    tokens: dict[int, list[int]] = {}
    while engine.has_unfinished():
        for out in engine.step():
            for c in out.outputs:
                tokens.setdefault(c.index, []).extend(c.token_ids)
    return tokens


@pytest.mark.parametrize("caching", [True, False])
def test_n_candidates_share_the_whole_prompt_after_one_prefill(llm: LLM, caching: bool) -> None:
    engine = llm.llm_engine
    bs = engine.config.block_size
    engine.reset(enable_prefix_caching=caching)
    try:
        prompt = list(range(7000, 7000 + 3 * bs + 5))  # three full blocks and a partial one of 5 tokens
        computed: list[int] = []
        engine.step_observers.append(lambda out: computed.append(out.num_batched_tokens))
        engine.add_request("par", {"prompt_token_ids": prompt},
                           SamplingParams(n=4, temperature=1.0, seed=3, max_tokens=bs + 4, ignore_eos=True))
        first = engine.step()  # the prefill, and every candidate's first token
        assert sorted(c.index for c in first[0].outputs) == [0, 1, 2, 3]
        assert computed == [len(prompt)]  # the prompt ran through the model once
        seqs = [engine.scheduler.get_request(f"par#{i}") for i in range(4)]
        table = list(seqs[0].block_table)
        assert len(table) == 4 and all(s.block_table == table for s in seqs)
        # The prompt's blocks once in the pool, each held by the 4 candidates.
        assert engine.stats()["num_blocks_used"] == 4 and _pool_refs(engine) == {b: 4 for b in table}
        engine.step()  # each writes its first token into the shared partial block: 3 copies, 1 in place
        assert engine.stats()["num_blocks_used"] == 4 + 3
        assert all(s.block_table[:3] == table[:3] for s in seqs)
        assert len({s.block_table[3] for s in seqs}) == 4
        assert _pool_refs(engine) == {**{b: 4 for b in table[:3]}, **{s.block_table[3]: 1 for s in seqs}}
        tokens = _run_to_end(engine)
        assert computed[1:] == [4] * (len(computed) - 1)  # decodes only: nobody recomputed the prompt
        assert sorted(tokens) == [0, 1, 2, 3] and all(len(t) == bs + 4 - 2 for t in tokens.values())
        assert len({tuple(t) for t in tokens.values()}) > 1  # distinct samples, not one repeated
        _assert_blocks_released(engine)
        assert _pool_refs(engine) == {}
    finally:
        engine.step_observers.clear()
        engine.reset(enable_prefix_caching=True)


def test_greedy_candidate_0_is_the_n_1_output(llm: LLM) -> None:
    prompt = "Three reasons to buy a rain jacket with pit zips:"
    single = llm.generate(prompt, SamplingParams(max_tokens=24, ignore_eos=True, **GREEDY))[0]
    multi = llm.generate(prompt, SamplingParams(n=3, max_tokens=24, ignore_eos=True, **GREEDY))[0]
    assert [c.index for c in multi.outputs] == [0, 1, 2]
    assert multi.outputs[0].token_ids == single.outputs[0].token_ids
    assert multi.outputs[0].text == single.outputs[0].text
    assert all(c.token_ids == single.outputs[0].token_ids for c in multi.outputs)  # greedy: all the same
    assert multi.usage.completion_tokens == 3 * 24 and multi.usage.prompt_tokens == len(single.prompt_token_ids)


def test_seeded_candidates_reproduce(llm: LLM) -> None:
    prompt = "Describe a cozy wool sweater in one sentence:"
    params = SamplingParams(n=4, temperature=1.0, top_p=0.95, seed=77, max_tokens=12, ignore_eos=True)
    first = [c.token_ids for c in llm.generate(prompt, params)[0].outputs]
    second = [c.token_ids for c in llm.generate(prompt, params)[0].outputs]
    assert first == second and len(first) == 4
    assert len({tuple(t) for t in first}) == 4
    # Candidate i samples with seed + i, vLLM's rule: candidate 0 is the n = 1 request with the same seed.
    alone = llm.generate(prompt, SamplingParams(temperature=1.0, top_p=0.95, seed=77, max_tokens=12, ignore_eos=True))
    assert alone[0].outputs[0].token_ids == first[0]


def test_abort_frees_every_candidate_block(llm: LLM) -> None:
    engine = llm.llm_engine
    engine.add_request("par-abort", "Tell me about our return policy. " * 4,
                       SamplingParams(n=4, temperature=1.0, max_tokens=50, ignore_eos=True))
    for _ in range(3):
        engine.step()
    assert engine.stats()["num_running"] == 4 and engine.stats()["num_blocks_used"] > 0
    assert engine.abort("par-abort")
    assert engine.stats()["num_blocks_used"] == 0 and _pool_refs(engine) == {}  # in the same call
    (final,) = engine.step()
    assert final.finished and sorted(c.index for c in final.outputs) == [0, 1, 2, 3]
    assert {c.finish_reason for c in final.outputs} == {"abort"}
    _assert_blocks_released(engine)
    # Aborted before the prompt was even computed: the forks were never given a block.
    engine.add_request("par-early", "Hello there", SamplingParams(n=3, max_tokens=5))
    assert engine.abort("par-early")
    assert engine.step()[0].finished
    _assert_blocks_released(engine)


def test_best_of_returns_the_n_best_by_cumulative_logprob(llm: LLM) -> None:
    prompt = "Write a tagline for a lightweight hiking backpack:"
    common = dict(temperature=1.0, seed=1234, max_tokens=10, ignore_eos=True)
    every = llm.generate(prompt, SamplingParams(n=5, logprobs=0, **common))[0].outputs
    for c in every:  # the reported logprobs: one per token, summing to the cumulative one
        assert len(c.logprobs) == len(c.token_ids) == 10 and all(lp <= 0 for lp in c.logprobs)
        assert c.cumulative_logprob == pytest.approx(sum(c.logprobs), abs=1e-4)
    ranked = sorted(every, key=lambda c: -c.cumulative_logprob)

    engine = llm.llm_engine
    engine.add_request("best", prompt, SamplingParams(n=2, best_of=5, **common))
    outputs = []
    while engine.has_unfinished():
        outputs += engine.step()
    # Nothing is streamed while the candidates run: the choice is only known at the end.
    (final,) = outputs
    assert final.finished and [c.index for c in final.outputs] == [0, 1]
    assert [c.token_ids for c in final.outputs] == [c.token_ids for c in ranked[:2]]
    assert [c.cumulative_logprob for c in final.outputs] == pytest.approx([c.cumulative_logprob for c in ranked[:2]])
    assert all(c.logprobs is None for c in final.outputs)  # not asked for: only the ranking used them
    assert final.usage.completion_tokens == 5 * 10  # every candidate's tokens were generated
    _assert_blocks_released(engine)
    with pytest.raises(ValueError, match="best_of"):
        SamplingParams(n=3, best_of=2)


def test_preempted_candidates_are_recomputed_and_finish_their_samples(llm: LLM) -> None:
    """A pool too small for every candidate's tail: forked candidates are preempted and recomputed (alone,
    with no cache to find them), and still produce their own seeded samples."""
    engine = llm.llm_engine
    bs = engine.config.block_size
    prompt = list(range(8000, 8000 + 2 * bs + 3))
    params = SamplingParams(n=4, temperature=1.0, seed=9, max_tokens=3 * bs, ignore_eos=True)
    roomy = llm.generate({"prompt_token_ids": prompt}, params)[0]
    engine.reset(num_gpu_blocks_override=12, enable_prefix_caching=False)
    try:
        tight = llm.generate({"prompt_token_ids": prompt}, params)[0]
        assert engine.stats()["num_preemptions"] > 0
        assert [c.token_ids for c in tight.outputs] == [c.token_ids for c in roomy.outputs]
        _assert_blocks_released(engine)
    finally:
        engine.reset(num_gpu_blocks_override=None, enable_prefix_caching=True)


# ------------------------------------------------------------------------------------------------------
# Batch invariance: the answer does not depend on the prefix cache, the chunking or the batch (CPU).
# ------------------------------------------------------------------------------------------------------

STORE_SYSTEM_PROMPT = (
    "You are the shop assistant of Northwind Outfitters, an online store for hiking, camping and travel gear. "
    "Answer questions about our products, orders, shipping and returns politely and concisely. Shipping is free on "
    "orders over 50 euros; standard delivery takes 2 to 4 working days, express delivery one day. Returns are "
    "accepted within 30 days in original condition; refunds take up to 5 working days. Our products: the Alpine "
    "Trail 40 backpack (40 litres, ventilated back panel, rain cover, 129 euros); the Summit Down jacket (800-fill "
    "goose down, 310 grams, packs into its pocket, 249 euros); trail running shoes with a 6 mm drop, a rock plate "
    "and deep lugs (139 euros); merino wool crew sweaters in charcoal, navy, forest green and oatmeal (89 euros); a "
    "two-person tent, the Ridge 2, 1.6 kg, freestanding, with two doors and two vestibules (299 euros); titanium "
    "sporks, stoves and cook sets. If a customer asks about something we do not sell, say so and suggest the "
    "closest product. Never invent prices, stock levels or delivery dates. Use a friendly tone."
)


@pytest.fixture(scope="module", params=["float32", "bfloat16"])
def invariant_llm(request, model_path, test_device) -> LLM:
    from inference.worker.attention import cpu_kernels

    if test_device != "cpu":
        pytest.skip("batch invariance is a property of the CPU kernels; the CUDA path is not covered")
    if not cpu_kernels.load():
        pytest.fail(f"the C++ kernels must build here: {cpu_kernels.unavailable_reason()}")
    if request.param == "bfloat16" and not cpu_kernels.small_linear_shape()[2]:
        pytest.skip("bf16 on a CPU without AVX512-BF16: the projections run on oneDNN, whose rows may depend on "
                    "the row count; fp32 is the batch-invariant mode there")  # fmt: skip
    return LLM(str(model_path), device="cpu", dtype=request.param, enable_prefix_caching=True,
               num_gpu_blocks_override=160, max_num_seqs=8, max_num_batched_tokens=512)  # fmt: skip


def _store_prompt(tokenizer, question: str) -> list[int]:
    messages = [{"role": "system", "content": STORE_SYSTEM_PROMPT}, {"role": "user", "content": question}]
    return tokenizer.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))


def _answer(llm: LLM, prompts: list[list[int]]) -> list[tuple[int, list[int], list[float]]]:
    """(cached prompt tokens, greedy tokens, their logprobs) per prompt, in one generate call."""
    params = SamplingParams(max_tokens=24, ignore_eos=True, logprobs=0, **GREEDY)
    outs = llm.generate(prompts, params)
    return [(o.num_cached_tokens, o.outputs[0].token_ids, o.outputs[0].logprobs) for o in outs]


def test_the_answer_does_not_depend_on_the_prefix_cache_chunking_or_batch(invariant_llm: LLM, tokenizer) -> None:
    """Temperature 0, bit for bit (the sampled tokens' logprobs too, which show any difference in the logits long
    before a token flips): a prompt of a ~250-token system prompt and a question, cold, then with all its whole
    blocks from the prefix cache; a second question on the same system prompt cold (fresh cache) and after the
    first (the system prompt's blocks cached); the prompt in 64-token chunks; both prompts in one batch.
    Reported on an AMX Xeon in bf16: 'Hello there! I'm glad to help' cold, 'Hello there! I'm so glad to' cached."""
    llm, block = invariant_llm, invariant_llm.llm_engine.config.block_size
    first = _store_prompt(tokenizer, "Hi! Do you have a light tent for two people?")
    second = _store_prompt(tokenizer, "Hello, how long does express delivery take?")
    assert len(first) > 250 and first[:200] == second[:200]

    llm.reset()
    [(cached, *cold)] = _answer(llm, [first])
    [(hit, *warm)] = _answer(llm, [first])
    assert cached == 0 and hit == (len(first) - 1) // block * block
    assert warm == cold, "the same prompt answered differently from the prefix cache"

    llm.reset()
    [(cached, *second_cold)] = _answer(llm, [second])
    llm.reset()
    _answer(llm, [first])
    [(hit, *second_warm)] = _answer(llm, [second])
    assert cached == 0 and hit >= 200 // block * block
    assert second_warm == second_cold, "a prompt sharing the cached system prompt answered differently"

    llm.reset(max_num_batched_tokens=64)
    [(_, *chunked)] = _answer(llm, [first])
    assert chunked == cold, "the prompt computed in 64-token chunks answered differently"

    llm.reset()
    both = _answer(llm, [first, second])
    assert [tuple(b[1:]) for b in both] == [tuple(cold), tuple(second_cold)], "answers changed in a batch"
    llm.reset()


# --- one request's fault fails that request only (issue 39, item 3) -----------------------------------------------

_NEIGHBOURS = {
    "good-a": ("Our waterproof hiking boots are", SamplingParams(max_tokens=8, ignore_eos=True, **GREEDY)),
    "good-n": ("A gift for a cyclist could be", SamplingParams(n=2, max_tokens=8, ignore_eos=True, **GREEDY)),
}


def _finals(engine: LLMEngine, on_step=None) -> tuple[dict[str, dict[int, list[int]]], dict[str, object]]:
    """Step until idle: each request's tokens per completion index, and its last output."""
    tokens: dict[str, dict[int, list[int]]] = {}
    last: dict[str, object] = {}
    step = 0
    while engine.has_unfinished():
        for out in engine.step():
            for c in out.outputs:
                tokens.setdefault(out.request_id, {}).setdefault(c.index, []).extend(c.token_ids)
            last[out.request_id] = out
        step += 1
        if on_step is not None:
            on_step(step)
    return tokens, last


@pytest.mark.parametrize("where", ["sampler", "detokenizer"])
def test_a_fault_of_one_request_fails_it_alone_and_the_batch_goes_on(llm: LLM, monkeypatch, where: str) -> None:
    """The issue's attack made the sampler's per-request setup (torch's manual_seed) raise inside a step, and the
    whole batch failed. Here a fault is injected at the per-sequence boundary, on the faulty request's third step
    (mid-decode, blocks held): the greedy neighbours, in the same batches, produce exactly their tokens without
    it, and the faulty one ends with "error", its message and its blocks released at once."""
    engine = llm.llm_engine
    for rid, (prompt, params) in _NEIGHBOURS.items():
        engine.add_request(rid, prompt, params)
    alone, _ = _finals(engine)
    _assert_blocks_released(engine)

    for rid, (prompt, params) in _NEIGHBOURS.items():
        engine.add_request(rid, prompt, params)
    engine.add_request("faulty", "Tell me about the return policy of", SamplingParams(max_tokens=8, seed=5))
    calls = {"n": 0}
    if where == "sampler":
        setup = engine.sampler._generator

        def generator(request_id, seed, device):
            if request_id == "faulty":
                calls["n"] += 1
                if calls["n"] == 3:
                    raise ValueError("Overflow when unpacking long long")
            return setup(request_id, seed, device)

        monkeypatch.setattr(engine.sampler, "_generator", generator)
    else:
        detok = engine._by_seq["faulty"][1].detok
        update = detok.update

        def faulty_update(token_ids, stop_terminated=False):
            calls["n"] += 1
            if calls["n"] == 3:
                raise ValueError("Overflow when unpacking long long")
            return update(token_ids, stop_terminated=stop_terminated)

        monkeypatch.setattr(detok, "update", faulty_update)
    gone: list[bool] = []
    together, last = _finals(engine, lambda step: gone.append(engine.scheduler.get_request("faulty") is None))

    assert calls["n"] == 3  # the fault fired, mid-decode
    assert gone.index(True) == 2  # released in the very step that failed (the third)
    failed = last["faulty"]
    assert failed.finished and [c.finish_reason for c in failed.outputs] == ["error"]
    assert failed.error is not None and "Overflow when unpacking long long" in failed.error
    for rid in _NEIGHBOURS:
        assert together[rid] == alone[rid], rid
        assert all(c.finish_reason == "length" for c in last[rid].outputs)
    _assert_blocks_released(engine)
    assert not engine._by_seq and not engine.sampler._generators


def test_a_seed_beyond_64_bits_is_refused_and_every_int64_seed_samples(llm: LLM) -> None:
    """The issue's seed, 2**80: refused by SamplingParams (vLLM's range, a signed 64-bit integer) before any step.
    The extremes of the range sample, and so do their candidates (seed + i wraps within 64 bits)."""
    with pytest.raises(ValueError, match="signed 64-bit"):
        SamplingParams(seed=1208925819614629174706176)
    with pytest.raises(ValueError, match="signed 64-bit"):
        SamplingParams(seed=2**63)
    with pytest.raises(ValueError, match="integer"):
        SamplingParams(seed=True)
    params = [SamplingParams(n=n, seed=seed, max_tokens=3, ignore_eos=True)
              for seed, n in ((2**63 - 1, 3), (-(2**63), 2), (-1, 1))]
    outs = llm.generate(["Boots", "Socks", "Hats"], params)
    assert [len(o.outputs) for o in outs] == [3, 2, 1]
    assert all(len(c.token_ids) == 3 and c.finish_reason == "length" for o in outs for c in o.outputs)
    _assert_blocks_released(llm.llm_engine)
