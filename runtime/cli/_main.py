"""The ``actorlog`` command: the operator's view of a store (see docs/operators.md).

Thin: the commands, ``main`` and exit codes. Everything it knows about the log comes from
:mod:`actorlog.ops`, which is the same thing as a Python API. The parser is in ``_cliparse``,
the terminal timeline of ``history`` in ``_clihistory``, and the formatting it shares with the
HTML timeline (``_html``) in ``_term``.

Exit codes: 0 done; 1 ``verify`` found damage, or ``fork`` refused without ``--yes``;
2 anything that could not be done (bad arguments, store unreadable, actor or entry not found,
intent not in doubt). Errors go to stderr as one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit, urlunsplit

import anyio
import attrs

from .. import ops
from .._journal.checks import parse_json
from .._journal.errors import ActorlogError, ConfigurationError
from .._views.term import (
    Out,
    Progress,
    Style,
    ago,
    call_text,
    clean,
    in_doubt_text,
    json_line,
    json_text,
    short,
    status_text,
    task_text,
    use_color,
    when,
)
from ._check import ClassSpecError, cmd_replay_check, cmd_restart
from ._history import HistoryPrinter
from ._lifecycle import cmd_cancel, cmd_delete, cmd_deleted, cmd_terminate
from ._parse import build_parser, decision
from ._timers import print_timers

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2


def _store_url(arg: str) -> str:
    """A URL, or a path to a SQLite file."""
    if "://" in arg:
        return arg
    return "sqlite:///" + os.path.abspath(arg)


def shown_url(arg: str) -> str:
    """The store as given, without a password (it ends up in shared HTML and terminals)."""
    try:
        parts = urlsplit(arg)
        if parts.password is None:
            return arg
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return arg


async def cmd_leases(args: argparse.Namespace, out: Out) -> int:
    """``actorlog leases``: the ownership view (kept apart from ``actors``)."""
    async with ops.opened(_store_url(args.store)) as store:
        found = await ops.leases(store)
    if args.json:
        for lease in found:
            json_line(out.stream, {**attrs.asdict(lease), "live": lease.live})
        return EXIT_OK
    if not found:
        out.line("no leases in this store")
        return EXIT_OK
    header = ["ACTOR", "OWNER", "TOKEN", "EXPIRES IN"]
    rows = [
        [
            lease.actor_id,
            lease.owner or "-",
            str(lease.token),
            f"{lease.expires_in:.1f}s" if lease.live else "free",
        ]
        for lease in found
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out.line(
        out.s.bold("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    )
    for r in rows:
        out.line("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return EXIT_OK


async def cmd_timers(args: argparse.Namespace, out: Out) -> int:
    """``actorlog timers``: pending, fired and cancelled timers and schedules."""
    async with ops.opened(_store_url(args.store)) as store:
        found = await ops.timers(store, args.actor)
    print_timers(found, out, as_json=args.json)
    return EXIT_OK


async def cmd_actors(args: argparse.Namespace, out: Out) -> int:
    if args.deleted:
        return await cmd_deleted(args, out)
    async with ops.opened(_store_url(args.store)) as store:
        actors = await ops.list_actors(store)
        rulings = await ops.waiting_rulings(store)
    if args.json:  # each actor's cancelled writes needing a ruling in its "needs_ruling"
        ruled: dict[str, list[Any]] = {}
        for a, c in rulings:
            ruled.setdefault(a.actor_id, []).append(ops.to_json(c))
        for a in actors:
            json_line(out.stream, {**ops.to_json(a), "needs_ruling": ruled.get(a.actor_id, [])})
        return EXIT_OK
    s = out.s
    if not actors:
        out.line("no actors in this store")
        return EXIT_OK
    now = time.time()
    header = ["ACTOR", "TYPE", "STATUS", "LAST SEQ", "SNAPSHOT", "PENDING", "IN DOUBT"]
    rows = []
    for a in actors:
        snap = (
            "-"
            if a.last_snapshot_seq is None
            else (f"{a.last_snapshot_seq} ({ago(a.last_snapshot_at, now)})")
        )
        doubt = in_doubt_text(a)
        rows.append(
            [
                clean(a.actor_id),
                clean(a.actor_type),
                a.status,
                str(a.last_seq),
                snap,
                str(a.pending_messages),
                doubt,
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out.line(s.bold("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()))
    for r in rows:
        cells = [
            c.ljust(w) if i != 3 and i != 5 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        cells[2] = status_text(s, r[2]) + " " * (widths[2] - len(r[2]))
        out.line("  ".join(cells).rstrip())
    for a in actors:
        if a.problem:
            out.line(s.red(clean(f"{a.actor_id}: {a.problem}")))
    waiting = [(a, i) for a in actors for i in a.in_doubt if i.needs_operator]
    if waiting:
        out.line()
        out.line(s.yellow(f"{len(waiting)} tool call(s) may or may not have happened:"))
        for a, i in waiting:
            out.line(
                f"  {clean(a.actor_id)} intent {i.intent_seq}: "
                f"{call_text(i.tool, i.args, i.kwargs)} key {clean(i.key)}"
            )
            out.line(
                s.dim(
                    f"    actorlog resolve {shown_url(args.store)} {clean(a.actor_id)} "
                    f"{i.intent_seq} "
                    "--result JSON | --retry | --fail MESSAGE"
                )
            )
    if rulings:  # cancelled writes in doubt: their steps went on (docs/operators.md)
        out.line()
        out.line(s.yellow(f"{len(rulings)} cancelled write(s) need a ruling:"))
        for a, c in rulings:
            out.line(
                f"  {clean(a.actor_id)} intent {c.intent_seq}: "
                f"{call_text(c.tool, c.args, c.kwargs)} ({task_text(c.task)})"
            )
            out.line(
                s.dim(
                    f"    actorlog resolve {shown_url(args.store)} {clean(a.actor_id)} "
                    f"{c.intent_seq} --result JSON | --fail MESSAGE"
                )
            )
    return EXIT_OK


_ITEM_TYPE: dict[type, str] = {
    ops.ActorStatus: "actor",
    ops.Step: "step",
    ops.SnapshotView: "snapshot",
    ops.Event: "event",
    ops.Finding: "damage",
}


async def cmd_history(args: argparse.Namespace, out: Out) -> int:
    """Streams: the log is read in pages and each step is printed once it is complete."""
    async with (
        ops.opened(_store_url(args.store)) as store,
        contextlib.aclosing(ops.iter_history(store, args.actor, since=args.since)) as items,
    ):
        if args.html:
            from .._views.html import write_history

            _output_path(args.html, "--html")
            await write_history(items, args.html, source=shown_url(args.store), since=args.since)
            print(f"wrote {clean(args.html)}", file=sys.stderr)
            return EXIT_OK
        if args.json:
            async for item in items:
                json_line(out.stream, {"type": _ITEM_TYPE[type(item)], **ops.to_json(item)})
            return EXIT_OK
        printer = HistoryPrinter(out, shown_url(args.store), since=args.since)
        async for item in items:
            printer.item(item)
        printer.end()
    return EXIT_OK


async def cmd_show(args: argparse.Namespace, out: Out) -> int:
    async with ops.opened(_store_url(args.store)) as store:
        v = await ops.show(store, args.actor, args.seq)
    if args.json:
        json_line(out.stream, ops.to_json(v))
        return EXIT_OK
    s = out.s
    out.line(s.bold(clean(f"{v.actor_id} seq {v.seq}: {v.kind} {v.type_tag}")))
    out.line(f"  ref         {v.ref}")
    out.line(f"  message id  {clean(v.message_id) if v.message_id is not None else '-'}")
    check = s.green("ok") if v.valid else s.red(clean(f"DAMAGED: {v.problem}"))
    out.line(f"  checksum    {v.checksum:#010x} (computed {v.computed_checksum:#010x}) {check}")
    out.line(f"  size        {v.size:,} bytes")
    at = v.payload.get("at") if isinstance(v.payload, dict) else None
    if isinstance(at, int | float):
        out.line(f"  time        {when(at)}")
    out.line("payload:")
    for line in json_text(v.payload, indent=2).splitlines():
        out.stream.write("  " + line + "\n")  # in full, never cut
    if v.related:
        out.line("related:")
        for r in v.related:
            out.line(
                clean(f"  {r['seq']:>6}  {r['kind']:8} {r['type_tag']}  ") + s.dim(r["relation"])
            )
    return EXIT_OK


async def cmd_verify(args: argparse.Namespace, out: Out) -> int:
    progress = Progress(sys.stderr)
    try:
        async with ops.opened(_store_url(args.store)) as store:
            report = await ops.verify(store, args.actor, progress=progress)
    finally:
        progress.clear()
    if args.json:
        json_line(
            out.stream,
            {
                "ok": report.ok,
                "actors": report.actors,
                "entries": report.entries,
                "snapshots": report.snapshots,
                "compacted": report.compacted,
                "findings": ops.to_json(report.findings),
                "limits": report.limits,
            },
        )
        return EXIT_OK if report.ok else EXIT_FOUND
    s = out.s
    summary = (
        f"checked {report.actors} actor(s), {report.entries:,} entries, "
        f"{report.snapshots} snapshot(s)"
    )
    if report.compacted:  # compaction is not damage: say where the kept logs start
        starts = ", ".join(f"{k} from seq {v}" for k, v in list(report.compacted.items())[:5])
        more = len(report.compacted) - 5
        summary += f"; compacted logs: {starts}" + (f" and {more} more" if more > 0 else "")
    if report.ok:
        out.line(s.green("ok") + f": {summary}; no damage found")
        for limit in report.limits:  # what no check of the rows can see (SQLite's own files)
            out.line(s.dim(f"note: {limit}"))
        return EXIT_OK
    out.line(s.red(f"DAMAGE: {len(report.findings)} problem(s)") + f" ({summary})")
    for f in report.findings:
        where = {
            "entry": f"seq {f.seq}",
            "snapshot": f"snapshot seq {f.seq}",
            "actor": "summary row" if f.check != "integrity" else "pages",
            "store": "",
        }[f.where]
        who = f"{f.actor_id} {where}" if f.where != "store" else "the store's file"
        out.line(clean(f"  {who}: {f.check} check failed: {f.detail}"))
    out.line(
        s.dim(
            "Damaged actors are quarantined by the runtime; nothing is cut or rewritten "
            "automatically. See docs/operators.md."
        )
    )
    for limit in report.limits:
        out.line(s.dim(f"note: {limit}"))
    return EXIT_FOUND


async def cmd_resolve(args: argparse.Namespace, out: Out) -> int:
    kwargs: dict[str, Any] = {}
    if args.result is not None:
        try:
            kwargs["result"] = parse_json(args.result, "--result", quoted="--result '\"PAGE-1\"'")
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
    elif args.retry:
        kwargs["retry"] = True
    else:
        kwargs["fail"] = args.fail
    async with ops.opened(_store_url(args.store), read_only=False) as store:
        d = await ops.resolve(store, args.actor, args.intent_seq, **decision(args), **kwargs)
    what = {
        "result": f"result {short(d.value, 60)}",
        "retry": "retry",
        "fail": f"fail ({short(d.error, 60)})",
    }[d.action]
    out.line(
        f"recorded decision seq {d.seq} on intent seq {args.intent_seq} of "
        f"{args.actor}: {what}, by {d.by}" + (f", because {d.reason}" if d.reason else "")
    )
    out.line(
        out.s.dim(
            "The actor continues when a runtime next recovers it (on start, since it "
            "has unfinished work). A runtime running it right now will not see this "
            "decision until it restarts."
        )
    )
    return EXIT_OK


async def cmd_compact(args: argparse.Namespace, out: Out) -> int:
    async with ops.opened(_store_url(args.store), read_only=False) as store:
        done = await ops.compact(store, args.actor, retention=args.retention, by=args.by)
    if args.json:
        for r in done:
            json_line(out.stream, ops.to_json(r))
        return EXIT_OK
    for r in done:
        if r.removed:
            text = f"removed {r.removed:,} entries; the log starts at seq {r.first_seq}"
        else:
            text = f"nothing removed (log starts at seq {r.first_seq})"
        out.line(clean(f"{r.actor_id}: {text} [{r.retention}; stopped by {r.reason}]"))
    total = sum(r.removed for r in done)
    out.line(out.s.dim(f"{len(done)} actor(s), {total:,} entries removed"))
    return EXIT_OK


def _print_effects(out: Out, effects: Sequence[ops.ExternalEffect], at: int) -> None:
    s = out.s
    out.line(
        s.yellow(
            f"{len(effects)} external write effect(s) after seq {at} already happened "
            "(or may have) in the original run:"
        )
    )
    for e in effects:
        text = (
            call_text(e.name, e.args, e.kwargs)
            if e.kind == "tool"
            else f"send {short(e.args[0] if e.args else None)} to {e.name}"
        )
        again = "  (the fork will run it again)" if e.repeated_by_fork else ""
        out.line(
            f"  seq {e.seq:>6}  step {e.step_seq:>6}  {text}  {e.outcome}"
            + (f"  key {e.key}" if e.key else "")
            + s.yellow(again)
        )


def _one_of(positional: Any, option: Any, what: str, flag: str) -> Any:
    """``fork``'s SEQ and NEW_ID, given as arguments or as ``--at``/``--as`` (not both)."""
    if positional is not None and option is not None and positional != option:
        raise UsageError(f"{what} given twice ({positional} and {flag} {option}): give one")
    value = positional if positional is not None else option
    if value is None:
        raise UsageError(f"fork needs {what}: actorlog fork STORE ACTOR SEQ NEW_ID")
    return value


async def cmd_fork(args: argparse.Namespace, out: Out) -> int:
    at = _one_of(args.seq, args.at, "SEQ", "--at")
    new_id = _one_of(args.new_id, args.as_id, "NEW_ID", "--as")
    async with ops.opened(_store_url(args.store), read_only=False) as store:
        try:
            r = await ops.fork(store, args.actor, at=at, new_id=new_id, yes=args.yes, by=args.by)
        except ops.ForkRefusedError as exc:
            _print_effects(out, exc.effects, exc.at)
            for w in exc.warnings:
                out.line(out.s.red(f"  could not read: {w}"))
            print(
                f"actorlog: refused: {len(exc.effects)} external effect(s) after seq {exc.at} "
                "already happened (or may have) in the original run, and forking cannot undo "
                "them; review the list above and re-run with --yes to fork anyway",
                file=sys.stderr,
            )
            return EXIT_FOUND
    if r.effects:
        _print_effects(out, r.effects, r.at)
    snap = f"snapshot seq {r.snapshot_seq} copied" if r.snapshot_seq else "no snapshot to copy"
    out.line(
        f"forked {r.source_id} at seq {r.at} as {out.s.bold(r.actor_id)}: "
        f"{r.entries_copied} entries copied, {snap}"
    )
    out.line(out.s.dim(f"Run it with system.spawn(<its class>, {r.actor_id!r})."))
    return EXIT_OK


async def cmd_export(args: argparse.Namespace, out: Out) -> int:
    if args.html:  # an alias: the HTML timeline is history's (one way to write it)
        if args.output or args.raw:
            raise UsageError("--html writes the HTML timeline; it takes no -o or --raw")
        args.since, args.json = 0, False
        return await cmd_history(args, out)
    stream: TextIO = out.stream
    to_file = bool(args.output) and args.output != "-"
    if to_file:
        _output_path(args.output, "-o")
    f = None
    try:
        async with (
            ops.opened(_store_url(args.store)) as store,
            contextlib.aclosing(ops.export(store, args.actor, raw=args.raw)) as items,
        ):
            # the store opened and the actor's first entry read before the file is created:
            # a failed export leaves no empty file behind
            first = await anext(items, None)
            if to_file:
                f = open(args.output, "w", encoding="utf-8")  # noqa: ASYNC230,SIM115  # local file, closed below
                stream = f
            if first is not None:
                json_line(stream, first)
            async for item in items:
                json_line(stream, item)
    finally:
        if f is not None:
            f.close()
    return EXIT_OK


def _output_path(arg: str, option: str) -> str:
    """A file name to write (``-o``, ``--html``), refused as a usage error if no file
    can have it (instead of the ``ValueError`` open() raises)."""
    if "\x00" in arg:
        raise UsageError(f"{option} {clean(arg)}: a file name cannot contain a NUL character")
    return arg


class UsageError(Exception):
    """Bad command-line input that argparse could not catch."""


#: the distributions the console (``actorlog serve``) needs: the ``web`` extra
_WEB_MODULES = ("starlette", "jinja2", "markupsafe", "uvicorn", "multipart", "python_multipart")


async def cmd_serve(args: argparse.Namespace, out: Out) -> int:
    """``actorlog serve``: the operator console in the browser (``actorlog.web``)."""
    try:
        from ..web import serve as web
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in _WEB_MODULES:
            raise
        raise UsageError(
            f"actorlog serve needs the web extra ({exc.name} is not installed): "
            "pip install 'actorlog[web]'"
        ) from None
    url = _store_url(args.store)
    try:
        cfg = web.build(
            url,
            shown_url(args.store),
            host=args.host,
            port=args.port,
            allow_writes=args.allow_writes,
            token=args.token,
            trace_url=args.trace_url,
        )
    except ActorlogError as exc:
        raise UsageError(str(exc)) from None
    async with ops.opened(url):  # fail here, with the CLI's message, if it cannot be read
        pass
    await web.serve(cfg, host=args.host, port=args.port)
    return EXIT_OK


_COMMANDS = {
    "actors": cmd_actors,
    "history": cmd_history,
    "show": cmd_show,
    "verify": cmd_verify,
    "resolve": cmd_resolve,
    "fork": cmd_fork,
    "compact": cmd_compact,
    "leases": cmd_leases,
    "timers": cmd_timers,
    "export": cmd_export,
    "serve": cmd_serve,
    "replay-check": cmd_replay_check,
    "restart": cmd_restart,
    "cancel": cmd_cancel,
    "terminate": cmd_terminate,
    "delete": cmd_delete,
}


def main(argv: Sequence[str] | None = None) -> int:
    """The console script. Returns (and exits with) the exit code."""
    parser = build_parser(_COMMANDS)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    out = Out(Style(use_color(args.color, sys.stdout)), sys.stdout)
    try:
        code: int = anyio.run(args.fn, args, out, backend="asyncio")
        sys.stdout.flush()
    except KeyboardInterrupt:
        print("actorlog: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (| head): silence the flush at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FOUND
    except (ActorlogError, UsageError, ClassSpecError, OSError) as exc:
        if args.debug:
            raise
        print(f"actorlog: error: {clean(_message(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        if args.debug:
            raise
        print(
            f"actorlog: internal error: {type(exc).__name__}: {clean(exc)} (run with --debug "
            "for the "
            "traceback, and please report it)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return code


def _message(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    cause = exc.__cause__
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror}: {exc.filename}"
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({cause})"
    return text


if __name__ == "__main__":
    sys.exit(main())
