"""Baseline: transformers ``model.generate`` with static batches, the way servers batched before vLLM.

Requests queue first come, first served; when the model is free, up to ``batch_size`` arrived requests are
left-padded into one batch that runs until its longest member ends. A member that is done (its own
``max_tokens``, or EOS without ``--ignore-eos``) keeps its row, so its slots and compute are wasted until the
batch ends; a request that arrives meanwhile waits for the next batch. This is the only place in the project
where ``model.generate`` is used.

A stopping criterion runs after every generated token: it timestamps the batch's first token (every member gets
its first token after the batch's prefill), marks members done, and samples the KV cache's waste. Times are
taken when each token exists, as if streamed; the follow-up turn of a conversation arrives when its member is
done, but can only run in a later batch.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.driver import DueRequest, SessionDriver
from benchmarks.metrics import KVSample, KVTrace, summarize
from benchmarks.workload import Workload


class _BatchWatch:
    """The stopping criterion: per-row done flags, first-token time, KV samples. Made on each batch."""

    def __init__(self, requests: list[DueRequest], prompt_width: int, eos: set[int], ignore_eos: bool,
                 kv: KVTrace, t0: float) -> None:
        import torch

        self.requests = requests
        self.prompt_width = prompt_width
        self.eos = eos
        self.ignore_eos = ignore_eos
        self.kv = kv
        self.t0 = t0
        self.first_token: float | None = None
        self.done_at: list[float | None] = [None] * len(requests)
        self.num_tokens: list[int] = [0] * len(requests)  # useful output tokens per row
        self.last = time.monotonic()
        self._torch = torch

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        if self.first_token is None:
            self.first_token = now
        generated = input_ids.shape[1] - self.prompt_width
        newest = input_ids[:, -1].tolist()
        done = []
        for i, request in enumerate(self.requests):
            if self.done_at[i] is None:
                self.num_tokens[i] = generated
                if generated >= request.max_tokens or (not self.ignore_eos and newest[i] in self.eos):
                    self.done_at[i] = now
            done.append(self.done_at[i] is not None)
        # The cache holds every position of every row but the newest token; a row's slots hold tokens only for
        # its prompt (not the left padding) and its useful output.
        cached = input_ids.shape[1] - 1
        stored = sum(len(r.prompt_token_ids) + min(n, generated) - 1 for r, n in zip(self.requests, self.num_tokens))
        self.kv.add(KVSample(now - self.t0, now - self.last, cached * len(self.requests), stored, 0.0,
                             sum(not d for d in done), 0))
        self.last = now
        return self._torch.tensor(done, dtype=self._torch.bool, device=input_ids.device)


def run(workload: Workload, model_path: str, device: str = "cpu", batch_size: int = 16,
        progress: Any = None) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, StoppingCriteriaList

    # fp32 on CPU as our engine; on CUDA the engine's default half precision, so both do the same arithmetic.
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(device).eval()
    eos = set(workload.eos_token_ids) or {int(model.generation_config.eos_token_id or 0)}
    pad = int(model.generation_config.pad_token_id if model.generation_config.pad_token_id is not None else min(eos))
    kv = KVTrace()

    def generate(batch: list[DueRequest], t0: float) -> _BatchWatch:
        width = max(len(r.prompt_token_ids) for r in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, r in enumerate(batch):  # left padding: every row's last prompt token is at the same column
            ids[row, width - len(r.prompt_token_ids):] = torch.tensor(r.prompt_token_ids)
            mask[row, width - len(r.prompt_token_ids):] = 1
        watch = _BatchWatch(batch, width, eos, workload.ignore_eos, kv, t0)
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                max_new_tokens=max(r.max_tokens for r in batch),
                do_sample=False,
                # Without ignore_eos, generate pads rows after their EOS; with it, rows go on to their length.
                eos_token_id=None if workload.ignore_eos else sorted(eos),
                pad_token_id=pad,
                stopping_criteria=StoppingCriteriaList([watch]),
            )
        watch.output = out[:, width:].tolist()  # type: ignore[attr-defined]
        return watch

    warm = DueRequest("warmup", workload.sessions[0], 0, list(range(1000, 1064)), 4, 0.0)
    generate([warm], time.monotonic())

    driver = SessionDriver(workload)
    t0 = driver.start()
    queue: list[DueRequest] = []
    largest = 0
    while not driver.done:
        queue.extend(driver.due())
        if not queue:
            driver.wait_for_arrival()
            continue
        batch, queue = queue[:batch_size], queue[batch_size:]
        largest = max(largest, len(batch))
        watch = generate(batch, t0)
        end = time.monotonic()
        for i, r in enumerate(batch):
            tokens = watch.output[i][: watch.num_tokens[i]]  # type: ignore[attr-defined]
            reason = "stop" if tokens and not workload.ignore_eos and tokens[-1] in eos else "length"
            driver.first_token(r.request_id, watch.first_token or end)
            driver.finish(r.request_id, tokens, reason, 0, watch.done_at[i] or end)
            if progress is not None:
                progress.update(1)
    driver.end = max(driver.end, time.monotonic())  # the last batch ends when its longest member does
    result = summarize(driver.records, driver.wall_s, kv, max_concurrent=largest, has_prefix_cache=False)
    result["kv_usage_mean"] = None  # no fixed pool: the cache grows with the batch
    result.update(batch_size=batch_size, kv_series=kv.series(), records=[r.as_dict() for r in driver.records])
    return result
