"""Adaptive snapshots: does ``recovery_budget`` keep recovery under budget, and at what cost?

    python -m benchmarks.adaptive [--steps 400] [--budget 0.05]

One actor runs ``--steps`` messages on a fresh ``SqliteStore`` (default durability). Each
step burns a fixed amount of handler CPU (standing in for parsing a model's answer), makes
one ``ctx.call`` and appends to a state of the given size. The run stops at a random step
between steps/2 and steps (the same point for every policy: a crash at a random moment);
then a fresh ``ActorSystem`` recovers the actor and its measured recovery time is reported
against the budget, with the snapshot writes each policy paid for it. Policies compared:
``recovery_budget`` (adaptive), ``snapshot_every=100`` (fixed) and no snapshots.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.store import SnapshotRow
from actorlog.stores import SqliteStore

from ._common import (
    Table,
    bench_parser,
    configure_output,
    fmt_bytes,
    machine_info,
    quick,
    scratch_dir,
    write_report,
)


@tool(effect="read")
async def lookup(i: int) -> int:
    return i


@attrs.define
class Work:
    i: int
    cpu: float


@attrs.define
class Blob:
    items: list[str] = attrs.Factory(list)
    n: int = 0


class Worker(Actor[Blob]):
    snapshot_every = None
    state_size = 1_000  # set per run: the state is this large from the start

    def initial_state(self) -> Blob:
        return Blob(items=["x" * 100] * max(self.state_size // 103, 1))

    async def receive(self, ctx: Context, msg: Work) -> int:
        end = time.perf_counter() + msg.cpu
        while time.perf_counter() < end:  # handler CPU, re-spent on replay
            pass
        self.state.n += await ctx.call(lookup, msg.i)
        return self.state.n


class CountingStore(SqliteStore):
    """Counts snapshot writes and their bytes."""

    snapshots = 0
    snapshot_bytes = 0

    async def save_snapshot(self, snapshot: SnapshotRow) -> None:
        await super().save_snapshot(snapshot)
        self.snapshots += 1
        self.snapshot_bytes += snapshot.info.size


async def run_one(
    path: Path, policy: dict[str, Any], cpu: float, size: int, stop_at: int
) -> dict[str, float]:
    Worker.state_size = size
    store = CountingStore(path)
    async with ActorSystem(store, actors=[Worker]) as system:
        ref = await system.spawn(Worker, "w", **policy)
        cell = system._cells["w"]
        t0 = time.perf_counter()
        for i in range(stop_at):
            await ref.ask(Work(i, cpu))
        elapsed = time.perf_counter() - t0
        estimate = cell.estimated_recovery()
    async with ActorSystem(SqliteStore(path), actors=[Worker]) as system:
        await system.spawn(Worker, "w", **policy)
        found = system.last_recovery("w")
        rec = found.as_dict() if found is not None else {}
    return {
        "steps_per_s": stop_at / elapsed,
        "snapshots": store.snapshots,
        "snapshot_bytes_per_step": store.snapshot_bytes / stop_at,
        "recovery": float(rec.get("duration_s", 0.0)),
        "estimate_at_crash": estimate,
        "tail": float(rec.get("entries_read", 0)),
    }


def main() -> None:
    parser = bench_parser(__doc__, quick_help="--steps 100", writes=True)
    parser.add_argument("--steps", type=int, default=400, help="steps per setting")
    parser.add_argument("--budget", type=float, default=0.05, help="recovery_budget, seconds")
    parser.add_argument("--seed", type=int, default=7, help="random seed")
    args = parser.parse_args()
    quick(args, parser, steps=100)
    configure_output(args)
    rng = random.Random(args.seed)
    stop_at = rng.randint(args.steps // 2, args.steps)
    policies: list[tuple[str, dict[str, Any]]] = [
        (f"recovery_budget={args.budget}", {"recovery_budget": args.budget}),
        ("snapshot_every=100", {"snapshot_every": 100}),
        ("never", {}),
    ]
    table = Table(
        [
            "step CPU",
            "state",
            "policy",
            "steps/s",
            "snapshots",
            "snapshot bytes/step",
            "tail read",
            "estimate at crash (ms)",
            "recovery (ms)",
            "within budget",
        ]
    )
    with scratch_dir() as tmp:
        info = machine_info(tmp)
        for cpu in (0.0, 0.0005, 0.002):
            for size in (1_000, 1_000_000):
                for name, policy in policies:
                    path = tmp / f"a-{cpu}-{size}-{len(name)}.db"
                    r = anyio.run(run_one, path, policy, cpu, size, stop_at)
                    table.add(
                        f"{cpu * 1000:g} ms",
                        fmt_bytes(size),
                        name,
                        r["steps_per_s"],
                        int(r["snapshots"]),
                        fmt_bytes(r["snapshot_bytes_per_step"]),
                        int(r["tail"]),
                        r["estimate_at_crash"] * 1000,
                        r["recovery"] * 1000,
                        "yes" if r["recovery"] <= args.budget else "no",
                    )
                    print(table.text().splitlines()[-1], flush=True)
    body = (
        f"Crash after step {stop_at} of {args.steps}; budget {args.budget * 1000:g} ms. "
        "*recovery* is the runtime's measured recovery time in a fresh `ActorSystem` "
        "(snapshot load, tail read and verify, handler replay); *estimate at crash* is "
        "what the adaptive policy believed just before the crash.\n\n" + table.markdown()
    )
    out = write_report("adaptive", "Adaptive snapshots (recovery_budget)", body, info=info)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
