"""Telemetry: span names, attribute keys, metrics and the tracer (``telemetry``; the stable table
is docs/tracing.md), the spans of timers and of an actor's lifecycle (``traceends``) and the
stdlib loggers (``logs``). Uses only opentelemetry-api. May import the journal layer, nothing
else of actorlog.
"""
