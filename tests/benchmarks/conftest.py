"""The benchmark runs the engine: the engine tests' model, tokenizer and LLM fixtures, shared."""

from tests.inference.conftest import *  # noqa: F401,F403
