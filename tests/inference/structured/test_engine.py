"""Structured output through the engine on the bundled SmolLM2-135M: every output satisfies its constraint
(sampled at temperature 1 with seeds), free rows are unaffected by constrained ones, constraints that do not
compile are refused at add_request, and matchers live exactly as long as their sequences."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks.structured_schemas import SCHEMAS, validate
from inference import LLM, SamplingParams
from inference.core.sampling_params import StructuredOutputsParams as S
from inference.structured import StructuredOutputError

SHORT = {name: (schema, ask) for name, schema, ask in SCHEMAS}


def _chat(tokenizer, text: str) -> str:
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)


def _json_prompt(tokenizer, ask: str) -> str:
    return _chat(tokenizer, f"Reply with JSON only: {ask}.")


def _assert_no_live_matchers(llm: LLM) -> None:
    assert llm.llm_engine.structured.num_live == 0
    assert not llm.llm_engine.has_unfinished()


@pytest.mark.parametrize("name", ["product", "sku", "category", "cart_line", "order_status", "tags"])
def test_sampled_json_parses_and_validates(llm: LLM, tokenizer, name: str) -> None:
    schema, ask = SHORT[name]
    params = [SamplingParams(temperature=1.0, seed=s, max_tokens=160, structured_outputs=S(json=schema)) for s in range(4)]
    outs = llm.generate([_json_prompt(tokenizer, ask)] * len(params), params)
    for out in outs:
        c = out.outputs[0]
        assert c.finish_reason == "stop", c.text
        assert validate(json.loads(c.text), schema) == [], c.text
        assert c.token_ids[-1] in llm.llm_engine.eos_token_ids  # the grammar ended it with the end token
    _assert_no_live_matchers(llm)


def test_regex_choice_grammar_and_json_object(llm: LLM, tokenizer) -> None:
    prompt = _chat(tokenizer, "Name a product code, then say if it is in stock.")
    grammar = 'root ::= "Answer: " ("in stock" | "sold out") " (" [0-9] [0-9]? " left)"'
    cases = [
        (prompt, S(regex=r"[A-Z]{3}-[0-9]{4}"), lambda t: re.fullmatch(r"[A-Z]{3}-[0-9]{4}", t)),
        (prompt, S(choice=("in stock", "sold out", 'say "maybe"')), lambda t: t in ("in stock", "sold out", 'say "maybe"')),
        (prompt, S(grammar=grammar), lambda t: re.fullmatch(r"Answer: (in stock|sold out) \([0-9][0-9]? left\)", t)),
    ]
    for seed in range(3):
        params = [SamplingParams(temperature=1.0, seed=seed, max_tokens=120, structured_outputs=so) for _, so, _ in cases]
        outs = llm.generate([p for p, _, _ in cases], params)
        for (_, so, check), out in zip(cases, outs):
            c = out.outputs[0]
            assert c.finish_reason == "stop" and check(c.text), (so, c.text)
    # Any JSON object: free-form, so the small model rambles at temperature 1; cooler, it closes its object.
    json_prompt = _chat(tokenizer, 'Copy this JSON object exactly: {"product": "tent", "price": 120}')
    params = [SamplingParams(temperature=0.3, seed=s, max_tokens=120, structured_outputs=S(json_object=True)) for s in range(3)]
    for out in llm.generate([json_prompt] * 3, params):
        c = out.outputs[0]
        assert c.finish_reason == "stop" and isinstance(json.loads(c.text), dict), c.text
    _assert_no_live_matchers(llm)


@pytest.fixture
def no_jump_forward(llm: LLM):
    """The engine decoding every token with the model (forced spans too), as with jump-forward off."""
    config = llm.llm_engine.config
    config.structured_jump_forward = False
    yield llm
    config.structured_jump_forward = True


def test_greedy_constrained_equals_free_greedy_when_the_free_text_already_fits(no_jump_forward: LLM, tokenizer) -> None:
    """The mask must not disturb the allowed tokens' logits: a constraint the free greedy answer satisfies gives
    exactly the free greedy tokens, end token included (every token decoded: jump-forward splits a forced span
    its own way)."""
    llm = no_jump_forward
    prompt = _chat(tokenizer, "What is the capital of France? Answer with one word.")
    free = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=24))[0].outputs[0]
    assert free.finish_reason == "stop" and free.text
    for so in (S(choice=("Berlin", free.text, "Madrid")), S(regex=re.escape(free.text))):
        c = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=24, structured_outputs=so))[0].outputs[0]
        assert (c.token_ids, c.text, c.finish_reason) == (free.token_ids, free.text, "stop")


def _model_steps(llm: LLM, prompts: list[str], params: list[SamplingParams]) -> tuple[list, int]:
    runner = llm.llm_engine.runner
    execute, steps = runner.execute, [0]

    def counted(*args, **kwargs):
        steps[0] += 1
        return execute(*args, **kwargs)

    runner.execute = counted
    try:
        return llm.generate(prompts, params), steps[0]
    finally:
        runner.execute = execute


def test_jump_forward_skips_the_model_steps_of_forced_spans_and_the_output_still_validates(llm: LLM, tokenizer) -> None:
    """A schema's keys and punctuation come without a model step each: fewer steps for the same valid JSON, and
    a const string is written whole after its first token."""
    schema, ask = SHORT["cart_line"]
    prompt = _json_prompt(tokenizer, ask)
    params = SamplingParams(temperature=0, max_tokens=160, structured_outputs=S(json=schema))
    (jumped,), jumped_steps = _model_steps(llm, [prompt], [params])
    llm.llm_engine.config.structured_jump_forward = False
    try:
        (stepped,), stepped_steps = _model_steps(llm, [prompt], [params])
    finally:
        llm.llm_engine.config.structured_jump_forward = True
    for out in (jumped, stepped):
        c = out.outputs[0]
        assert c.finish_reason == "stop" and validate(json.loads(c.text), schema) == [], c.text
    # Not always the same values: the forced span's tokens are split as xgrammar splits them, and the model
    # goes on from those tokens.
    assert jumped_steps < stepped_steps * 0.8, (jumped_steps, stepped_steps)
    const = {"type": "object", "properties": {"tool": {"const": "search_products"}, "n": {"type": "integer"}},
             "required": ["tool", "n"], "additionalProperties": False}
    (out,), steps = _model_steps(llm, [prompt], [SamplingParams(temperature=0, max_tokens=64, structured_outputs=S(json=const))])
    value = json.loads(out.outputs[0].text)
    assert value["tool"] == "search_products" and isinstance(value["n"], int)
    assert steps < len(out.outputs[0].token_ids), (steps, len(out.outputs[0].token_ids))
    _assert_no_live_matchers(llm)


def test_a_free_request_in_a_mixed_batch_is_unchanged(llm: LLM, tokenizer) -> None:
    free_prompt = _chat(tokenizer, "Suggest a name for a tent.")
    free_params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    alone = llm.generate(free_prompt, free_params)[0].outputs[0].token_ids
    schema, ask = SHORT["rating"]
    constrained = [SamplingParams(temperature=1.0, seed=s, max_tokens=64, structured_outputs=S(json=schema)) for s in range(3)]
    outs = llm.generate([free_prompt, *[_json_prompt(tokenizer, ask)] * 3], [free_params, *constrained])
    assert outs[0].outputs[0].token_ids == alone
    _assert_no_live_matchers(llm)


def test_each_parallel_candidate_has_its_own_matcher(llm: LLM, tokenizer) -> None:
    schema, ask = SHORT["intent"]
    params = SamplingParams(n=3, best_of=4, temperature=1.0, seed=7, max_tokens=96, structured_outputs=S(json=schema))
    (out,) = llm.generate(_json_prompt(tokenizer, ask), params)
    assert len(out.outputs) == 3
    for c in out.outputs:
        assert c.finish_reason == "stop" and validate(json.loads(c.text), schema) == [], c.text
    assert len({c.text for c in out.outputs}) > 1  # the candidates did sample apart
    _assert_no_live_matchers(llm)


@pytest.mark.parametrize(
    "so, message",
    [
        (S(json={"type": "object", "properties": {"a": {"type": "nonsense"}}}), 'Unsupported type "nonsense"'),
        (S(regex="[a-"), "Regex parsing error"),
        (S(grammar="root ::= undefined_rule"), "is not defined"),
    ],
)
def test_a_constraint_that_does_not_compile_is_refused_before_queueing(llm: LLM, so: S, message: str) -> None:
    engine = llm.llm_engine
    with pytest.raises(StructuredOutputError, match=message):
        engine.add_request("bad", "Hi", SamplingParams(n=2, structured_outputs=so))
    _assert_no_live_matchers(llm)
    engine.add_request("bad", "Hi", SamplingParams(max_tokens=2))  # the id was never taken
    while engine.has_unfinished():
        engine.step()


def test_matchers_are_freed_on_abort_and_survive_preemption(llm: LLM, tokenizer) -> None:
    engine = llm.llm_engine
    schema, ask = SHORT["cart"]
    engine.add_request("a", _json_prompt(tokenizer, ask), SamplingParams(n=3, max_tokens=64, structured_outputs=S(json=schema)))
    engine.step()
    engine.step()
    assert engine.structured.num_live == 3
    assert engine.abort("a")
    assert engine.structured.num_live == 0
    while engine.has_unfinished():
        engine.step()

    # Recompute preemption: few blocks, many long constrained requests. Each sequence keeps its tokens and its
    # matcher; the outputs equal those of a run with blocks to spare.
    prompts = [_json_prompt(tokenizer, SHORT[n][1]) for n in ("product", "bundle", "address", "stock")]
    params = [
        SamplingParams(temperature=1.0, seed=i, max_tokens=96, structured_outputs=S(json=SHORT[n][0]))
        for i, n in enumerate(("product", "bundle", "address", "stock"))
    ]
    roomy = llm.generate(prompts, params)
    engine.reset(num_gpu_blocks_override=14)
    try:
        tight = llm.generate(prompts, params)
        assert engine.snapshot().num_preemptions > 0
    finally:
        engine.reset(num_gpu_blocks_override=None)
    assert [o.outputs[0].token_ids for o in tight] == [o.outputs[0].token_ids for o in roomy]
    for out, (name) in zip(tight, ("product", "bundle", "address", "stock")):
        if out.outputs[0].finish_reason == "stop":
            assert validate(json.loads(out.outputs[0].text), SHORT[name][0]) == []
    _assert_no_live_matchers(llm)


def test_a_tool_call_schema_picks_one_tool_and_fills_its_arguments(llm: LLM, tokenizer) -> None:
    """The shape /v1 can give a forced tool call: anyOf one object per tool, its name a const."""
    tools = {
        "search_products": {"type": "object", "properties": {"query": {"type": "string", "maxLength": 30},
                                                             "max_price": {"type": "number", "minimum": 0}},
                            "required": ["query"], "additionalProperties": False},
        "order_status": {"type": "object", "properties": {"order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"}},
                         "required": ["order_id"], "additionalProperties": False},
    }
    schema = {"anyOf": [
        {"type": "object", "properties": {"name": {"const": name}, "arguments": args},
         "required": ["name", "arguments"], "additionalProperties": False}
        for name, args in tools.items()
    ]}
    prompt = _chat(tokenizer, "Find me a tent under 200 dollars. Call a tool.")
    params = [SamplingParams(temperature=1.0, seed=s, max_tokens=96, structured_outputs=S(json=schema)) for s in range(4)]
    for out in llm.generate([prompt] * 4, params):
        c = out.outputs[0]
        assert c.finish_reason == "stop", c.text
        call = json.loads(c.text)
        assert set(call) == {"name", "arguments"} and call["name"] in tools
        assert validate(call["arguments"], tools[call["name"]]) == [], c.text
    _assert_no_live_matchers(llm)
