"""The agent process of tests/telemetry/test_phoenix_e2e.py.

    python -m tests.telemetry.telemetry_worker run DB JOBS HANG_AT
        sends JOBS jobs to the Writer "agent-1" inside a client span, and hangs inside the
        publish call of job HANG_AT (printing HANGING) until it is SIGKILLed.
    python -m tests.telemetry.telemetry_worker recover DB JOBS
        opens the same store (recovery runs on start), waits for the last job's reply, and
        prints one JSON line: the snapshots found before recovery and, per replayed step, the
        span its link points to.

    python -m tests.telemetry.telemetry_worker fanrun DB
        sends one message to the FanOut "fan-1" (tests/telemetry/concurrent_agents.py) and
        prints HANGING once its three parallel calls all run (they hang there) until it is
        SIGKILLed.
    python -m tests.telemetry.telemetry_worker fanrecover DB
        opens the same store, asks that message again (the resumed step re-runs the three
        calls in parallel) and prints its reply as one JSON line.

All configure the OpenTelemetry SDK the way an application would, entirely from the
standard environment variables: OTEL_EXPORTER_OTLP_ENDPOINT (the backend) and
OTEL_RESOURCE_ATTRIBUTES (service.name, and openinference.project.name for Phoenix).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from actorlog import ActorSystem
from actorlog._tracing.telemetry import ATTR, SPAN
from actorlog.stores import SqliteStore
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .concurrent_agents import MEET, Fan, FanOut
from .telemetry_agents import HANG_AT, Job, Writer

ACTOR = "agent-1"
FAN = "fan-1"


def setup(mode: str) -> tuple[TracerProvider, InMemorySpanExporter]:
    provider = TracerProvider(resource=Resource.create())  # reads OTEL_RESOURCE_ATTRIBUTES
    otlp = OTLPSpanExporter()  # reads OTEL_EXPORTER_OTLP_ENDPOINT
    if mode == "run":
        # Synchronous export: every span is in the backend as soon as it ends, so the spans
        # of the run that gets SIGKILLed are there too (a batch would die with the process).
        provider.add_span_processor(SimpleSpanProcessor(otlp))
    else:
        provider.add_span_processor(BatchSpanProcessor(otlp))  # flushed by shutdown()
    local = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(local))
    trace.set_tracer_provider(provider)
    return provider, local


async def run(db: str, jobs: int, hang_at: int) -> None:
    HANG_AT["job"] = f"job-{hang_at}"
    async with ActorSystem(SqliteStore(db), actors=[Writer]) as system:
        ref = await system.spawn(Writer, ACTOR)
        with trace.get_tracer("e2e-client").start_as_current_span("e2e.client"):
            for i in range(1, jobs + 1):
                await ref.send(Job(f"job-{i}"), message_id=f"job-{i}")
        # The client span has ended and its synchronous export returned: the driver may kill
        # us once it has seen this line too (else the kill can cut the export short).
        print("SENT", flush=True)
        await anyio.sleep_forever()


async def recover(db: str, jobs: int, local: InMemorySpanExporter) -> dict[str, Any]:
    store = SqliteStore(db)
    await store.open()
    snapshots = [(i.seq, i.handled_seq) for i in await store.list_snapshots(ACTOR)]
    await store.close()
    async with ActorSystem(SqliteStore(db), actors=[Writer]) as system:
        ref = system.ref(Writer, ACTOR)
        with anyio.fail_after(30):
            reply = await ref.ask(Job(f"job-{jobs}"), message_id=f"job-{jobs}")
    links = {
        str(span.attributes[ATTR.SEQ]): format(span.links[0].context.span_id, "016x")
        for span in local.get_finished_spans()
        if span.name == SPAN.REPLAY_STEP and span.attributes and span.links
    }
    return {"snapshots": snapshots, "reply": reply, "links": links}


async def fan_run(db: str) -> None:
    MEET.hang = True
    async with ActorSystem(SqliteStore(db), actors=[FanOut]) as system:
        ref = await system.spawn(FanOut, FAN)
        await ref.send(Fan("a"), message_id="fan-m1")
        await MEET.all_here.wait()
        print("HANGING", flush=True)
        await anyio.sleep_forever()


async def fan_recover(db: str) -> dict[str, Any]:
    async with ActorSystem(SqliteStore(db), actors=[FanOut]) as system:
        with anyio.fail_after(30):
            reply = await system.ref(FanOut, FAN).ask(Fan("a"), message_id="fan-m1")
    return {"reply": reply, "ran": sorted(MEET.ran)}


def main(argv: list[str]) -> None:
    mode, db = argv[0], argv[1]
    provider, local = setup("run" if mode == "fanrun" else mode)
    try:
        if mode == "fanrun":
            anyio.run(fan_run, db)
        elif mode == "fanrecover":
            print(json.dumps(anyio.run(fan_recover, db)), flush=True)
        elif mode == "run":
            jobs = int(argv[2])
            anyio.run(run, db, jobs, int(argv[3]))
        else:
            print(json.dumps(anyio.run(recover, db, int(argv[2]), local)), flush=True)
    finally:
        provider.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
