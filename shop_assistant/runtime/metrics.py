"""Prometheus metrics of this process: the engine under vLLM's names, and the chat's own.

The engine's gauges and counters are read from ``running_engine().stats()`` when ``/metrics`` is scraped;
its per-request histograms and token counters are observed from the final delta of every request (chat and
API), which carries the request's metrics and usage. Everything lives in one registry of this module, so tests
and the view never see the default registry's process collectors twice.

Every sample leaves with a ``node`` label (``NODE_NAME``, default the host's name) so that the nodes behind one
load balancer can be told apart even when aggregated; the engine's ``vllm:*`` ones also with ``model_name``, as
vLLM's own carry it. The labels are added at exposition, so the code that counts never passes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

REGISTRY = CollectorRegistry()

# vLLM's buckets, shortened to what a CPU or one GPU sees.
_TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_TPOT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
_E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0)


def _latency(name: str, documentation: str, buckets: tuple[float, ...]) -> Histogram:
    return Histogram(name, documentation, buckets=buckets, registry=REGISTRY)


TTFT = _latency("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", _TTFT_BUCKETS)
TPOT = _latency("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", _TPOT_BUCKETS)
E2E = _latency("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", _E2E_BUCKETS)
QUEUE = _latency(
    "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", _E2E_BUCKETS
)
PROMPT_TOKENS = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", registry=REGISTRY)
GENERATION_TOKENS = Counter("vllm:generation_tokens", "Number of generation tokens processed.", registry=REGISTRY)
REQUEST_SUCCESS = Counter(
    "vllm:request_success", "Count of finished requests by finish reason.", ["finished_reason"], registry=REGISTRY
)

# --- the chat's own ---------------------------------------------------------------------------------------

# Read at scrape time from the spool file; ``chat.spool`` binds the function (metrics imports nothing of the chat).
SPOOL_DEPTH = Gauge("shop_assistant_chat_spool_depth", "Messages waiting in the local spool.", registry=REGISTRY)
OPEN_SESSIONS = Gauge("shop_assistant_chat_open_sessions", "Open shopper websockets.", registry=REGISTRY)
MESSAGES = Counter("shop_assistant_chat_messages", "Chat messages logged, by role.", ["role"], registry=REGISTRY)
HANDOFFS = Counter("shop_assistant_chat_handoffs", "Conversations handed to a person.", registry=REGISTRY)
RATE_LIMITED = Counter(
    "shop_assistant_chat_rate_limited", "Messages or connections refused by a limit, by limit.", ["limit"],
    registry=REGISTRY,
)
ERRORS = Counter("shop_assistant_chat_errors", "Error frames sent, by code.", ["code"], registry=REGISTRY)
LOG_WRITE_RETRIES = Counter(
    "shop_assistant_chat_log_write_retries", "Chat log writes retried after a database error.", registry=REGISTRY
)
SPOOLED = Counter(
    "shop_assistant_chat_spooled_messages", "Messages written to the local spool (database down).", registry=REGISTRY
)
API_REQUESTS = Counter(
    "shop_assistant_api_requests", "OpenAI-compatible API requests, by endpoint and status.",
    ["endpoint", "status"], registry=REGISTRY,
)


def observe_request(metrics: Any, usage: Any, finish_reason: str | None = None) -> None:
    """One finished engine request: its ``RequestMetrics`` and ``Usage`` from the final delta (either may be None)."""
    if metrics is not None:
        for histogram, value in (
            (TTFT, metrics.time_to_first_token),
            (TPOT, metrics.time_per_output_token),
            (E2E, metrics.e2e_latency),
            (QUEUE, metrics.time_in_queue),
        ):
            if value is not None:
                histogram.observe(value)
    if usage is not None:
        # Prefill work done: prompt tokens not served from the prefix cache, as vLLM counts them.
        PROMPT_TOKENS.inc(max(0, int(usage.prompt_tokens) - int(usage.cached_tokens)))
        GENERATION_TOKENS.inc(int(usage.completion_tokens))
    if finish_reason:
        REQUEST_SUCCESS.labels(finished_reason=finish_reason).inc()


class _EngineCollector(Collector):
    """Gauges and counters read from the running engine at scrape time (nothing when it is not running)."""

    def collect(self) -> Iterator[Any]:
        from . import engine_service

        engine = engine_service.running_engine()
        stats: dict[str, Any] = engine.stats() if engine is not None else {}
        gauges = (
            ("vllm:num_requests_running", "Number of requests in model execution batches.", "num_running"),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "num_waiting"),
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "kv_cache_usage"),
        )
        counters = (
            ("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
             "prefix_cache_query_tokens"),
            ("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
             "prefix_cache_hit_tokens"),
            ("vllm:num_preemptions", "Cumulative number of preemption from the engine.", "num_preemptions"),
        )
        for kind, table in ((GaugeMetricFamily, gauges), (CounterMetricFamily, counters)):
            for name, doc, key in table:
                family = kind(name, doc)
                if key in stats:
                    family.add_metric([], float(stats[key]))
                yield family


REGISTRY.register(_EngineCollector())


class _Labelled:
    """``REGISTRY`` as scraped: every sample with this node's labels (see the module's docstring)."""

    def collect(self) -> Iterator[Metric]:
        from . import engine_service, nodes

        node = {"node": nodes.node_name()}
        engine = {**node, "model_name": engine_service.model_name()}
        for family in REGISTRY.collect():
            extra = engine if family.name.startswith("vllm:") else node
            labelled = Metric(family.name, family.documentation, family.type, family.unit)
            labelled.samples = [sample._replace(labels={**sample.labels, **extra}) for sample in family.samples]
            yield labelled


def exposition() -> bytes:
    """The text format of every metric of this process, labelled with the node (and the model)."""
    return generate_latest(_Labelled())
