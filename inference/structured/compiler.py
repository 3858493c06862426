"""The engine's grammar compiler: xgrammar's tokenizer info (built once per engine) and a bounded LRU cache of
compiled grammars keyed by ``keys.constraint_key``, so each distinct constraint is compiled once.

Vocabulary: the tokenizer info covers ``vocab_size`` ids, the rows of the model's lm_head, which may be more than
the tokenizer's tokens (padded embeddings); xgrammar never allows an id past the tokenizer's, so a padded row is
masked off like any disallowed token.

JSON schemas are compiled without free whitespace (xgrammar's ``any_whitespace=False``: the compact separators
``", "`` and ``": "``): a small model at temperature 1 left free to pick whitespace can spend its whole token
budget on newlines, and the text is the same JSON either way.

Compact JSON holds no control character (U+0000-U+001F) at all: strings must escape them (RFC 8259, section 7)
and no whitespace but the separators' spaces is allowed. xgrammar 0.2.9's rule for a string with ``minLength`` or
``maxLength`` (any character but the quote, the backslash, CR and LF, min to max times) still admits a raw tab or
other control byte, which ``json.loads`` refuses (found by the 10,000-sample validity run: one output of 9,929,
docs/benchmark.md), so the rows of a JSON constraint are also masked with ``printable``: every token whose bytes
hold none.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from inference.core.sampling_params import StructuredOutputsParams
from inference.structured.errors import StructuredOutputError
from inference.structured.keys import ConstraintKey, constraint_key

DEFAULT_CACHE_SIZE = 128
JSON_KINDS = ("json", "json_object")  # constraints compiled as compact JSON (``printable`` applies)

# xgrammar's C++ errors start with "[hh:mm:ss] /path/file.cc:line: "; the caller gets the message after it.
_LOCATION = re.compile(r"^\[[0-9:]+\] \S+:\d+: ")


def is_json(params: StructuredOutputsParams) -> bool:
    """The constraint is compact JSON: no token with a control byte may be drawn (``GrammarCompiler.printable``)."""
    return constraint_key(params)[0] in JSON_KINDS


def printable_bitmask(decoded_vocab: list[bytes], vocab_size: int) -> Any:
    """An int32 allowed-token row in xgrammar's layout (bit ``t % 32`` of word ``t // 32``) that allows every
    token whose bytes hold no control character (< 0x20) and every id past the tokenizer's (xgrammar masks those)."""
    import numpy as np
    import torch

    words = (vocab_size + 31) // 32
    allowed = np.ones(words * 32, dtype=bool)
    for token_id, text in enumerate(decoded_vocab[:vocab_size]):
        allowed[token_id] = not any(byte < 0x20 for byte in text)
    return torch.from_numpy(np.packbits(allowed, bitorder="little").view("<i4").astype(np.int32))


def library_message(exc: BaseException) -> str:
    """The grammar library's own words, without its log prefix."""
    return _LOCATION.sub("", str(exc).strip())


class GrammarCompiler:
    """Compiles constraints for one tokenizer; ``compile`` is safe to call from several threads."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_token_ids: Iterable[int], cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        import xgrammar as xgr  # deferred: an engine that never constrains a request does not load it

        self.vocab_size = vocab_size
        self.tokenizer_info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=sorted(stop_token_ids)
        )
        # xgrammar's own cache is off: ours is keyed canonically and bounded in entries.
        self._compiler = xgr.GrammarCompiler(self.tokenizer_info, max_threads=min(8, os.cpu_count() or 1), cache_enabled=False)
        self._cache: OrderedDict[ConstraintKey, Any] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        # One lock per constraint being compiled: a second request for it waits for the first compilation instead of
        # running its own (requests compile on worker threads, ``AsyncLLM.compile_constraint``, so they can overlap).
        self._compiling: dict[ConstraintKey, threading.Lock] = {}
        self.num_compiled = 0  # compilations done (cache misses)
        self._printable: Any = None

    @property
    def printable(self) -> Any:
        """The mask a JSON constraint's rows are also ANDed with (``printable_bitmask``), built on first use."""
        if self._printable is None:
            self._printable = printable_bitmask(self.tokenizer_info.decoded_vocab, self.vocab_size)
        return self._printable

    def compile(self, params: StructuredOutputsParams) -> Any:
        """The compiled grammar of ``params`` (xgrammar's ``CompiledGrammar``); raises ``StructuredOutputError``
        with the library's message when it does not compile."""
        key = constraint_key(params)
        with self._lock:
            cached = self._cached(key)
            if cached is not None:
                return cached
            compiling = self._compiling.setdefault(key, threading.Lock())
        with compiling:
            with self._lock:
                cached = self._cached(key)  # compiled by the request this one waited for
                if cached is not None:
                    return cached
            try:
                compiled = self._compile(key)
            except StructuredOutputError:
                raise
            except Exception as exc:  # xgrammar raises RuntimeError (and ValueError for some schemas)
                raise StructuredOutputError(f"invalid {key[0]} constraint: {library_message(exc)}") from exc
            finally:
                with self._lock:
                    self._compiling.pop(key, None)
            with self._lock:
                self.num_compiled += 1
                self._cache[key] = compiled
                self._cache.move_to_end(key)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return compiled

    def _cached(self, key: ConstraintKey) -> Any:
        """The compiled grammar of ``key`` if cached (marked recently used), else None; under ``_lock``."""
        if key not in self._cache:
            return None
        self._cache.move_to_end(key)
        return self._cache[key]

    def _compile(self, key: ConstraintKey) -> Any:
        kind, text = key
        if kind == "json":
            return self._compiler.compile_json_schema(text, any_whitespace=False)
        if kind == "structural_tag":
            return self._compiler.compile_structural_tag(text)
        if kind == "json_object":
            return self._compiler.compile_json_schema('{"type": "object"}', any_whitespace=False)
        if kind == "regex":
            return self._compiler.compile_regex(text)
        if kind == "choice":
            # One EBNF alternative per string; JSON's string escapes are EBNF's.
            alternatives = " | ".join(json.dumps(c, ensure_ascii=False) for c in json.loads(text))
            return self._compiler.compile_grammar(f"root ::= {alternatives}")
        return self._compiler.compile_grammar(text)

    def cache_len(self) -> int:
        return len(self._cache)
