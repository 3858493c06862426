"""The engine's core: what decides, with no torch and no model (config, requests, KV blocks, scheduling)."""
