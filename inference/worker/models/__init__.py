"""Model implementations, chosen by the checkpoint's architecture name."""

from __future__ import annotations

from inference.worker.loader import SUPPORTED_ARCHITECTURES, UnsupportedModelError
from inference.worker.models.llama import LlamaForCausalLM

# Mistral and Qwen2 are Llama with options (sliding window, q/k/v bias) that ModelConfig carries.
MODEL_CLASSES: dict[str, type[LlamaForCausalLM]] = {arch: LlamaForCausalLM for arch in SUPPORTED_ARCHITECTURES}


def get_model_class(architecture: str) -> type[LlamaForCausalLM]:
    try:
        return MODEL_CLASSES[architecture]
    except KeyError:
        raise UnsupportedModelError(
            f"unsupported architecture {architecture!r}; supported: {', '.join(MODEL_CLASSES)}"
        ) from None


__all__ = ["LlamaForCausalLM", "get_model_class"]
