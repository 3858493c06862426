"""Greedy parity on the 1.5B (Qwen2.5-Coder-1.5B-Instruct, ``qwen2.5-1.5b``): the engine in fp32 equals transformers'
own fp32 model token for token, both on the same weights (the bf16 cache, upcast to fp32 at load by each).

Checked the way tests/inference/test_parity.py checks the bundled model (its ``Reference``: one teacher-forced
forward of transformers' model over prompt + the engine's tokens). A 1.5B in fp32 is 7.1 GB, so the two never
coexist: the engine generates everything first and is freed, then the reference loads.
Heavy: 4 held-out prompts x 24 tokens, in two engine configurations, a few minutes on 2 cores.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest
import torch

from inference import LLM
from inference.worker.loader import load_tokenizer, resolve_model
from tests.inference.test_parity import PRODUCTS, Reference, _greedy, _tokens

MODEL = "qwen2.5-1.5b"
NEW_TOKENS = 24
BLOCK = 16
SYSTEM = "You are the shop assistant of an outdoor and home goods store. Answer briefly and only from the catalog."
QUESTIONS = [  # held out: the model saw none of these in the engine's other tests
    "Is the Alpine Trail 40 big enough for a weekend hike?",
    "Can I put the Dutch oven in a 250 °C oven?",
    "Write a Python function that sums the prices in a shopping cart.",
]


def _prompts(tokenizer: Any) -> list[list[int]]:
    """Three chat prompts sharing a system prompt (so the prefix cache has blocks to share), and one plain text."""
    chats = [
        tokenizer.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}],
                                      add_generation_prompt=True, tokenize=False)
        for q in QUESTIONS
    ]
    return [tokenizer.encode(text) for text in chats] + [tokenizer.encode(" ".join(PRODUCTS[:2]))]


def _engine_tokens(path: Any, prompts: list[list[int]]) -> dict[str, list[list[int]]]:
    """Every configuration's tokens; the engine is gone when this returns."""
    llm = LLM(str(path), device="cpu", dtype="float32", block_size=BLOCK, max_model_len=512,
              num_gpu_blocks_override=160, max_num_seqs=8, max_num_batched_tokens=512, enable_prefix_caching=False)
    params = _greedy(NEW_TOKENS)
    runs = {"batch": _tokens(llm.generate(prompts, params))}
    # Small prefill chunks, and a prefix cache warmed by the first prompt: the others reuse the system prompt.
    llm.reset(enable_prefix_caching=True, max_num_batched_tokens=32)
    llm.generate(prompts[:1], params)
    outputs = llm.generate(prompts, params)
    runs["chunked prefill + prefix cache"] = _tokens(outputs)
    assert all(o.num_cached_tokens >= BLOCK for o in outputs[:3])  # the system prompt's first block at least
    del llm, outputs
    gc.collect()
    return runs


@pytest.mark.heavy
@pytest.mark.untimed
def test_qwen_1_5b_fp32_greedy_parity() -> None:
    from transformers import AutoModelForCausalLM

    path = resolve_model(MODEL)
    prompts = _prompts(load_tokenizer(path))
    runs = _engine_tokens(path, prompts)
    reference = Reference(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval(), NEW_TOKENS)
    for label, tokens in runs.items():
        for i, (prompt, generated) in enumerate(zip(prompts, tokens)):
            reference.check(prompt, generated, f"{label} #{i}")
    print(f"qwen2.5-1.5b parity: {reference.checked} tokens checked, {reference.ties} near-ties")
    assert reference.ties <= 1
