"""With no OpenTelemetry SDK configured (the library depends on the API only), actorlog runs,
imports no SDK, and stores no trace context or span ids. Runs in a fresh interpreter, since
this test session installs an SDK provider."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys
    import anyio
    from actorlog import ActorSystem
    from actorlog._journal.records import decode_entry
    from actorlog.stores import MemoryStore
    from tests.telemetry.telemetry_agents import Ask, Researcher
    from tests.durability.stream_agents import Narrator, Tell

    async def main() -> None:
        store = MemoryStore()
        async with ActorSystem(store, actors=[Researcher]) as system:
            ref = await system.spawn(Researcher, "r", snapshot_every=1)
            assert await ref.ask(Ask("charge:1")) == "found:charge:1|charged 7"
        async with ActorSystem(store, actors=[Researcher]) as system:
            await system.spawn(Researcher, "r")
        async with ActorSystem(store, actors=[Narrator]) as system:  # ctx.emit: no SDK either
            stream = system.ref(Narrator, "n").ask_stream(Tell("x", 2))
            assert [ev.number async for ev in stream] == [1, 2, 3], "events"
        await store.open()
        rows = {r.kind: decode_entry(r) for r in await store.read("r")}
        assert rows["message"].trace is None, rows["message"]
        assert rows["step"].span is None, rows["step"]

    anyio.run(main)
    leaked = sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk"))
    assert not leaked, leaked
    print("ok")
    """
)


def test_runs_without_an_sdk_and_imports_none() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
