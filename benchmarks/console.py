"""The console's overview over many actors: how long a page takes to render.

    python -m benchmarks.console [--actors 10000] [--with-steps 200] [--runs 5]

Builds a SQLite store with ``--actors`` actors (``--with-steps`` of them with a real step in
their log, written by an ``ActorSystem``; the others registered with an empty log), then
renders console pages in-process (Starlette's TestClient: the whole request, store reads
included, no network) and prints the median and the slowest of ``--runs`` renders each. A
page derives statuses only for the actors it shows (``actorlog.ops.list_actors_page``), so the
overview's cost grows with the number of summary rows, not with the size of every log.
Measures; asserts nothing. Needs the web extra (``pip install 'actorlog[web]'``).
"""

from __future__ import annotations

import statistics
import time

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context
from actorlog.stores import SqliteStore
from actorlog.web import ServeConfig, create_app
from starlette.testclient import TestClient

from ._common import bench_parser, loadavg, quick, scratch_dir


@attrs.define
class Ping:
    n: int


@attrs.define
class Count:
    seen: int = 0


class Pinger(Actor[Count]):
    __actorlog_tag__ = "bench.Pinger"

    async def receive(self, ctx: Context, msg: Ping) -> int:
        self.state.seen += msg.n
        return self.state.seen


async def build(path: str, actors: int, with_steps: int) -> None:
    async with ActorSystem(SqliteStore(path), actors=[Pinger]) as system:
        for i in range(with_steps):
            ref = await system.spawn(Pinger, f"worker-{i:06d}")
            await ref.ask(Ping(1))
    store = SqliteStore(path)
    await store.open()
    try:
        for i in range(with_steps, actors):
            await store.register_actor(f"worker-{i:06d}", "bench.Pinger")
    finally:
        await store.close()


def main() -> None:
    ap = bench_parser(__doc__, quick_help="--actors 1000 --with-steps 50 --runs 1", writes=False)
    ap.add_argument("--actors", type=int, default=10_000, help="actors in the store")
    ap.add_argument("--with-steps", type=int, default=200, help="steps of the actor shown")
    ap.add_argument("--runs", type=int, default=5, help="requests per page; median")
    args = ap.parse_args()
    quick(args, ap, actors=1000, with_steps=50, runs=1)
    with scratch_dir() as d:
        db = str(d / "console.db")
        t0 = time.perf_counter()
        anyio.run(build, db, args.actors, min(args.with_steps, args.actors), backend="asyncio")
        print(f"built {args.actors:,} actors in {time.perf_counter() - t0:.1f} s")
        cfg = ServeConfig(store_url=f"sqlite:///{db}", source=db)
        pages = {
            "overview, first page (50 by id)": "/",
            "overview, sorted by pending, descending": "/?sort=pending&desc=1",
            "overview, page 100": "/?offset=4950",
            "overview, search 'worker-0001'": "/?q=worker-0001",
            "overview, status idle": "/?status=idle",
            "one actor's page": "/actor?id=worker-000000",
            "in-doubt queue": "/queue",
        }
        print(f"load average: {loadavg()}")
        print(f"{'page':45} {'median':>10} {'slowest':>10}")
        with TestClient(create_app(cfg), base_url="http://127.0.0.1") as client:
            for name, path in pages.items():
                times = []
                for _ in range(args.runs):
                    t = time.perf_counter()
                    r = client.get(path)
                    times.append(time.perf_counter() - t)
                    if r.status_code != 200:
                        raise SystemExit(f"{path}: HTTP {r.status_code}")
                med, worst = statistics.median(times), max(times)
                print(f"{name:45} {med * 1000:>7.1f} ms {worst * 1000:>7.1f} ms")


if __name__ == "__main__":
    main()
