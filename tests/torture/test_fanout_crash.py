"""Torture (issue 25): a fan-out agent SIGKILLed at random points, many times, resumed.

The workload of ``test_crash.py`` with ``Config.fanout``: a worker's ``fanout`` step runs
five tasks at once in a task group, each a read then an idempotent write that depends on
it (random latencies: they finish in a different order in every run), then races two
reads, the first to return cancelling the other. Each scenario kills the worker at a
durability boundary of those calls (intent committed, tool started or done, result
committed, step committed) or from outside after a random delay, restarts it until a run
completes, and checks it with the history checker (``driver.check``) against a
crash-free reference run of the seed:

* every step complete (each logged message has exactly one step) and no actor quarantined
  (a quarantine fails the run at once: ``workload._no_quarantine``);
* no completed call repeated: a call runs again only if a crash left its intent open, at
  most once per such crash; every fan-out write applied exactly once in the ledger;
* each race won by the contestant whose value was logged first, live and after every
  replay (the winner is in the actor's state; the log says which returned first).

Default: one SQLite scenario on asyncio (a fast case). ``ACTORLOG_SOAK=1`` runs ten, every
other one with the workers on trio. A failure prints its seed; ``ACTORLOG_TORTURE_SEED``
replays the session.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from .conftest import BASE_SEED, FIGURES, soak
from .driver import Outcome, RunPlan, check, run_scenario
from .workload import Config

JOBS = 10
WORKERS = 2
#: where a fan-out step is killed: around its parallel writes and its race
TARGETS = (
    "intent_commit_after@part_read",
    "result_commit_after@part_read",
    "intent_commit_after@part_write",
    "tool_before@part_write",
    "tool_after@part_write",
    "result_commit_before@part_write",
    "result_commit_after@part_write",
    "intent_commit_after@race_quote",
    "tool_after@race_quote",
    "result_commit_after@race_quote",
    "step_commit_before",
    "step_commit_after",
)


def _config(base: Path, name: str, seed: int, backend: str) -> Config:
    d = base / name
    d.mkdir(parents=True)
    return Config(
        db=str(d / "store.db"),
        ledger=str(d / "ledger.db"),
        out=str(d / "final.json"),
        seed=seed,
        jobs=JOBS,
        workers=WORKERS,
        backend=backend,
        fanout=True,
    )


def _plans(rng: random.Random, kills: int) -> Iterator[RunPlan]:
    """Mostly a kill at a boundary of the fan-out (its 1st-3rd crossing: a run that does
    not reach it completes, and ends the scenario); every fourth run killed from outside
    after a random delay (a run takes a few seconds, most of it start-up)."""
    for k in range(kills):
        if k % 4 == 3:
            yield RunPlan(kill_after=rng.uniform(1.5, 4.0))
        else:
            yield RunPlan(kill_spec=f"{rng.choice(TARGETS)}:{rng.randint(1, 3)}")


def _fanout_scenario(base: Path, seed: int, n: int, backend: str) -> Outcome:
    ref_cfg = _config(base, f"ref-{n}", seed, backend)
    ref = run_scenario(ref_cfg, iter(()))
    assert ref.runs == 1 and not ref.kills
    assert check(ref, ref) == [], check(ref, ref)
    fanouts = [job for job, who in ref.races.items() if who]
    assert fanouts, f"seed {seed}: the workload made no fan-out step"
    cfg = _config(base, f"crash-{n}", seed, backend)
    got = run_scenario(cfg, _plans(random.Random(seed), 6), log=base / "kills.log")
    problems = check(ref, got)
    assert not problems, (
        f"fan-out scenario (seed {seed}, {backend}; session base seed {BASE_SEED}: replay "
        f"with ACTORLOG_TORTURE_SEED={BASE_SEED}); kills {got.kills}:\n  " + "\n  ".join(problems)
    )
    parts = [ident for (tool, ident) in got.attempts if tool == "part_write"]
    assert len(set(parts)) == 5 * len(fanouts), (seed, sorted(parts))
    FIGURES["fan-out scenarios"] += 1
    FIGURES["fan-out kills"] += len(got.kills)
    return got


def test_fanout_agent_killed_at_random_points(seed: int, tmp_path: Path) -> None:
    kills = 0
    for n in range(soak(1)):
        backend = "trio" if n % 2 else "asyncio"
        got = _fanout_scenario(tmp_path, seed + n, n, backend)
        kills += len(got.kills)
    assert kills > 0, f"seed {seed}: no run was killed"
