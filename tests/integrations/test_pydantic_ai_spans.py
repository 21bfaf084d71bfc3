"""Spans of a durable pydantic-ai run carry the model name, tool name and token usage."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent
from actorlog.stores import MemoryStore
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.test import TestModel

_EXPORTER = InMemorySpanExporter()


def _tool(span: ReadableSpan) -> object:
    return (span.attributes or {}).get("actorlog.tool.name")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def spans() -> InMemorySpanExporter:
    # The global provider can be set once per process: join one that is already there.
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        current = trace.get_tracer_provider()
    assert isinstance(current, TracerProvider)
    if not getattr(current, "_actorlog_pai_exporter", False):
        current.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        current._actorlog_pai_exporter = True  # type: ignore[attr-defined]
    _EXPORTER.clear()
    return _EXPORTER


@pytest.mark.anyio
async def test_model_and_tool_spans_have_genai_attributes(spans: InMemorySpanExporter) -> None:
    agent = Agent(TestModel(call_tools=["lookup"], model_name="test-m"), name="t-spans")

    @agent.tool_plain
    async def lookup(q: str) -> str:
        return "x"

    durable = DurableAgent(agent, tools={"lookup": READ})
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        result = await durable.run(system, "s-1", "hi", message_id="m")
    finished = spans.get_finished_spans()
    calls = [s for s in finished if s.name == "actorlog.tool_call"]
    model = [s for s in calls if _tool(s) == "pydantic_ai.model_request"]
    assert len(model) == 2
    attrs = dict(model[0].attributes or {})
    assert attrs["gen_ai.request.model"] == "test-m"
    assert int(str(attrs["gen_ai.usage.input_tokens"])) > 0
    tool = [s for s in calls if _tool(s) == "pydantic_ai.tool.lookup"]
    assert len(tool) == 1
    assert dict(tool[0].attributes or {})["actorlog.pydantic_ai.tool_name"] == "lookup"
    (step,) = [s for s in finished if s.name == "actorlog.step"]
    step_attrs = dict(step.attributes or {})
    assert step_attrs["actorlog.pydantic_ai.agent"] == "t-spans"
    assert step_attrs["gen_ai.usage.input_tokens"] == result.usage.input_tokens


@pytest.mark.anyio
async def test_a_streamed_request_is_one_span_with_its_first_event_and_count(
    spans: InMemorySpanExporter,
) -> None:
    """A streamed model request is one ``actorlog.tool_call`` span: the span event
    ``actorlog.pydantic_ai.first_event`` and the number of events streamed, no span per
    token."""

    async def handler(ctx: RunContext[Any], stream: Any) -> None:
        async for _ in stream:
            pass

    agent = Agent(TestModel(custom_output_text="one two three four"), name="t-stream-span")
    durable = DurableAgent(agent, event_stream_handler=handler)
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        await durable.run(system, "conv-stream", "hi", message_id="m-1")
    (request,) = [s for s in spans.get_finished_spans() if _tool(s) == "pydantic_ai.model_request"]
    attributes = request.attributes or {}
    assert int(str(attributes["actorlog.pydantic_ai.stream_events"])) >= 4  # deltas, ends ...
    assert [e.name for e in request.events].count("actorlog.pydantic_ai.first_event") == 1
