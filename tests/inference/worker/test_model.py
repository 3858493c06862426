"""Our Llama-family forward on the paged cache against transformers' full forward (no cache)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from inference.core.config import EngineConfig
from inference.worker.model_runner import ModelRunner
from inference.worker.models.llama import rope_inv_freq

ATOL = 1e-3  # fp32 logits of the bundled model span about +-30


@pytest.fixture(scope="module")
def runner(model_path: Path, test_device: str) -> ModelRunner:
    config = EngineConfig(device=test_device, dtype="float32", num_gpu_blocks_override=400, max_model_len=1024)
    return ModelRunner(config)


def reference_logits(hf_model, token_ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return hf_model(torch.tensor([token_ids])).logits[0]


def chat_prompt(tokenizer, text: str) -> list[int]:
    messages = [{"role": "user", "content": text}]
    rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(rendered, add_special_tokens=False)["input_ids"]


def test_prefill_then_decode_matches_transformers(runner, hf_model, tokenizer, step_helper) -> None:
    helper = step_helper(runner.num_blocks, runner.block_size, seed=1)
    prompt = chat_prompt(tokenizer, "Do you sell waterproof hiking boots in size 44?")
    seq = helper.new_seq("a", prompt)
    logits = helper.step(runner, [(seq, len(prompt))])
    for _ in range(6):
        expected = reference_logits(hf_model, seq.token_ids)[-1]
        assert logits.shape == (1, expected.shape[0])
        torch.testing.assert_close(logits[0].cpu(), expected, atol=ATOL, rtol=0)
        # Follow the reference's greedy choice so both stay on the same text.
        seq.append_token(int(expected.argmax()))
        logits = helper.step(runner, [(seq, 1)])


def test_chunked_prefill_matches_transformers(runner, hf_model, tokenizer, step_helper) -> None:
    helper = step_helper(runner.num_blocks, runner.block_size, seed=2)
    prompt = chat_prompt(tokenizer, "What is your return policy for opened electronics, and who pays shipping?")
    seq = helper.new_seq("a", prompt)
    chunks = [13, 20, len(prompt) - 33]  # chunk edges fall mid-block
    for n in chunks[:-1]:
        assert helper.step(runner, [(seq, n)]).shape[0] == 0  # mid-prompt chunks sample nothing
    logits = helper.step(runner, [(seq, chunks[-1])])
    torch.testing.assert_close(logits[0].cpu(), reference_logits(hf_model, prompt)[-1], atol=ATOL, rtol=0)


def test_mixed_batch_equals_each_sequence_alone(runner, hf_model, step_helper) -> None:
    helper = step_helper(runner.num_blocks, runner.block_size, seed=3)
    gen = torch.Generator().manual_seed(0)

    def tokens(n: int) -> list[int]:
        return torch.randint(0, 49152, (n,), generator=gen).tolist()

    a = helper.new_seq("a", tokens(40))  # a first prefill chunk that does not reach the end
    b = helper.new_seq("b", tokens(50))  # the continuation chunk of a started prompt
    c = helper.new_seq("c", tokens(30))  # decodes
    d = helper.new_seq("d", tokens(12))
    helper.step(runner, [(b, 23)])
    for seq in (c, d):
        logits = helper.step(runner, [(seq, seq.num_tokens)])
        seq.append_token(int(logits[0].argmax()))

    batch = [(c, 1), (d, 1), (b, 27), (a, 17)]  # scheduler order: decodes, then prefill chunks
    from inference.core.scheduler import ScheduledSeq, SchedulerOutput

    output = SchedulerOutput([ScheduledSeq(s, n) for s, n in batch])
    assert ModelRunner.sampling_sequences(output) == [c, d, b]
    mixed = runner.execute(output).cpu()
    assert mixed.shape[0] == 3

    # Same step, one sequence at a time (rewriting the same K/V into the same slots).
    for row, (seq, n) in enumerate(batch[:3]):
        alone = runner.execute(SchedulerOutput([ScheduledSeq(seq, n)])).cpu()
        torch.testing.assert_close(mixed[row], alone[0], atol=1e-4, rtol=0)
        torch.testing.assert_close(mixed[row], reference_logits(hf_model, seq.token_ids)[-1], atol=ATOL, rtol=0)

    # a's chunk in the mixed step must have stored the right K/V: finish it and compare.
    a.num_computed_tokens = 17
    logits = helper.step(runner, [(a, 23)])
    torch.testing.assert_close(logits[0].cpu(), reference_logits(hf_model, a.token_ids)[-1], atol=ATOL, rtol=0)


TINY_CASES = {
    "llama-untied": ("llama", {"tie_word_embeddings": False}),
    "llama-tied": ("llama", {"tie_word_embeddings": True}),
    "llama-bias": ("llama", {"attention_bias": True}),
    "llama3-rope": ("llama", {"rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                    "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}),
    "linear-rope": ("llama", {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}),
    "qwen2": ("qwen2", {"tie_word_embeddings": True}),
    "mistral": ("mistral", {"sliding_window": None, "head_dim": 24}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(TINY_CASES))
def test_tiny_checkpoints_match_transformers(case, tmp_path, make_tiny_checkpoint, step_helper, test_device) -> None:
    from transformers import AutoModelForCausalLM

    arch, overrides = TINY_CASES[case]
    path = make_tiny_checkpoint(tmp_path / case, arch, **overrides)
    config = EngineConfig(model=str(path), device=test_device, dtype="float32", block_size=4,
                          num_gpu_blocks_override=64, max_model_len=128)  # fmt: skip
    runner = ModelRunner(config)
    reference = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    helper = step_helper(runner.num_blocks, runner.block_size, seed=4)
    prompt = torch.randint(0, 96, (70,), generator=torch.Generator().manual_seed(5)).tolist()
    seq = helper.new_seq("a", prompt, max_len=80)
    helper.step(runner, [(seq, 33)])
    logits = helper.step(runner, [(seq, len(prompt) - 33)])
    for _ in range(3):
        expected = reference_logits(reference, seq.token_ids)[-1]
        torch.testing.assert_close(logits[0].cpu(), expected, atol=1e-4, rtol=1e-4)
        seq.append_token(int(expected.argmax()))
        logits = helper.step(runner, [(seq, 1)])


@pytest.mark.parametrize(
    "scaling",
    [
        {"rope_type": "linear", "factor": 4.0},
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 64},
    ],
)  # fmt: skip
def test_rope_inverse_frequencies_match_transformers(scaling) -> None:
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = LlamaConfig(hidden_size=512, num_attention_heads=4, rope_theta=500000.0, rope_scaling=dict(scaling),
                         max_position_embeddings=4096)  # fmt: skip
    expected, _ = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](config, "cpu")
    ours = rope_inv_freq(128, 500000.0, scaling)
    plain = rope_inv_freq(128, 500000.0, None)
    torch.testing.assert_close(ours, expected.float(), rtol=1e-6, atol=0)
    assert not torch.allclose(ours, plain)  # the scaling really changes something
