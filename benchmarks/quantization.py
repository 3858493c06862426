"""Quantized weights, measured: ``python -m benchmarks.quantization --model qwen2.5-1.5b``.

For each scheme (``none`` = bf16, or fp32 on a CPU without bf16 instructions; ``int8``, ``int4``), on one engine each, all loaded side by side in this run:
- a lone shopper: time to the first token of a fresh 200-token prompt, and decode tokens/s (the time of
  first token's to the last's, over D), medians of ``--repeats`` rounds taken scheme after scheme;
- the weights' resident bytes (parameters, packed panels and quantized panels, whatever the engine keeps);
- quality against bf16: greedy agreement over held-out prompts (tokens generated before the first token that
  differs, and outputs identical throughout) and the perplexity of a held-out text, teacher-forced.

The prompts and the text were written for this benchmark and are used nowhere else. Quote the ratios from one
run, the machine otherwise idle (``lscpu``'s model and flags go in the JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from typing import Any

import torch

from inference.core.sampling_params import SamplingParams
from inference.llm import LLM
from inference.worker.attention import cpu_kernels
from inference.worker.models.llama import Linear, LlamaForCausalLM
from inference.worker.step_inputs import dummy_prefill_inputs

HELD_OUT_PROMPTS = [
    "Write two sentences describing a lightweight tent for summer festivals.",
    "A customer asks whether a 0 degree sleeping bag is warm enough for a night at minus five. Reply briefly.",
    "Translate to Spanish: Our store ships within two business days.",
    "Give three tips for keeping boots waterproof.",
    "What is 17 times 23? Show the steps.",
    "Write a Python function that returns the largest even number in a list.",
    "Summarise in one sentence: The backpack has a 40 litre main compartment, a hydration sleeve and hip belt pockets.",
    "Suggest a name for an outdoor gear shop that sells mostly to families.",
    "Explain the difference between down and synthetic insulation in plain words.",
    "A shopper writes: 'my order never arrived'. Write a polite first reply.",
    "List the planets of the solar system in order from the sun.",
    "Write a haiku about rain on a tent.",
    "What should a beginner check before buying trail running shoes?",
    "Convert 25 degrees Celsius to Fahrenheit and explain the formula.",
    "Write a SQL query that counts orders per customer email.",
    "Why do headlamps have a red light mode?",
]

HELD_OUT_TEXT = (
    "The first snow came early that year, and the little shop at the end of the valley road was busier than it had "
    "been all summer. People who had never slept outside in winter wanted to know everything at once: how warm a bag "
    "had to be, whether a foam pad was enough on frozen ground, why a stove that worked perfectly in July refused to "
    "light at minus ten. The owner, who had guided climbers for twenty years before she opened the shop, answered "
    "each question slowly. She explained that temperature ratings describe the lowest temperature at which an "
    "average sleeper stays safe, not comfortable, and that most people should add five to ten degrees of margin. "
    "She showed them how a pad's R-value adds up when two pads are stacked, and how canister fuel loses pressure in "
    "the cold, which is why experienced campers keep the canister inside their jacket before cooking. Some customers "
    "left with nothing but advice. Others came back a week later with photographs of frozen lakes and stories of "
    "nights that had been colder than the forecast promised. By the end of the season she had started writing the "
    "answers down, one short page for each question, and pinning them to the wall beside the counter, where they "
    "slowly turned into the most read part of the store."
)


def weight_bytes(model: LlamaForCausalLM) -> int:
    """Bytes of every weight the model holds, in whatever form: parameters, oneDNN/panel copies, quantized panels."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    for module in model.modules():
        if isinstance(module, Linear):
            for t in (module.packed, module.panels):
                total += 0 if t is None else t.numel() * t.element_size()
            total += 0 if module.quantized is None else module.quantized.nbytes
    for t in (model.lm_head_packed, model.lm_head_panels):
        total += 0 if t is None else t.numel() * t.element_size()
    return total + (0 if model.lm_head_quantized is None else model.lm_head_quantized.nbytes)


def single_stream(llm: LLM, decode_tokens: int, seed: int, prompt_len: int = 200) -> tuple[float, float]:
    """(TTFT, decode tokens/s) of one fresh prompt: the tokens after the first over the time after the first,
    from the engine's own timestamps."""
    vocab = llm.get_tokenizer().vocab_size
    params = SamplingParams(temperature=0.0, max_tokens=1 + decode_tokens, ignore_eos=True)
    # A prompt never seen before (no prefix-cache hit): ids drawn from the ordinary part of the vocabulary.
    g = torch.Generator().manual_seed(1000 + seed)
    ids = torch.randint(1000, min(vocab, 30000), (prompt_len,), generator=g).tolist()
    m = llm.generate([{"prompt_token_ids": ids}], params)[0].metrics
    return m.time_to_first_token, decode_tokens / (m.last_token_time - m.first_token_time)


def greedy(llm: LLM, max_tokens: int) -> list[list[int]]:
    conversations = [[{"role": "user", "content": p}] for p in HELD_OUT_PROMPTS]
    outs = llm.chat(conversations, SamplingParams(temperature=0.0, max_tokens=max_tokens))
    return [list(o.outputs[0].token_ids) for o in outs]


@torch.inference_mode()
def perplexity(llm: LLM, text: str) -> float:
    """exp of the mean negative log-likelihood of each token of ``text`` given those before it (one prefill)."""
    runner = llm.llm_engine.runner
    ids = llm.get_tokenizer()(text)["input_ids"]
    inputs = dummy_prefill_inputs([len(ids)], runner.block_size, runner._tensor)
    inputs.input_ids.copy_(torch.tensor(ids, dtype=torch.int64))
    runner.backend.prepare(inputs.meta, runner.block_size)
    hidden = runner.model(inputs.input_ids, inputs.positions, inputs.meta)
    logits = runner.model.compute_logits(hidden).float()
    nll = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="mean")
    return math.exp(nll.item())


def agreement(reference: list[list[int]], other: list[list[int]]) -> dict[str, float]:
    before, total, identical = 0, 0, 0
    for a, b in zip(reference, other):
        n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        before += n
        total += len(a)
        identical += a == b
    return {"tokens_before_divergence": before / max(total, 1), "identical_outputs": identical,
            "outputs": len(reference)}


def load(model: str | None, scheme: str) -> LLM:
    # "auto": bf16 where the CPU has bf16 instructions; on an AVX2 CPU the unquantized reference runs fp32 (its
    # bf16 projections do not run there) and the quantized schemes bf16 activations (model_runner.resolve_dtype).
    return LLM(model, dtype="auto", quantization=scheme, max_model_len=1024, kv_cache_memory=256 * 2**20)


def measure(model: str | None, schemes: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every scheme loaded side by side; the timed rounds interleaved (scheme after scheme, round after round), so
    a machine whose speed drifts hits them alike; quality after."""
    engines = {scheme: load(model, scheme) for scheme in schemes}
    try:
        times: dict[str, list[tuple[float, float]]] = {scheme: [] for scheme in schemes}
        for r in range(args.repeats + 1):  # round 0 warms up
            for scheme, llm in engines.items():
                t = single_stream(llm, args.decode_tokens, seed=r)
                if r:
                    times[scheme].append(t)
        runs = []
        for scheme, llm in engines.items():
            runner = llm.llm_engine.runner
            runs.append({
                "scheme": scheme, "applied": runner.quantization, "projections": runner.projections,
                "weight_bytes": weight_bytes(runner.model),
                "ttft_s": statistics.median(t for t, _ in times[scheme]),
                "decode_tok_s": statistics.median(d for _, d in times[scheme]),
                "perplexity": perplexity(llm, HELD_OUT_TEXT),
                "greedy": greedy(llm, args.max_tokens),
            })
        return runs
    finally:
        for llm in engines.values():
            llm.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="smollm2-135m (default), qwen2.5-1.5b, or a path")
    ap.add_argument("--schemes", default="none,int8,int4")
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=48, help="greedy tokens per held-out prompt")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    runs = measure(args.model, args.schemes.split(","), args)
    base = runs[0]
    print(f"model {args.model or 'smollm2-135m'} on {cpu_kernels.cpu_model_name()}; reference: {base['scheme']}")
    print(f"{'scheme':8} {'kernel':20} {'weights MB':>10} {'TTFT ms':>8} {'decode tok/s':>12} {'x ref':>6} "
          f"{'ppl':>7} {'agree':>6} {'same':>6}")
    for run in runs:
        run["agreement"] = agreement(base["greedy"], run["greedy"])
        a = run["agreement"]
        print(f"{run['scheme']:8} {run['projections']:20} {run['weight_bytes'] / 1e6:10.0f} {run['ttft_s'] * 1e3:8.0f} "
              f"{run['decode_tok_s']:12.1f} {run['decode_tok_s'] / base['decode_tok_s']:6.2f} {run['perplexity']:7.3f} "
              f"{a['tokens_before_divergence']:6.1%} {a['identical_outputs']:>3}/{a['outputs']}")
    if args.json:
        flags = cpu_kernels.cpu_flags()
        with open(args.json, "w") as f:
            json.dump({"model": args.model or "smollm2-135m", "cpu": cpu_kernels.cpu_model_name(),
                       "flags": [x for x in flags.split() if x.startswith(("avx", "amx"))],
                       "runs": [{k: v for k, v in r.items() if k != "greedy"} for r in runs]}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
