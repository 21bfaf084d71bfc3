"""``actorlog replay-check`` (recorded histories replayed against the current code) and
``actorlog restart`` (a quarantined actor restarted once its cause is fixed); see
docs/upgrading.md."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from .. import Actor, ops
from .._views.term import Out, json_line
from ..testing import _replay as _replaycheck
from ._parse import decision

__all__ = ["cmd_replay_check", "cmd_restart", "load_class"]

EXIT_OK, EXIT_FOUND = 0, 1


class ClassSpecError(ValueError):
    """A ``module:Class`` argument that names nothing importable."""


def load_class(spec: str) -> type[Any]:
    """The class ``module:QualName`` names (the current directory is importable, as with
    ``python -m``)."""
    module, sep, qualname = spec.partition(":")
    if not sep or not module or not qualname:
        raise ClassSpecError(f"{spec!r} is not module:Class (e.g. myapp.agents:Researcher)")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module)
    except Exception as exc:  # not found, or the module itself fails on import
        raise ClassSpecError(
            f"cannot import {module!r} (from {spec!r}): {type(exc).__name__}: {exc}"
        ) from None
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ClassSpecError(f"{module!r} has no {qualname!r} (from {spec!r})") from None
    if not isinstance(obj, type):
        raise ClassSpecError(f"{spec!r} is not a class")
    return obj


async def cmd_replay_check(args: argparse.Namespace, out: Out) -> int:
    """Exit 0 if every recorded history replays, 1 on any divergence."""
    actors: list[type[Actor[Any]]] = []
    for spec in args.actors:
        cls = load_class(spec)
        if not issubclass(cls, Actor):
            raise ClassSpecError(f"{spec!r} is not an actorlog Actor class")
        actors.append(cls)
    messages = [load_class(spec) for spec in args.messages or ()]
    source = args.store
    if "://" not in source and not os.path.exists(source):
        raise ClassSpecError(f"no such store or export file: {source}")
    report = await _replaycheck.replay(
        source, actors=actors, messages=messages, actor_ids=args.actor or None
    )
    if args.json:
        for d in report.divergences:
            json_line(out.stream, {"type": "divergence", **_plain(d)})
        for actor_id, why in report.skipped:
            json_line(out.stream, {"type": "skipped", "actor_id": actor_id, "reason": why})
        json_line(
            out.stream,
            {"type": "summary", "actors": report.actors, "steps": report.steps, "ok": report.ok},
        )
    else:
        for d in report.divergences:
            out.line(out.s.red("DIVERGED ") + str(d))
            out.line(out.s.dim(f"  {d.error}"))
        for actor_id, why in report.skipped:
            out.line(out.s.yellow("skipped ") + f"{actor_id}: {why}")
        verdict = (
            out.s.green("ok")
            if report.ok
            else out.s.red(f"{len(report.divergences)} actor(s) diverged")
        )
        out.line(f"replayed {report.actors} actor(s), {report.steps} step(s): {verdict}")
    return EXIT_OK if report.ok else EXIT_FOUND


def _plain(d: _replaycheck.Divergence) -> dict[str, Any]:
    return {
        "actor_id": d.actor_id,
        "actor_type": d.actor_type,
        "step_seq": d.step_seq,
        "index": d.index,
        "task": d.task,
        "expected": d.expected,
        "got": d.got,
        "error": d.error,
    }


async def cmd_restart(args: argparse.Namespace, out: Out) -> int:
    url = args.store if "://" in args.store else "sqlite:///" + os.path.abspath(args.store)
    async with ops.opened(url, read_only=False) as store:
        was = await ops.restart(store, args.actor, **decision(args))
    out.line(f"recorded the restart of {args.actor} (it was quarantined: {was})")
    out.line(
        out.s.dim(
            "The next runtime to start it (spawn, a message, or on start if it has "
            "unfinished work) recovers it with the code it runs. A runtime running now "
            "keeps it quarantined: call system.restart(actor_id) there, or restart it."
        )
    )
    return EXIT_OK
