"""Incremental detokenizer: turns each step's new tokens into text deltas and finds stop strings.

Decoding a growing token list one token at a time is not concatenative (byte-level BPE tokens can end in the
middle of a UTF-8 character; SentencePiece drops a leading space at the start of a decode), so the text comes
from ``tokenizers``' own ``DecodeStream``: it holds a token back while it ends in an incomplete character, and
a few prompt tokens seed it so the first output token gets its leading space right. What the stream does not
do is here: stop strings, the stop token's text, and flushing an incomplete character at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

from inference.core.sampling_params import SamplingParams

# Prompt tokens kept as context for the first output token (vLLM uses 5 as well).
_PROMPT_CONTEXT = 5


def fast_decoder(tokenizer: Any) -> Tokenizer:
    """The Rust ``tokenizers.Tokenizer`` behind an HF fast tokenizer: what ``DecodeStream`` decodes with (and
    without transformers' Python-side clean-up)."""
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    if not isinstance(backend, Tokenizer):
        raise TypeError(f"{type(tokenizer).__name__} has no Rust tokenizer behind it; the engine needs a fast one")
    return backend


class IncrementalDetokenizer:
    """Per-sequence text state. Call ``update`` with each new token, then ``get_delta`` for the text to emit."""

    def __init__(
        self,
        decoder: Tokenizer,
        prompt_token_ids: Sequence[int],
        params: SamplingParams,
        skip_special_tokens: bool = True,
    ) -> None:
        self._decoder = decoder
        self._skip_special = skip_special_tokens
        context = list(prompt_token_ids[-_PROMPT_CONTEXT:])
        self._stream = DecodeStream(ids=context, skip_special_tokens=skip_special_tokens)
        self._pending: list[int] = []  # tokens the stream holds back: they end in an incomplete character
        self._stop = [s for s in (params.stop or []) if s]
        self._include_stop = params.include_stop_str_in_output
        self._min_tokens = params.min_tokens
        self._num_output_tokens = 0
        self._sent = 0  # characters of output_text already handed out
        self.output_text = ""
        self.stop_reason: str | None = None

    def _decode_new(self, ids: list[int], flush: bool) -> str:
        """Text of ``ids``; what ends in an incomplete character waits, unless ``flush`` (then it is U+FFFD)."""
        text = ""
        for token_id in ids:
            self._pending.append(token_id)
            chunk = self._stream.step(self._decoder, token_id)
            if chunk is not None:
                text += chunk
                self._pending.clear()
        if flush and self._pending:
            text += self._decoder.decode(self._pending, skip_special_tokens=self._skip_special)
            self._pending.clear()
        return text

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
        self.output_text += self._decode_new(ids, flush=stop_terminated)
        if not self._stop or self._num_output_tokens <= self._min_tokens:
            return None
        return self._check_stop_strings(start)

    def flush(self) -> None:
        """At finish for another reason (length, abort): emit a trailing incomplete character as U+FFFD."""
        if self.stop_reason is None and self._pending:
            self.output_text += self._decode_new([], flush=True)

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
