"""What actorlog's tracing costs when the application configured NO OpenTelemetry SDK.

actorlog depends on opentelemetry-api only; without an SDK every span is the API's no-op span
(through the ProxyTracer it took at import time) and every metric call is a no-op. This
measures what that still costs:

1. **micro**: the exact telemetry calls of one live step with two tool calls (a step span,
   two tool_call spans with their attributes, the outcome, the span ids stored with the step,
   the trace context stored with the message, three append metrics), timed with timeit.
2. **macro**: steps/s of a real actor (``ask`` -> step -> read tool + idempotent write tool)
   on MemoryStore (no I/O: the worst case for relative overhead) and optionally SqliteStore,
   with telemetry as shipped (no SDK) vs. telemetry *removed* (tracer and helpers patched
   to do nothing at all), in interleaved rounds; the median per-step time of each.

Usage:  python -m benchmarks.telemetry_overhead [--steps 2000] [--rounds 9] [--sqlite]
Prints a Markdown summary (docs/tracing.md quotes it).
"""

from __future__ import annotations

import contextlib
import platform
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import actorlog._core.step as _step
import actorlog._effects.calls as _calls
import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, tool
from actorlog._tracing import telemetry as _telemetry
from actorlog._tracing.telemetry import ATTR, SPAN
from actorlog.store import Store
from actorlog.stores import MemoryStore, SqliteStore
from opentelemetry import trace

from ._common import bench_parser, quick


@attrs.define
class Ask:
    q: str


@attrs.define
class State:
    n: int = 0


@tool(effect="read", name="bench.lookup")
async def lookup(q: str) -> str:
    return q


@tool(effect="write", idempotent=True, name="bench.publish")
async def publish(q: str, *, idempotency_key: str) -> str:
    return idempotency_key


class Agent(Actor[State]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Ask) -> int:
        await ctx.call(lookup, msg.q)
        await ctx.call(publish, msg.q)
        self.state.n += 1
        return self.state.n


# -- telemetry removed: the baseline ----------------------------------------------------------


class _NullSpan:
    def set_attribute(self, *args: Any) -> None:
        pass

    def set_attributes(self, *args: Any) -> None:
        pass

    def add_event(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_status(self, *args: Any, **kwargs: Any) -> None:
        pass

    def is_recording(self) -> bool:
        return False

    def __enter__(self) -> _NullSpan:
        return self

    def __exit__(self, *args: object) -> None:
        return None


_NULL_SPAN = _NullSpan()


class _NullTracer:
    def start_as_current_span(self, *args: Any, **kwargs: Any) -> _NullSpan:
        return _NULL_SPAN


@contextlib.contextmanager
def telemetry_removed() -> Iterator[None]:
    """Patch every telemetry call site of the step path to do nothing."""
    null = _NullTracer()
    patches: list[tuple[Any, str, Any]] = [
        (_step, "tracer", null),  # the step span
        (_calls, "tracer", null),  # the tool call spans
        (_telemetry, "inject", lambda: None),
        (_telemetry, "extract", lambda carrier: None),
        (_telemetry, "span_ids", lambda: None),
        (_telemetry, "link_to", lambda ids: []),
        (_telemetry, "record_append", lambda seconds, rows: None),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    try:
        for obj, name, value in patches:
            setattr(obj, name, value)
        yield
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)


# -- measurements -----------------------------------------------------------------------------


def micro(number: int = 200_000) -> float:
    """Seconds per step of the telemetry calls a live step with two tool calls makes."""
    tracer = _telemetry.tracer
    step_attrs: dict[str, Any] = {
        ATTR.ACTOR_ID: "a",
        ATTR.ACTOR_TYPE: "bench.Agent",
        ATTR.SEQ: 1,
        ATTR.MESSAGE_TYPE: "bench.Ask",
        ATTR.MESSAGE_ID: "m",
    }
    call_attrs: dict[str, Any] = {
        ATTR.ACTOR_ID: "a",
        ATTR.SEQ: 1,
        ATTR.TOOL: "bench.lookup",
        ATTR.TOOL_EFFECT: "read",
        ATTR.TOOL_POLICY: "rerun",
        ATTR.IDEMPOTENCY_KEY: "a:1:0",
        ATTR.ATTEMPT: 1,
        ATTR.INTENT_SEQ: 2,
        ATTR.SERVED_FROM_LOG: False,
    }

    def one_step() -> None:
        _telemetry.inject()
        parent = _telemetry.extract(None)
        with tracer.start_as_current_span(SPAN.STEP, context=parent, attributes=step_attrs) as s:
            for _ in range(2):
                with tracer.start_as_current_span(SPAN.TOOL_CALL, attributes=call_attrs):
                    pass
            s.set_attribute(ATTR.OUTCOME, "ok")
            _telemetry.span_ids()
        for _ in range(3):
            _telemetry.record_append(1e-5, 2)

    one_step()
    return min(timeit.repeat(one_step, number=number, repeat=5)) / number


async def _steps(store: Store, steps: int, tag: str) -> float:
    """Seconds per step, ``steps`` asks in a row on a fresh actor."""
    async with ActorSystem(store, actors=[Agent]) as system:
        ref = await system.spawn(Agent, tag)
        for i in range(20):  # warm up
            await ref.ask(Ask(str(i)))
        t0 = time.perf_counter()
        for i in range(steps):
            await ref.ask(Ask(str(i)))
        return (time.perf_counter() - t0) / steps


def macro(make_store: Any, steps: int, rounds: int) -> tuple[float, float]:
    """Median seconds per step: (as shipped with no SDK, telemetry removed)."""
    shipped: list[float] = []
    removed: list[float] = []
    for r in range(rounds):
        order = ["shipped", "removed"] if r % 2 == 0 else ["removed", "shipped"]
        for mode in order:
            store = make_store(f"{mode}-{r}")
            if mode == "shipped":
                shipped.append(anyio.run(_steps, store, steps, f"{mode}-{r}"))
            else:
                with telemetry_removed():
                    removed.append(anyio.run(_steps, store, steps, f"{mode}-{r}"))
    return statistics.median(shipped), statistics.median(removed)


def main() -> None:
    parser = bench_parser(__doc__, quick_help="--steps 300 --rounds 3", writes=False)
    parser.add_argument("--steps", type=int, default=2000, help="steps per round")
    parser.add_argument("--rounds", type=int, default=9, help="rounds; median")
    parser.add_argument("--sqlite", action="store_true", help="also measure on SqliteStore")
    args = parser.parse_args()
    quick(args, parser, steps=300, rounds=3)

    provider = trace.get_tracer_provider()
    if type(provider).__name__ != "ProxyTracerProvider":
        sys.exit(f"an SDK TracerProvider is configured ({provider!r}); run without one")
    if any(m.startswith("opentelemetry.sdk") for m in sys.modules):
        sys.exit("opentelemetry.sdk got imported; this benchmark measures the no-SDK case")

    per_step_calls = micro()
    mem = macro(lambda tag: MemoryStore(), args.steps, args.rounds)
    rows: list[tuple[str, float, float]] = [("MemoryStore step", *mem)]
    if args.sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            sql = macro(
                lambda tag: SqliteStore(Path(tmp) / f"{tag}.db"), args.steps // 4, args.rounds
            )
        rows.append(("SqliteStore step (fsync)", *sql))

    print(f"Python {platform.python_version()} on {platform.machine()}, no OpenTelemetry SDK")
    print()
    print("| measured | as shipped (no SDK) | telemetry removed | overhead |")
    print("|---|---:|---:|---:|")
    print(f"| telemetry calls of one step (micro) | {per_step_calls * 1e6:.2f} µs | - | - |")
    for name, shipped, removed in rows:
        diff = shipped - removed
        print(
            f"| {name} | {shipped * 1e6:.1f} µs | {removed * 1e6:.1f} µs | "
            f"{diff * 1e6:+.1f} µs ({diff / removed * 100:+.1f} %) |"
        )
    print()
    print(
        f"micro: the no-op telemetry of one step is {per_step_calls / mem[1] * 100:.1f} % "
        f"of a MemoryStore step ({mem[1] * 1e6:.0f} µs without telemetry)"
    )


if __name__ == "__main__":
    main()
