"""Time one busy decode step, by part: ``python -m benchmarks.step_profile``.

The benchmark's shape: ``--seqs`` sequences decoding one token each over a shared system prompt of
``--prefix`` tokens (the same physical blocks, as the prefix cache leaves them) plus ``--own-min``..``--own-max``
tokens of their own. The cache holds random values (attention costs do not depend on them): the outputs of the backends are
compared, not checked against a reference. Each backend runs the model forward and the sampling rows' logits,
steps interleaved so that a noisy machine hits every backend alike;
``--profile`` adds a ``torch.profiler`` table of the ops that took the time.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from inference.core.config import EngineConfig
from inference.worker.attention import AttentionMetadata, keys_by_token
from inference.worker.model_runner import ModelRunner


def decode_step(seqs: int, prefix: int, own: list[int], block_size: int) -> tuple[AttentionMetadata, int]:
    """Metadata of one decode step over a shared prefix; and the number of KV blocks it needs."""
    prefix_blocks = prefix // block_size
    next_block = prefix_blocks
    tables, slots, context_lens = [], [], []
    for n in own:
        ctx = prefix_blocks * block_size + n
        need = -(-ctx // block_size) - prefix_blocks
        table = list(range(prefix_blocks)) + list(range(next_block, next_block + need))
        next_block += need
        tables.append(table)
        slots.append(table[(ctx - 1) // block_size] * block_size + (ctx - 1) % block_size)
        context_lens.append(ctx)
    width = max(len(t) for t in tables)
    meta = AttentionMetadata(
        slot_mapping=torch.tensor(slots),
        block_tables=torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32),
        context_lens=torch.tensor(context_lens, dtype=torch.int32),
        query_start_loc=torch.arange(seqs + 1, dtype=torch.int32),
        max_query_len=1,
        max_context_len=max(context_lens),
    )
    return meta, next_block


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", type=int, default=48)
    parser.add_argument("--prefix", type=int, default=464, help="shared tokens (whole blocks)")
    parser.add_argument("--own-min", type=int, default=30)
    parser.add_argument("--own-max", type=int, default=900)
    parser.add_argument("--backends", default="torch,cpu",
                        help="attention backends; cpu:cascade / cpu:plain force the cpu backend's cascade on / off, "
                             "cpu:onednn runs every projection on oneDNN (no weight panels for small steps)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--profile", action="store_true", help="also print torch.profiler's op table")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    own = torch.randint(args.own_min, args.own_max + 1, (args.seqs,), generator=gen).tolist()
    meta, blocks = decode_step(args.seqs, args.prefix, own, 16)
    runners = {}
    for name in args.backends.split(","):
        # One runner per backend: each keeps the cache in its own layout.
        backend, _, variant = name.partition(":")
        config = EngineConfig(dtype=args.dtype, attention_backend=backend, num_gpu_blocks_override=blocks,
                              cpu_small_linears=variant != "onednn")
        runner = runners[name] = ModelRunner(config)
        if variant in ("cascade", "plain"):
            runner.backend.cascade = variant == "cascade"
        for index, layer in enumerate(runner.model.kv_cache_layers()):
            layer_gen = torch.Generator().manual_seed(args.seed * 1000 + index)  # the same values for every backend
            keys_by_token(layer.k_cache, runner.backend.k_transposed).copy_(torch.randn(layer.v_cache.shape, generator=layer_gen))
            layer.v_cache.copy_(torch.randn(layer.v_cache.shape, generator=layer_gen))
    model_config = next(iter(runners.values())).model_config
    input_ids = torch.randint(0, model_config.vocab_size, (args.seqs,), generator=gen)
    positions = meta.context_lens.long() - 1
    rows = torch.arange(args.seqs)

    @torch.inference_mode()
    def step(runner: ModelRunner) -> torch.Tensor:
        runner.backend.prepare(meta, 16)
        hidden = runner.model(input_ids, positions, meta)
        return runner.model.compute_logits(hidden, rows)

    outputs = {name: step(r) for name, r in runners.items()}  # warm-up, and the outputs compared
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.steps):
        for name, runner in runners.items():
            start = time.perf_counter()
            step(runner)
            times[name].append(time.perf_counter() - start)
    print(
        f"{args.seqs} decodes, shared prefix {args.prefix} tokens, own {min(own)}-{max(own)} "
        f"(mean {statistics.mean(own):.0f}), {args.dtype}, {torch.get_num_threads()} threads"
    )
    first = next(iter(outputs.values()))
    for name, ts in times.items():
        same = bool((outputs[name].argmax(-1) == first.argmax(-1)).all())
        print(f"  {name:8} median {statistics.median(ts) * 1e3:7.1f} ms  min {min(ts) * 1e3:7.1f} ms"
              f"  same argmax as {next(iter(outputs))}: {same}")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        for name, runner in runners.items():
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(3):
                    step(runner)
            print(f"\n== {name}")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))


if __name__ == "__main__":
    main()
