"""Runtime pieces every SS-Tools service shares: settings, logs, traces, metrics, serving, tokens.

Service logic never lives here; a module belongs here only if at least two services use it.
"""
