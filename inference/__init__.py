"""Shop Assistant's LLM serving engine (PagedAttention-style, after vLLM and nano-vllm).

``from inference import LLM, SamplingParams, AsyncLLM, EngineConfig``. Exports are resolved lazily so that
importing a submodule (or the web app importing this package) does not load torch until it is needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "EngineConfig": "inference.core.config",
    "SamplingParams": "inference.core.sampling_params",
    "LLM": "inference.llm",
    "LLMEngine": "inference.engine",
    "AsyncLLM": "inference.async_engine",
    "RequestStream": "inference.async_engine",
    "EngineDeadError": "inference.async_engine",
    "RequestOutput": "inference.outputs",
    "CompletionOutput": "inference.outputs",
    "RequestMetrics": "inference.outputs",
    "StreamDelta": "inference.outputs",
    "Usage": "inference.outputs",
    "RequestTooLongError": "inference.core.scheduler",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from inference.async_engine import AsyncLLM, EngineDeadError, RequestStream
    from inference.core.config import EngineConfig
    from inference.engine import LLMEngine
    from inference.llm import LLM
    from inference.outputs import CompletionOutput, RequestMetrics, RequestOutput, StreamDelta, Usage
    from inference.core.sampling_params import SamplingParams
    from inference.core.scheduler import RequestTooLongError


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'inference' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
