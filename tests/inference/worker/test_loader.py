"""Loader: the bundled GGUF converted once into a cached Hugging Face folder, and checkpoint configs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from inference.worker import loader
from inference.worker.loader import (
    SOURCE_MARKER,
    UnsupportedModelError,
    load_model_config,
    load_tokenizer,
    load_weights,
    resolve_model,
)


def _no_conversion(*args, **kwargs):
    raise AssertionError("the GGUF was read again although a complete cache exists")


def test_bundled_model_cache_is_complete_and_reused(model_path: Path, monkeypatch) -> None:
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json", SOURCE_MARKER):
        assert (model_path / name).is_file(), name
    assert "quantization_config" not in json.loads((model_path / "config.json").read_text())
    monkeypatch.setattr(loader, "convert_gguf", _no_conversion)
    start = time.perf_counter()
    assert resolve_model(None) == model_path
    assert time.perf_counter() - start < 1.0


def test_bundled_model_config_and_weights(model_path: Path) -> None:
    config, weights = load_weights(model_path, torch.float32)
    assert (config.architecture, config.num_hidden_layers, config.hidden_size) == ("LlamaForCausalLM", 30, 576)
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (9, 3, 64)
    assert config.vocab_size == 49152 and config.tie_word_embeddings and config.rope_scaling is None
    assert 2 in config.eos_token_ids
    assert weights["model.layers.29.self_attn.k_proj.weight"].shape == (192, 576)
    assert len(weights) == 2 + 30 * 9  # embeddings, final norm, 9 tensors per layer (lm_head is tied)


def test_a_converted_gguf_ends_at_every_end_of_generation_token_a_plain_folder_at_its_own(
    model_path: Path, tmp_path: Path, make_tiny_checkpoint
) -> None:
    """As llama.cpp runs a GGUF: its one eos plus the special tokens it ends a generation at by their text
    (SmolLM2's ``<|endoftext|>``, id 0; Qwen2.5 ends a tool call with its own). A Hugging Face folder's
    generation config is taken as it is (vLLM's rule)."""
    assert json.loads((model_path / "generation_config.json").read_text())["eos_token_id"] == 2
    assert load_model_config(model_path).eos_token_ids == [2, 0]
    plain = make_tiny_checkpoint(tmp_path / "tiny", "qwen2")
    own = load_model_config(plain).eos_token_ids
    added = [{"id": 90, "content": "<|endoftext|>", "special": True}, {"id": 91, "content": "<|im_end|>",
             "special": True}, {"id": 92, "content": "<tool_call>", "special": False},
             {"id": 93, "content": "<|endoftext|>x", "special": True}]
    (plain / "tokenizer.json").write_text(json.dumps({"added_tokens": added}))
    assert load_model_config(plain).eos_token_ids == own
    (plain / SOURCE_MARKER).write_text("{}")  # the same folder, as if converted from a GGUF
    assert load_model_config(plain).eos_token_ids == own + [90, 91]


def test_load_weights_casts_to_the_requested_dtype(tmp_path: Path, make_tiny_checkpoint) -> None:
    path = make_tiny_checkpoint(tmp_path / "tiny", "qwen2")
    config, weights = load_weights(path, torch.float16)
    assert config.architecture == "Qwen2ForCausalLM"
    assert all(t.dtype == torch.float16 for t in weights.values())
    assert "model.layers.0.self_attn.q_proj.bias" in weights


def test_bundled_tokenizer_has_chat_template(model_path: Path) -> None:
    tokenizer = load_tokenizer(model_path)
    messages = [{"role": "user", "content": "hi"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n")
    assert tokenizer.convert_tokens_to_ids(tokenizer.eos_token) == 2


@pytest.mark.slow
def test_cold_conversion_then_warm_start(tmp_path: Path, monkeypatch, model_path: Path) -> None:
    monkeypatch.setenv(loader.CACHE_ENV, str(tmp_path))
    start = time.perf_counter()
    path = resolve_model(None)
    cold = time.perf_counter() - start
    assert path == tmp_path / loader.BUNDLED_MODEL_NAME
    assert [p.name for p in tmp_path.iterdir()] == [loader.BUNDLED_MODEL_NAME]  # no temp folder left
    _, fresh = load_weights(path, torch.float32)
    _, cached = load_weights(model_path, torch.float32)
    assert fresh.keys() == cached.keys()
    assert all(torch.equal(fresh[name], cached[name]) for name in fresh)

    monkeypatch.setattr(loader, "convert_gguf", _no_conversion)
    start = time.perf_counter()
    assert resolve_model(None) == path
    load_weights(path, torch.float32)
    warm = time.perf_counter() - start
    print(f"bundled model: cold start {cold:.1f}s (GGUF dequantize + save), warm start {warm:.2f}s")
    assert warm < cold / 5


def _fake_converter(calls: list[str], fail: bool = False):
    def convert(gguf: Path, out_dir: Path, dtype: torch.dtype) -> None:
        calls.append(out_dir.name)
        (out_dir / "config.json").write_text("{}")
        if fail:
            raise RuntimeError("crash halfway through")
        (out_dir / "model.safetensors").write_bytes(b"weights")

    return convert


def test_crashed_conversion_leaves_no_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(loader.CACHE_ENV, str(tmp_path))
    calls: list[str] = []
    monkeypatch.setattr(loader, "convert_gguf", _fake_converter(calls, fail=True))
    with pytest.raises(RuntimeError, match="halfway"):
        resolve_model(None)
    assert list(tmp_path.iterdir()) == []  # neither the target nor the temporary folder

    monkeypatch.setattr(loader, "convert_gguf", _fake_converter(calls))
    path = resolve_model(None)
    assert (path / "model.safetensors").read_bytes() == b"weights"
    assert resolve_model(None) == path
    assert len(calls) == 2  # the crash, then one successful conversion; the last call reused it


def test_stale_cache_is_replaced(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(loader.CACHE_ENV, str(tmp_path))
    target = tmp_path / loader.BUNDLED_MODEL_NAME
    target.mkdir()
    (target / "leftover.bin").write_bytes(b"old")
    (target / SOURCE_MARKER).write_text(json.dumps({"gguf": "older.gguf", "size": 1, "mtime_ns": 1}))
    calls: list[str] = []
    monkeypatch.setattr(loader, "convert_gguf", _fake_converter(calls))
    assert resolve_model(None) == target
    assert len(calls) == 1 and not (target / "leftover.bin").exists()


def test_resolve_model_paths(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        resolve_model(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="config.json"):
        resolve_model(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model(str(tmp_path)) == tmp_path


def test_unknown_architecture_is_a_clear_error(tmp_path: Path) -> None:
    from transformers import GPT2Config

    GPT2Config(architectures=["GPT2LMHeadModel"]).save_pretrained(tmp_path)
    with pytest.raises(UnsupportedModelError, match="GPT2LMHeadModel.*supported: LlamaForCausalLM"):
        load_model_config(tmp_path)


def test_unsupported_rope_scaling_is_a_clear_error(tmp_path: Path) -> None:
    from transformers import LlamaConfig

    rope = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64}
    LlamaConfig(architectures=["LlamaForCausalLM"], rope_scaling=rope).save_pretrained(tmp_path)
    with pytest.raises(UnsupportedModelError, match="'yarn'"):
        load_model_config(tmp_path)


def test_family_options_are_normalised(tmp_path: Path) -> None:
    from transformers import MistralConfig, Qwen2Config

    qwen_config = Qwen2Config(architectures=["Qwen2ForCausalLM"], hidden_size=64, num_attention_heads=4)
    qwen_config.save_pretrained(tmp_path / "q")
    qwen = load_model_config(tmp_path / "q")
    assert (qwen.qkv_bias, qwen.o_proj_bias, qwen.head_dim, qwen.sliding_window) == (True, False, 16, None)
    MistralConfig(architectures=["MistralForCausalLM"], sliding_window=512).save_pretrained(tmp_path / "m")
    mistral = load_model_config(tmp_path / "m")
    assert (mistral.qkv_bias, mistral.sliding_window) == (False, 512)


@pytest.mark.slow
def test_gguf_conversion_equals_transformers_own_gguf_loading(tmp_path: Path) -> None:
    """Our tensor-at-a-time conversion gives transformers' own dequantized weights bit for bit (names, llama.cpp's
    q/k row order undone, shapes), and a config and tokenizer that load."""
    from transformers import AutoModelForCausalLM

    gguf = loader.bundled_gguf()
    loader.convert_gguf(gguf, tmp_path, torch.float32)
    _, ours = load_weights(tmp_path, torch.float32)
    theirs = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).state_dict()
    theirs.pop("lm_head.weight")  # tied to the embeddings
    assert ours.keys() == theirs.keys()
    assert [n for n in ours if not torch.equal(ours[n], theirs[n])] == []
    assert load_model_config(tmp_path).architecture == "LlamaForCausalLM"
    assert load_tokenizer(tmp_path).encode("Hello there") == load_tokenizer(loader.resolve_model(None)).encode(
        "Hello there")


def test_named_models_and_the_prepare_command(model_path: Path, capsys) -> None:
    assert resolve_model("smollm2-135m") == model_path
    loader.main(["--prepare", "smollm2-135m"])
    assert capsys.readouterr().out.strip() == str(model_path)
    with pytest.raises(FileNotFoundError, match="known name.*qwen2.5-1.5b"):
        resolve_model("qwen2.5-15b")
