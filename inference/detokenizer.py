"""Incremental detokenizer: turns each step's new tokens into text deltas and finds stop strings.

Decoding a growing token list one token at a time is not concatenative (byte-level BPE tokens can end in the
middle of a UTF-8 character; SentencePiece drops a leading space at the start of a decode), so, as vLLM does,
each step decodes a short window twice: ``tokens[prefix:read]`` (already emitted) and ``tokens[prefix:]``, and
the difference is the new text. A window that ends in U+FFFD is an incomplete character and waits for the
next token. A few prompt tokens seed the window so the first output token gets its leading space right.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from inference.core.sampling_params import SamplingParams

# Prompt tokens kept as context for the first output token (vLLM uses 5 as well).
_PROMPT_CONTEXT = 5
_REPLACEMENT = "\ufffd"


class _Decoder(Protocol):
    def decode(self, ids: list[int], skip_special_tokens: bool = ...) -> str: ...


def fast_decoder(tokenizer: Any) -> _Decoder:
    """The Rust ``tokenizers.Tokenizer`` behind an HF fast tokenizer (no Python-side clean-up), else itself."""
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    return backend if backend is not None and hasattr(backend, "decode") else tokenizer


class IncrementalDetokenizer:
    """Per-sequence text state. Call ``update`` with each new token, then ``get_delta`` for the text to emit."""

    def __init__(
        self,
        decoder: _Decoder,
        prompt_token_ids: Sequence[int],
        params: SamplingParams,
        skip_special_tokens: bool = True,
    ) -> None:
        self._decoder = decoder
        self._skip_special = skip_special_tokens
        self._tokens: list[int] = list(prompt_token_ids[-_PROMPT_CONTEXT:])
        self._prefix_offset = 0
        self._read_offset = len(self._tokens)
        self._stop = [s for s in (params.stop or []) if s]
        self._include_stop = params.include_stop_str_in_output
        self._min_tokens = params.min_tokens
        self._num_output_tokens = 0
        self._sent = 0  # characters of output_text already handed out
        self.output_text = ""
        self.stop_reason: str | None = None

    def _decode(self, ids: list[int]) -> str:
        return self._decoder.decode(ids, skip_special_tokens=self._skip_special)

    def _decode_new(self, flush: bool) -> str:
        """Text of the tokens after ``read_offset``; held back (empty) while it ends in an incomplete character."""
        prefix_text = self._decode(self._tokens[self._prefix_offset : self._read_offset])
        full_text = self._decode(self._tokens[self._prefix_offset :])
        if len(full_text) <= len(prefix_text) or (full_text.endswith(_REPLACEMENT) and not flush):
            return ""
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._tokens)
        return full_text[len(prefix_text) :]

    def update(self, new_token_ids: Sequence[int], stop_terminated: bool = False) -> str | None:
        """Append tokens; returns the stop string when one now appears in the text (which is then cut).

        ``stop_terminated``: the last token is a stop token (EOS or stop_token_ids); its text is left out
        unless include_stop_str_in_output, and any incomplete character is flushed.
        """
        ids = list(new_token_ids)
        self._num_output_tokens += len(ids)
        if stop_terminated and not self._include_stop and ids:
            ids = ids[:-1]
        if self.stop_reason is not None:
            return self.stop_reason
        start = len(self.output_text)
        for token_id in ids:
            self._tokens.append(token_id)
        self.output_text += self._decode_new(flush=stop_terminated)
        if not self._stop or self._num_output_tokens <= self._min_tokens:
            return None
        return self._check_stop_strings(start)

    def flush(self) -> None:
        """At finish for another reason (length, abort): emit a trailing incomplete character as U+FFFD."""
        if self.stop_reason is None and self._read_offset < len(self._tokens):
            self.output_text += self._decode_new(flush=True)

    def _check_stop_strings(self, new_from: int) -> str | None:
        best: tuple[int, str] | None = None
        for stop in self._stop:
            # A stop string may begin in earlier text and end in the new text.
            idx = self.output_text.find(stop, max(0, new_from - len(stop) + 1))
            if idx >= 0 and (best is None or idx < best[0]):
                best = (idx, stop)
        if best is None:
            return None
        idx, stop = best
        self.output_text = self.output_text[: idx + len(stop) if self._include_stop else idx]
        self._sent = min(self._sent, len(self.output_text))
        self.stop_reason = stop
        return stop

    def _held_back(self) -> int:
        """Length of the longest suffix of the text that could still grow into a stop string."""
        if not self._stop or self._include_stop:
            # With include_stop_str_in_output the text before and including a stop string is kept anyway.
            return 0
        text = self.output_text
        longest = 0
        for stop in self._stop:
            for n in range(min(len(stop) - 1, len(text)), longest, -1):
                if text.endswith(stop[:n]):
                    longest = n
                    break
        return longest

    def get_delta(self, finished: bool = False) -> str:
        """Text not yet handed out; while running, text that may be the start of a stop string waits."""
        end = len(self.output_text) if finished else len(self.output_text) - self._held_back()
        if end <= self._sent:
            return ""
        delta = self.output_text[self._sent : end]
        self._sent = end
        return delta
