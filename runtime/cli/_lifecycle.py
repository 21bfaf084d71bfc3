"""``actorlog cancel | terminate | delete`` and ``actorlog actors --deleted`` (the commands
that end actors; the rest of the CLI is in ``_cli``). Through :mod:`actorlog.ops.lifecycle`.

On SQLite they work offline: a runtime running on the file holds it, and the command says so
(``StoreLockedError``). On PostgreSQL they work live, through the owner's inbox."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

from .. import ops
from .._journal.errors import StoreLockedError
from .._views.term import Out, clean, json_line, when
from ..ops import lifecycle as life
from ..store import Store
from ._parse import decision

__all__ = ["cmd_cancel", "cmd_delete", "cmd_deleted", "cmd_terminate"]

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2


def _url(arg: str) -> str:
    return arg if "://" in arg else "sqlite:///" + os.path.abspath(arg)


@contextlib.asynccontextmanager
async def _writable(arg: str, what: str) -> AsyncIterator[Store]:
    try:
        async with ops.opened(_url(arg), read_only=False) as store:
            yield store
    except StoreLockedError as exc:
        raise StoreLockedError(
            exc.path,
            f"{exc.holder}; on SQLite 'actorlog {what}' works only offline. Stop that "
            f"runtime and run it again, or call system.{what}(...) in that process. On "
            "PostgreSQL it works live",
        ) from None


def _live(store: Store) -> bool:
    return store.capabilities.leases


async def cmd_cancel(args: argparse.Namespace, out: Out) -> int:
    async with _writable(args.store, "cancel") as store:
        await life.cancel(store, args.actor, **decision(args))
        live = _live(store)
    out.line(f"cancel of {clean(args.actor)}'s running step requested")
    out.line(
        out.s.dim(
            "The runtime that owns it cancels the running step now (its tool call is "
            "recorded cancelled, a write tool's as in doubt)."
            if live
            else "No runtime runs it now: the next runtime to resume its interrupted step "
            "cancels that step. See 'actorlog history' for the outcome."
        )
    )
    return EXIT_OK


async def cmd_terminate(args: argparse.Namespace, out: Out) -> int:
    async with _writable(args.store, "terminate") as store:
        await life.terminate(store, args.actor, **decision(args))
        live = _live(store)
    out.line(f"terminated {clean(args.actor)}: it takes no more steps; its log stays for audit")
    if live:
        out.line(out.s.dim("Its owner (if one runs it) cancels a running step now."))
    return EXIT_OK


async def cmd_delete(args: argparse.Namespace, out: Out) -> int:
    async with _writable(args.store, "delete") as store:
        try:
            d = await life.delete(
                store,
                args.actor,
                yes=args.yes,
                force=args.force,
                **decision(args),
            )
        except life.DeleteRefusedError as exc:
            print(f"actorlog: refused: {clean(exc)}", file=sys.stderr)
            return EXIT_FOUND
    if d.forced:
        print(
            f"actorlog: warning: {clean(d.actor_id)} had not ended; its unfinished work "
            "is deleted with it",
            file=sys.stderr,
        )
    out.line(
        f"deleted {clean(d.actor_id)} ({clean(d.actor_type)}, {d.last_seq} entries); "
        f"audit row {d.audit_id} by {clean(d.by)}"
    )
    return EXIT_OK


async def cmd_deleted(args: argparse.Namespace, out: Out) -> int:
    """``actorlog actors --deleted``: the store's audit of deleted actors."""
    async with ops.opened(_url(args.store)) as store:
        gone = await life.deleted(store)
    if args.json:
        for d in gone:
            json_line(out.stream, ops.to_json(d))
        return EXIT_OK
    if not gone:
        out.line("no actors deleted from this store")
        return EXIT_OK
    header = ["ACTOR", "TYPE", "DELETED", "BY", "WAS", "LAST SEQ", "REASON"]
    rows: list[list[Any]] = [
        [
            clean(d.actor_id),
            clean(d.actor_type),
            when(d.at),
            clean(d.by),
            d.ended or "forced",
            str(d.last_seq),
            clean(d.reason) or "-",
        ]
        for d in gone
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out.line(
        out.s.bold("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    )
    for r in rows:
        out.line("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return EXIT_OK
