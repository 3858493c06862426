"""The clock side of a run, shared by every system: which requests are due, and what each one measured.

Each system's runner owns its loop and asks the driver for due requests, then reports first tokens and
finishes. Times are the runner's own wall-clock observations (when a token came back to the caller), so
every system is measured the same way, ours included. Standard library only (the peers' scripts use it).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks.workload import Session, Workload, next_prompt


@dataclass
class DueRequest:
    request_id: str
    session: Session
    turn: int
    prompt_token_ids: list[int]
    max_tokens: int
    arrival: float  # absolute (clock) time it arrived


@dataclass
class RequestRecord:
    """One finished request. Times are seconds after the run's start."""

    request_id: str
    kind: str
    turn: int
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int  # prompt tokens served from a prefix cache (0 where the system has none or says nothing)
    arrival_s: float
    first_token_s: float
    finish_s: float
    finish_reason: str

    @property
    def ttft(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def tpot(self) -> float | None:
        """Mean gap between output tokens after the first; None with fewer than two."""
        if self.output_tokens < 2:
            return None
        return (self.finish_s - self.first_token_s) / (self.output_tokens - 1)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class SessionDriver:
    def __init__(self, workload: Workload, clock: Callable[[], float] = time.monotonic) -> None:
        self.workload = workload
        self.clock = clock
        self.t0 = 0.0
        # (arrival, seq, request): first turns at their arrival times, later turns when the previous finishes.
        self._queue: list[tuple[float, int, DueRequest]] = []
        self._seq = 0
        self._inflight: dict[str, DueRequest] = {}
        self._first_token: dict[str, float] = {}
        self.records: list[RequestRecord] = []
        self.end = 0.0

    def start(self) -> float:
        self.t0 = self.clock()
        for s in self.workload.sessions:
            self._push(DueRequest(f"{s.session_id}/0", s, 0, list(s.turns[0].token_ids), s.turns[0].max_tokens,
                                  self.t0 + s.arrival_s))
        return self.t0

    def _push(self, request: DueRequest) -> None:
        heapq.heappush(self._queue, (request.arrival, self._seq, request))
        self._seq += 1

    @property
    def done(self) -> bool:
        return not self._queue and not self._inflight

    @property
    def num_inflight(self) -> int:
        return len(self._inflight)

    def next_arrival(self) -> float | None:
        """Absolute time of the next request not yet handed out (None when none is queued)."""
        return self._queue[0][0] if self._queue else None

    def due(self, now: float | None = None) -> list[DueRequest]:
        """Requests that have arrived by ``now``, in arrival order; they count as in flight from here."""
        now = self.clock() if now is None else now
        out = []
        while self._queue and self._queue[0][0] <= now:
            request = heapq.heappop(self._queue)[2]
            self._inflight[request.request_id] = request
            out.append(request)
        return out

    def wait_for_arrival(self) -> None:
        """Sleep until the next queued request arrives (the system is idle)."""
        nxt = self.next_arrival()
        if nxt is not None:
            time.sleep(max(0.0, nxt - self.clock()))

    def first_token(self, request_id: str, now: float | None = None) -> None:
        if request_id not in self._first_token:
            self._first_token[request_id] = self.clock() if now is None else now

    def finish(
        self,
        request_id: str,
        output_token_ids: list[int],
        finish_reason: str,
        cached_tokens: int = 0,
        now: float | None = None,
    ) -> RequestRecord:
        """Record a finished request; its session's next turn arrives now."""
        now = self.clock() if now is None else now
        request = self._inflight.pop(request_id)
        first = self._first_token.pop(request_id, now)
        record = RequestRecord(
            request_id=request_id,
            kind=request.session.kind,
            turn=request.turn,
            prompt_tokens=len(request.prompt_token_ids),
            output_tokens=len(output_token_ids),
            cached_tokens=cached_tokens,
            arrival_s=request.arrival - self.t0,
            first_token_s=first - self.t0,
            finish_s=now - self.t0,
            finish_reason=finish_reason,
        )
        self.records.append(record)
        self.end = max(self.end, now)
        turns = request.session.turns
        k = request.turn + 1
        if k < len(turns):
            prompt = next_prompt(request.prompt_token_ids, output_token_ids, turns[k], self.workload.eos_token_ids)
            self._push(DueRequest(f"{request.session.session_id}/{k}", request.session, k, prompt,
                                  turns[k].max_tokens, now))
        return record

    @property
    def wall_s(self) -> float:
        """From the start to the last finish."""
        return self.end - self.t0
