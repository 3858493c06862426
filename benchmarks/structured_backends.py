"""``python -m benchmarks.structured_backends``: the measurement the engine's grammar library was chosen by.

For each candidate library (xgrammar, llguidance) on a model's tokenizer: the time to build its tokenizer info,
to compile each of the structured benchmark's JSON schemas (cold: a fresh compiler, no cache), and the time to
fill one row's allowed-token bitmask per decoding step, measured on random walks through each grammar (each step
picks a random allowed token, so the walk visits strings, numbers, keys and punctuation). Prints a table; see
docs/engine-design.md ("Structured output") for the figures and the choice. llguidance is not in the locks
(the engine does not use it): ``pip install llguidance==1.9.1`` to measure it; without it, its row is skipped.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchmarks.structured_schemas import SCHEMAS


def _allowed(bitmask: torch.Tensor, vocab_size: int) -> np.ndarray:
    bits = np.unpackbits(bitmask[0].numpy().view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)


def _walk(m: _Matcher, bitmask: torch.Tensor, vocab: int, steps: int, rng: random.Random) -> list[float]:
    times = []
    for _ in range(steps):
        if m.done():
            m.reset()
        t0 = time.perf_counter()
        m.fill(bitmask)
        times.append(time.perf_counter() - t0)
        allowed = _allowed(bitmask, vocab)
        if len(allowed) == 0:
            m.reset()
            continue
        m.accept(int(allowed[rng.randrange(len(allowed))]))
    return times


@dataclass
class _Matcher:
    """One library's matcher behind the four calls the walk makes."""

    fill: Callable[[torch.Tensor], Any]
    accept: Callable[[int], Any]
    done: Callable[[], bool]
    reset: Callable[[], Any]


def _xgrammar(tokenizer: Any, vocab: int) -> tuple[Callable[[str], _Matcher], torch.Tensor]:
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab)
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)  # no cache: every compile is cold

    def compile_schema(schema: str) -> _Matcher:
        m = xgr.GrammarMatcher(compiler.compile_json_schema(schema))
        return _Matcher(lambda b: m.fill_next_token_bitmask(b, 0), m.accept_token, m.is_terminated, m.reset)

    return compile_schema, xgr.allocate_token_bitmask(1, vocab)


def _llguidance(tokenizer: Any, vocab: int) -> tuple[Callable[[str], _Matcher], torch.Tensor]:
    import llguidance
    import llguidance.hf
    import llguidance.torch

    lltok = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab)

    def compile_schema(schema: str) -> _Matcher:
        m = llguidance.LLMatcher(lltok, llguidance.LLMatcher.grammar_from_json_schema(schema))
        assert not m.is_error(), m.get_error()
        return _Matcher(lambda b: llguidance.torch.fill_next_token_bitmask(m, b, 0), m.consume_token, m.is_stopped, m.reset)

    return compile_schema, llguidance.torch.allocate_token_bitmask(1, vocab)


LIBRARIES = {"xgrammar": _xgrammar, "llguidance": _llguidance}


def measure(library: str, tokenizer: Any, vocab: int, schemas: list[dict], steps: int, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    compile_schema, bitmask = LIBRARIES[library](tokenizer, vocab)
    info_s = time.perf_counter() - t0
    compile_s, mask_s = [], []
    rng = random.Random(seed)
    for schema in schemas:
        t0 = time.perf_counter()
        m = compile_schema(json.dumps(schema))
        compile_s.append(time.perf_counter() - t0)
        mask_s += _walk(m, bitmask, vocab, steps, rng)
    return {"info_s": info_s, "compile_s": compile_s, "mask_s": mask_s}


def _us(values: list[float], q: float | None = None) -> str:
    value = statistics.mean(values) if q is None else float(np.quantile(values, q))
    return f"{1e6 * value:.0f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.structured_backends", description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="model folder whose tokenizer to use (default: the bundled SmolLM2-135M)")
    ap.add_argument("--vocab-size", type=int, help="lm_head rows (default: the model config's vocab_size)")
    ap.add_argument("--schemas", type=int, default=8, help="how many of the 20 schemas")
    ap.add_argument("--steps", type=int, default=200, help="mask fills per schema")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    from inference.worker import loader

    path = args.model or str(loader.resolve_model(None))
    tokenizer = loader.load_tokenizer(path)
    vocab = args.vocab_size or loader.load_model_config(path).vocab_size
    schemas = [s for _, s, _ in SCHEMAS[: args.schemas]]
    print(f"tokenizer {path}: {len(tokenizer)} tokens, lm_head {vocab} rows; {len(schemas)} schemas x {args.steps} steps")
    print(f"{'library':<12} {'tok info s':>10} {'compile ms mean':>16} {'max':>8} {'first mask us':>14} "
          f"{'mask us mean':>13} {'p50':>7} {'p99':>7} {'max':>7}")
    for name in LIBRARIES:
        try:
            r = measure(name, tokenizer, vocab, schemas, args.steps, args.seed)
        except ImportError as exc:
            print(f"{name:<12} not installed ({exc})")
            continue
        first, rest = r["mask_s"][:: args.steps], [t for i, t in enumerate(r["mask_s"]) if i % args.steps]
        print(f"{name:<12} {r['info_s']:>10.2f} {1000 * statistics.mean(r['compile_s']):>16.2f} "
              f"{1000 * max(r['compile_s']):>8.1f} {_us(first):>14} {_us(rest):>13} {_us(rest, 0.5):>7} "
              f"{_us(rest, 0.99):>7} {1e6 * max(rest):>7.0f}")


if __name__ == "__main__":
    main()
