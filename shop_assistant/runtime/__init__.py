"""The web side's shared runtime, imported by every app: the process's engine, metrics, rate limits, origin
checks, text cleaning and the channel layer. Plain modules, no models: nothing here imports an app."""
