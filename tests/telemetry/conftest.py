"""OpenTelemetry SDK wiring for the telemetry tests.

The global TracerProvider and MeterProvider can be set only once per process, and
``actorlog._tracing.telemetry`` took its tracer and meter at import time (proxies that follow the
global providers once set). So one session fixture installs an SDK provider with an
in-memory span exporter and an in-memory metric reader, and each test gets the exporter
cleared. If something else in the session already installed an SDK TracerProvider, our
exporter is added to it instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from actorlog.store import Store
from actorlog.stores import MemoryStore
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .telemetry_agents import CALLS

_EXPORTER = InMemorySpanExporter()
_READER = InMemoryMetricReader()


@pytest.fixture(scope="session")
def otel() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        current.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    else:
        provider = TracerProvider(resource=Resource.create({"service.name": "actorlog-tests"}))
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[_READER]))
    return _EXPORTER, _READER


@pytest.fixture
def spans(otel: tuple[InMemorySpanExporter, InMemoryMetricReader]) -> InMemorySpanExporter:
    """The span exporter, emptied for this test."""
    otel[0].clear()
    return otel[0]


@pytest.fixture
def metric_reader(otel: tuple[InMemorySpanExporter, InMemoryMetricReader]) -> InMemoryMetricReader:
    return otel[1]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Memory-store telemetry tests run on both backends (OTel context is a contextvar)."""
    return str(request.param)


@pytest.fixture(autouse=True)
def _reset_calls() -> Iterator[None]:
    CALLS.reset()
    yield
    CALLS.reset()


@pytest.fixture
def memory_store() -> Callable[[], Store]:
    """A factory returning the same MemoryStore each call (so a test can 'restart')."""
    mem = MemoryStore()
    return lambda: mem


def named(finished: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name]


def one(finished: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = named(finished, name)
    assert len(found) == 1, f"expected one {name} span, got {[s.name for s in finished]}"
    return found[0]


def attrs_of(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})
