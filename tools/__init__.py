"""Tools run beside the product, never on its request path: load test, load check, console latency."""
