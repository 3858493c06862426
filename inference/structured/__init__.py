"""Constrained decoding (structured output): a request's ``SamplingParams.structured_outputs`` is compiled into a
grammar (xgrammar, the library vLLM and SGLang use by default; docs/engine-design.md, "Structured output"), and
each of its sequences gets a matcher whose allowed-token bitmask the sampler applies to that sequence's row.

- ``errors``: ``StructuredOutputError``, raised by ``add_request`` when a constraint does not compile.
- ``keys``: the canonical cache key of a constraint.
- ``compiler``: the engine's tokenizer info and the bounded cache of compiled grammars.
- ``matchers``: the per-sequence matcher state and the registry of live matchers.
"""

from inference.structured.errors import StructuredOutputError

__all__ = ["StructuredOutputError", "StructuredOutputs"]


def __getattr__(name: str):
    # Lazy: the manager imports torch (and, on first use, xgrammar), the error class does not.
    if name == "StructuredOutputs":
        from inference.structured.matchers import StructuredOutputs

        return StructuredOutputs
    raise AttributeError(name)
