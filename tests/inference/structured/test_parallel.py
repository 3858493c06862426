"""Structured output with tensor parallelism: the sampler (and its masks) runs once, on rank 0, over the gathered
logits, so two ranks give the one-rank tokens; an lm_head padded past the tokenizer never samples a padded id."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inference import LLM, SamplingParams
from inference.core.sampling_params import StructuredOutputsParams as S
from inference.worker.loader import load_tokenizer


@pytest.mark.slow
def test_two_ranks_constrained_equal_one_rank(tmp_path: Path, make_tiny_checkpoint, model_path: Path) -> None:
    tokenizer = load_tokenizer(model_path)
    # A random tiny model over the real vocabulary plus 2 padded lm_head rows (49,154: also not a multiple of 4).
    folder = make_tiny_checkpoint(tmp_path / "tiny", "llama", vocab_size=len(tokenizer) + 2)
    tokenizer.save_pretrained(folder)
    pattern = r"(ORD|SKU)-[0-9]{3}"
    params = [
        SamplingParams(temperature=1.0, seed=s, max_tokens=16, structured_outputs=S(regex=pattern)) for s in range(3)
    ] + [SamplingParams(temperature=1.0, seed=9, max_tokens=6, ignore_eos=True)]  # a free row in the batch
    prompts = [{"prompt_token_ids": [5 + i, 17, 300 + i, 42]} for i in range(len(params))]
    options = dict(dtype="float32", num_gpu_blocks_override=64, block_size=4, max_model_len=128)
    results = {}
    for size in (1, 2):
        llm = LLM(str(folder), tensor_parallel_size=size, **options)
        try:
            results[size] = [o.outputs[0] for o in llm.generate(prompts, params)]
            assert llm.llm_engine.structured.num_live == 0
        finally:
            llm.close()
    assert [c.token_ids for c in results[2]] == [c.token_ids for c in results[1]]
    for c in results[2][:3]:
        assert c.finish_reason == "stop" and re.fullmatch(pattern, c.text), c.text
        assert max(c.token_ids) < len(tokenizer)
