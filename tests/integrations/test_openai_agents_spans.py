"""The step span of a durable OpenAI Agents SDK run shows its model calls and tool calls:
each is an ``actorlog.tool_call`` child span with the model name, token usage or the tool's
name; the step carries the agent, the last agent after handoffs and the run's usage."""

from __future__ import annotations

import pytest

pytest.importorskip("agents")

from actorlog import ActorSystem
from actorlog.integrations.openai_agents import AgentActor, DurableAgent, StreamEvent
from actorlog.stores import MemoryStore
from agents import RunConfig
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.integrations.openai_travel import TravelModel, triage

_EXPORTER = InMemorySpanExporter()


def _attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


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
    if not getattr(current, "_actorlog_oai_exporter", False):
        current.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        current._actorlog_oai_exporter = True  # type: ignore[attr-defined]
    _EXPORTER.clear()
    return _EXPORTER


async def _ignore(event: StreamEvent) -> None:
    return None


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_the_step_span_shows_the_runs_model_calls_and_tool_calls(
    spans: InMemorySpanExporter, streamed: bool
) -> None:
    durable = DurableAgent(
        triage,
        name=f"t-spans-{streamed}",
        tools={"search": "read", "weather": "read", "book": "idempotent"},
        run_config=RunConfig(model=TravelModel()),
        event_handler=_ignore if streamed else None,
    )
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        result = await durable.run(system, "s-1", "plan a trip to Lisbon", message_id="m")
    finished = spans.get_finished_spans()
    (step,) = [s for s in finished if s.name == "actorlog.step"]
    step_attrs = _attrs(step)
    assert step_attrs["actorlog.openai_agents.agent"] == durable.name
    assert step_attrs["actorlog.openai_agents.last_agent"] == "planner"
    assert step_attrs["gen_ai.usage.input_tokens"] == result.usage.input_tokens == 250

    calls = [
        s
        for s in finished
        if s.name == "actorlog.tool_call" and s.parent and s.parent.span_id == step.context.span_id
    ]
    names = [
        _attrs(s)["actorlog.tool.name"] for s in sorted(calls, key=lambda s: s.start_time or 0)
    ]
    model = "openai_agents.model_stream" if streamed else "openai_agents.model_call"
    assert names == [
        model,  # triage: hands off
        model,  # planner: search
        "openai_agents.tool.search",
        model,
        "openai_agents.tool.weather",
        model,
        "openai_agents.tool.book",
        model,  # the answer
    ]
    model_spans = [s for s in calls if _attrs(s)["actorlog.tool.name"] == model]
    assert [_attrs(s)["gen_ai.usage.input_tokens"] for s in model_spans] == [10, 30, 50, 70, 90]
    assert {_attrs(s)["gen_ai.request.model"] for s in model_spans} == {"TravelModel"}
    if streamed:
        assert all(
            int(str(_attrs(s)["actorlog.openai_agents.stream_events"])) > 3 for s in model_spans
        )
    tools = [
        s for s in calls if str(_attrs(s)["actorlog.tool.name"]).startswith("openai_agents.tool.")
    ]
    assert [_attrs(s)["actorlog.openai_agents.tool_name"] for s in tools] == [
        "search",
        "weather",
        "book",
    ]
