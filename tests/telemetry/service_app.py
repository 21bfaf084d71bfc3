"""examples/service.py's app with an OpenTelemetry SDK set up as an application would:
spans batched (BatchSpanProcessor) and exported to the file named by ``SPANS_FILE`` by the
SDK's console exporter. The batch delay is far longer than the test, so a span reaches the
file only when something flushes the processor before the process ends. Served by
``uvicorn tests.telemetry.service_app:app`` in tests/telemetry/test_service_spans.py."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

_out = open(os.environ["SPANS_FILE"], "w")  # noqa: SIM115 (open for the process's life)
_provider = TracerProvider(resource=Resource.create({"service.name": "actorlog-service"}))
_provider.add_span_processor(
    BatchSpanProcessor(ConsoleSpanExporter(out=_out), schedule_delay_millis=600_000)
)
trace.set_tracer_provider(_provider)

_spec = importlib.util.spec_from_file_location(
    "service", Path(__file__).resolve().parents[2] / "examples" / "service.py"
)
assert _spec is not None and _spec.loader is not None
_service = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_service)
app: Any = _service.app
