"""Issue 27: move the flat ``runtime/`` into packages by concept, and rewrite every reference.

Run it from the repository root, once, on a clean tree that has every branch merged::

    python scripts/relayout.py            # moves (git mv), rewrites, writes package __init__s
    python scripts/relayout.py --check    # changes nothing; exit 1 if a module is unmapped

then ``ruff check --fix --select I runtime stores tests examples benchmarks`` and ``ruff format
runtime stores tests`` (the rewritten import blocks are re-sorted; nothing else changes).

What it does, in order:

1. Every module of ``runtime/``, ``stores/`` and ``tests/`` must be in the mapping below (by
   file, or by a folder rule). A module that is not, for instance one a branch added after this
   table was written, stops the run before anything changes: the script lists them all, you add
   a line for each and run it again.
2. It rewrites each Python file's imports (relative ones are resolved from where the file stood
   and written again from where it will stand; ``from . import _codec`` becomes ``from
   ._journal import codec as _codec``, so the code below it is untouched), then every dotted
   module path (``actorlog._codec``, ``tests.multi.worker``: imports, monkeypatch strings,
   ``python -m``) and every file path (``runtime/_codec.py``, ``tests/multi/``) in the text
   files of the repository: Python, Markdown, TOML, YAML, shell. ``CHANGELOG.md`` keeps its
   history, and this script and its test keep the old names they map.
3. It moves each module found at its old path with ``git mv``.
4. It writes each new package's ``__init__.py``: a one-paragraph docstring saying what lives
   there and what it may import (the rules tests/test_layout.py checks).
5. It writes ``[tool.setuptools] packages`` in pyproject.toml from the package folders.

Idempotent: a second run finds nothing at an old path, every reference already new, and each
generated file with the same text, so it changes nothing (tests/test_relayout_script.py). No new
name starts with an old one, so a rewritten reference is never rewritten again.

Plain Python (stdlib only): ``ast`` finds the imports, regular expressions the references.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# The mapping: old path -> new path, one line a module. A path ending in "/" is a folder rule:
# every file under it moves with it (a folder rule to itself keeps a folder as it is).
# ---------------------------------------------------------------------------------------------

MOVES: dict[str, str] = {
    # the public surface stays where it is
    "runtime/__init__.py": "runtime/__init__.py",
    "runtime/errors.py": "runtime/errors.py",
    "runtime/store.py": "runtime/store.py",
    "runtime/inspect.py": "runtime/inspect.py",  # the old alias of ops (issue 27 drops it)
    "runtime/ops/": "runtime/ops/",
    "runtime/web/": "runtime/web/",
    "runtime/integrations/": "runtime/integrations/",
    # _journal: the bytes and the records (with store.py and errors.py, the journal layer)
    "runtime/_errors.py": "runtime/_journal/errors.py",
    "runtime/_checks.py": "runtime/_journal/checks.py",
    "runtime/_fields.py": "runtime/_journal/fields.py",
    "runtime/_ids.py": "runtime/_journal/ids.py",
    "runtime/_names.py": "runtime/_journal/names.py",
    "runtime/_codec.py": "runtime/_journal/codec.py",
    "runtime/_records.py": "runtime/_journal/records.py",
    "runtime/_rows.py": "runtime/_journal/rows.py",
    "runtime/_entrykinds.py": "runtime/_journal/entrykinds.py",
    "runtime/_entryreads.py": "runtime/_journal/entryreads.py",
    "runtime/_storetimers.py": "runtime/_journal/storetimers.py",
    "runtime/_door.py": "runtime/_journal/door.py",
    "runtime/_journal/leases.py": "runtime/_journal/leases.py",  # made after the sweep
    "runtime/_journal/compact.py": "runtime/_journal/compact.py",  # issue 28: format 2
    "runtime/_journal/frames.py": "runtime/_journal/frames.py",  # issue 28: split from codec
    # _tracing: spans, metrics and logs (docs/tracing.md)
    "runtime/_telemetry.py": "runtime/_tracing/telemetry.py",
    "runtime/_traceends.py": "runtime/_tracing/traceends.py",
    "runtime/_logs.py": "runtime/_tracing/logs.py",
    # _durability: one actor's log at run time, what it keeps and how it settles doubt
    "runtime/_wal.py": "runtime/_durability/wal.py",
    "runtime/_seenids.py": "runtime/_durability/seenids.py",
    "runtime/_mailbox.py": "runtime/_durability/mailbox.py",
    "runtime/_logged.py": "runtime/_durability/logged.py",
    "runtime/_reuse.py": "runtime/_durability/reuse.py",
    "runtime/_incarnation.py": "runtime/_durability/plan.py",  # merged into plan after the sweep
    "runtime/_decisions.py": "runtime/_durability/decisions.py",
    "runtime/_attempts.py": "runtime/_durability/attempts.py",
    "runtime/_escalation.py": "runtime/_durability/escalation.py",
    "runtime/_snapshots.py": "runtime/_durability/snapshots.py",
    "runtime/_retention.py": "runtime/_durability/retention.py",
    "runtime/_lifecycle.py": "runtime/_durability/lifecycle.py",
    "runtime/_timers.py": "runtime/_durability/timers.py",
    "runtime/_events.py": "runtime/_durability/events.py",
    "runtime/_rulings.py": "runtime/_durability/rulings.py",
    # _effects: what a handler is given and does
    "runtime/_actor.py": "runtime/_effects/actor.py",
    "runtime/_ref.py": "runtime/_effects/ref.py",
    "runtime/_registry.py": "runtime/_effects/registry.py",
    "runtime/_tools.py": "runtime/_effects/tools.py",
    "runtime/_retry.py": "runtime/_effects/retry.py",
    "runtime/_context.py": "runtime/_effects/context.py",
    "runtime/_ctxtasks.py": "runtime/_effects/ctxtasks.py",
    "runtime/_ctxtimers.py": "runtime/_effects/ctxtimers.py",
    "runtime/_tasks.py": "runtime/_effects/tasks.py",
    "runtime/_sequencer.py": "runtime/_effects/sequencer.py",
    "runtime/_calls.py": "runtime/_effects/calls.py",
    "runtime/_cancelling.py": "runtime/_effects/cancelling.py",
    "runtime/_cancelwrite.py": "runtime/_effects/cancelwrite.py",
    "runtime/_stephost.py": "runtime/_effects/stephost.py",
    "runtime/_indoubt.py": "runtime/_effects/indoubt.py",
    # _core: one live actor: its cell, its steps, its recovery
    "runtime/_cell.py": "runtime/_core/cell.py",
    "runtime/_step.py": "runtime/_core/step.py",
    "runtime/_recovery.py": "runtime/_core/recovery.py",
    "runtime/_restart.py": "runtime/_core/restart.py",
    "runtime/_core/readonly.py": "runtime/_core/readonly.py",  # made after the sweep
    "runtime/_core/replay.py": "runtime/_core/replay.py",  # made after the sweep
    # _cluster: ownership across runtimes
    "runtime/_ownership.py": "runtime/_cluster/ownership.py",
    "runtime/_remote.py": "runtime/_cluster/remote.py",
    "runtime/_leases.py": "runtime/_cluster/leases.py",
    # _runtime: ActorSystem and what it wires
    "runtime/_system.py": "runtime/_runtime/system.py",
    "runtime/_host.py": "runtime/_runtime/host.py",
    "runtime/_options.py": "runtime/_runtime/options.py",
    "runtime/_passivation.py": "runtime/_runtime/passivation.py",
    "runtime/_query.py": "runtime/_runtime/query.py",
    "runtime/_systimers.py": "runtime/_runtime/systimers.py",
    "runtime/_runtime/operate.py": "runtime/_runtime/operate.py",  # made after the sweep
    # _views: what operators read, on a terminal and in HTML (the CLI and the console)
    "runtime/_term.py": "runtime/_views/term.py",
    "runtime/_html.py": "runtime/_views/html.py",
    # testing: the whole kit (the store contract and the replay tester)
    "runtime/testing.py": "runtime/testing/__init__.py",
    "runtime/_kit.py": "runtime/testing/_kit.py",
    "runtime/_kit_compact.py": "runtime/testing/_kit_compact.py",
    "runtime/_kit_contract.py": "runtime/testing/_kit_contract.py",
    "runtime/_kit_log.py": "runtime/testing/_kit_log.py",
    "runtime/_kit_more.py": "runtime/testing/_kit_more.py",
    "runtime/_kit_timers.py": "runtime/testing/_kit_timers.py",
    "runtime/_replaycheck.py": "runtime/testing/_replay.py",
    # cli: the actorlog command
    "runtime/_cli.py": "runtime/cli/_main.py",
    "runtime/_cliparse.py": "runtime/cli/_parse.py",
    "runtime/_clicheck.py": "runtime/cli/_check.py",
    "runtime/_clihistory.py": "runtime/cli/_history.py",
    "runtime/_clilifecycle.py": "runtime/cli/_lifecycle.py",
    "runtime/_clitimers.py": "runtime/cli/_timers.py",
    # stores: as they are (one module per backend, postgres/ a package)
    "stores/__init__.py": "stores/__init__.py",
    "stores/memory.py": "stores/memory.py",
    "stores/sqlite.py": "stores/sqlite.py",
    "stores/url.py": "stores/url.py",
    "stores/_audit.py": "stores/_audit.py",
    "stores/_groupcommit.py": "stores/_groupcommit.py",
    "stores/_sql.py": "stores/_sql.py",
    "stores/_sqltimers.py": "stores/_sqltimers.py",
    "stores/_sqlite_commit.py": "stores/_sqlite_commit.py",
    "stores/_sqlite_compact.py": "stores/_sqlite_compact.py",
    "stores/_sqlite_conn.py": "stores/_sqlite_conn.py",
    "stores/_sqlite_schema.py": "stores/_sqlite_schema.py",
    "stores/_sqlite_schema3.py": "stores/_sqlite_schema3.py",
    "stores/_sqlite_pack.py": "stores/_sqlite_pack.py",
    "stores/_sqlite_unpack.py": "stores/_sqlite_unpack.py",
    "stores/_writelock.py": "stores/_writelock.py",
    "stores/postgres/": "stores/postgres/",
    # tests mirror the packages; the folders that test a concept already keep their names
    "tests/__init__.py": "tests/__init__.py",
    "tests/conftest.py": "tests/conftest.py",
    "tests/_keys.py": "tests/_keys.py",
    "tests/_pg.py": "tests/_pg.py",
    "tests/_owner.py": "tests/_owner.py",
    "tests/runtime/abandon_agents.py": "tests/effects/abandon_agents.py",
    "tests/runtime/abandon_worker.py": "tests/effects/abandon_worker.py",
    "tests/runtime/test_abandoned_while_settling.py": (
        "tests/effects/test_abandoned_while_settling.py"
    ),
    "tests/runtime/test_live_rulings.py": "tests/durability/test_live_rulings.py",
    "tests/runtime/stream_agents.py": "tests/durability/stream_agents.py",
    "tests/runtime/stream_worker.py": "tests/durability/stream_worker.py",
    "tests/runtime/test_streaming.py": "tests/durability/test_streaming.py",
    "tests/runtime/test_streaming_crash.py": "tests/durability/test_streaming_crash.py",
    "tests/_pgserver.py": "tests/_pgserver.py",
    "tests/_soak.py": "tests/_soak.py",
    "tests/_sqlitefile.py": "tests/_sqlitefile.py",
    "tests/_payload.py": "tests/_payload.py",
    "tests/test_benchmarks_cli.py": "tests/test_benchmarks_cli.py",
    "tests/test_docs_check.py": "tests/test_docs_check.py",
    "tests/test_dependencies.py": "tests/test_dependencies.py",
    "tests/test_layout.py": "tests/test_layout.py",
    "tests/test_relayout_script.py": "tests/test_relayout_script.py",
    "tests/cli/": "tests/cli/",
    "tests/fuzz/": "tests/fuzz/",
    "tests/integrations/": "tests/integrations/",
    "tests/model/": "tests/model/",
    "tests/stores/": "tests/stores/",
    "tests/telemetry/": "tests/telemetry/",
    "tests/torture/": "tests/torture/",
    "tests/upgrading/": "tests/upgrading/",
    "tests/web/": "tests/web/",
    "tests/multi/": "tests/cluster/",
    "tests/timers/": "tests/time/",
    # tests/runtime: ActorSystem's tests and the shared test actors stay; the rest moves out
    "tests/runtime/__init__.py": "tests/runtime/__init__.py",
    "tests/runtime/_gated.py": "tests/runtime/_gated.py",
    "tests/runtime/_setvalues.py": "tests/runtime/_setvalues.py",
    "tests/runtime/agents.py": "tests/runtime/agents.py",
    "tests/runtime/concurrent_agents.py": "tests/runtime/concurrent_agents.py",
    "tests/runtime/concurrent_worker.py": "tests/runtime/concurrent_worker.py",
    "tests/runtime/query_agents.py": "tests/runtime/query_agents.py",
    "tests/runtime/set_worker.py": "tests/runtime/set_worker.py",
    "tests/runtime/test_codec.py": "tests/journal/test_codec.py",
    "tests/journal/test_compact.py": "tests/journal/test_compact.py",
    "tests/journal/test_flat_values.py": "tests/journal/test_flat_values.py",
    "tests/journal/test_unstructure_json.py": "tests/journal/test_unstructure_json.py",
    "tests/durability/test_append_shield.py": "tests/durability/test_append_shield.py",
    "tests/runtime/test_records.py": "tests/journal/test_records.py",
    "tests/runtime/test_names.py": "tests/journal/test_names.py",
    "tests/runtime/test_message_types.py": "tests/journal/test_message_types.py",
    "tests/runtime/test_set_order.py": "tests/journal/test_set_order.py",
    "tests/runtime/test_newcomer_errors.py": "tests/journal/test_newcomer_errors.py",
    "tests/runtime/test_argument_checks.py": "tests/journal/test_argument_checks.py",
    "tests/runtime/test_commit_rounds.py": "tests/durability/test_commit_rounds.py",
    "tests/runtime/test_sqlite_durability.py": "tests/durability/test_sqlite_durability.py",
    "tests/runtime/test_ask_busy_durable.py": "tests/durability/test_ask_busy_durable.py",
    "tests/runtime/test_message_id_filter.py": "tests/durability/test_message_id_filter.py",
    "tests/runtime/test_message_id_reuse.py": "tests/durability/test_message_id_reuse.py",
    "tests/runtime/test_snapshot_policy.py": "tests/durability/test_snapshot_policy.py",
    "tests/runtime/test_retention.py": "tests/durability/test_retention.py",
    "tests/runtime/test_retention_bound.py": "tests/durability/test_retention_bound.py",
    "tests/runtime/test_lifecycle.py": "tests/durability/test_lifecycle.py",
    "tests/runtime/test_in_doubt_error.py": "tests/durability/test_in_doubt_error.py",
    "tests/runtime/test_resolve_sweep.py": "tests/durability/test_resolve_sweep.py",
    "tests/runtime/test_shutdown_effects.py": "tests/durability/test_shutdown_effects.py",
    "tests/runtime/test_call_errors.py": "tests/effects/test_call_errors.py",
    "tests/runtime/test_tool_errors.py": "tests/effects/test_tool_errors.py",
    "tests/runtime/test_direct_tool_call.py": "tests/effects/test_direct_tool_call.py",
    "tests/runtime/test_retry.py": "tests/effects/test_retry.py",
    "tests/runtime/test_concurrent_steps.py": "tests/effects/test_concurrent_steps.py",
    "tests/runtime/test_race_losers_settled.py": "tests/effects/test_race_losers_settled.py",
    "tests/runtime/test_cancellation_sweep.py": "tests/effects/test_cancellation_sweep.py",
    "tests/runtime/test_cancelled_write_in_doubt.py": (
        "tests/effects/test_cancelled_write_in_doubt.py"
    ),
    "tests/runtime/test_live_equals_replay.py": "tests/effects/test_live_equals_replay.py",
    "tests/effects/test_replay_compare.py": "tests/effects/test_replay_compare.py",
    "tests/effects/test_ctx_refused_outside.py": "tests/effects/test_ctx_refused_outside.py",
    "tests/runtime/test_recovery_budget.py": "tests/core/test_recovery_budget.py",
    "tests/runtime/test_delivery_errors.py": "tests/core/test_delivery_errors.py",
    "tests/runtime/test_messaging_holes.py": "tests/core/test_messaging_holes.py",
    "tests/core/test_spawn_new.py": "tests/core/test_spawn_new.py",
    "tests/runtime/test_example_crash.py": "tests/core/test_example_crash.py",
    "tests/runtime/test_lazy_imports.py": "tests/runtime/test_lazy_imports.py",
    "tests/runtime/test_public_api.py": "tests/runtime/test_public_api.py",
    "tests/runtime/test_structure.py": "tests/runtime/test_structure.py",
    "tests/runtime/test_system.py": "tests/runtime/test_system.py",
    "tests/runtime/test_passivation.py": "tests/runtime/test_passivation.py",
    "tests/runtime/test_query.py": "tests/runtime/test_query.py",
    "tests/runtime/test_query_outside.py": "tests/runtime/test_query_outside.py",
    "tests/runtime/test_spawn_options.py": "tests/runtime/test_spawn_options.py",
    "tests/runtime/test_example_service.py": "tests/runtime/test_example_service.py",
    "tests/runtime/test_tutorial.py": "tests/runtime/test_tutorial.py",
}

#: The docstring of each package the re-layout makes: what lives there, what it may import.
#: (tests/test_layout.py checks the rules; docs/architecture.md draws them.)
PACKAGE_DOCS: dict[str, str] = {
    "runtime/_journal": (
        "The journal: the only code that knows bytes. Payload encoding (``codec``), the "
        "checksum frames (``frames``), format 2's compact payloads and compressed snapshots "
        "(``compact``), the typed record of each entry kind (``records``, ``entrykinds``, "
        "``entryreads``, ``fields``), the rows a store keeps (``rows``, ``storetimers``; public "
        "through :mod:`actorlog.store`) and its leases as read (``leases``), stable names and "
        "ids (``names``, ``ids``), the exception "
        "tree (``errors``; public as :mod:`actorlog.errors`) and the argument checks everyone "
        "shares (``checks``). With ``actorlog.store`` and ``actorlog.errors`` it is the journal "
        "layer, the ground floor: it imports nothing of actorlog above it."
    ),
    "runtime/_tracing": (
        "Telemetry: span names, attribute keys, metrics and the tracer (``telemetry``; the stable "
        "table is docs/tracing.md), the spans of timers and of an actor's lifecycle "
        "(``traceends``) and the stdlib loggers (``logs``). Uses only opentelemetry-api. May "
        "import the journal layer, nothing else of actorlog."
    ),
    "runtime/_durability": (
        "Durability: one actor's log at run time and what keeps it true. The append-before-"
        "execute journal (``wal``, ``seenids``), the envelopes and reply slots of its mailbox "
        "(``mailbox``), logged messages and their retries (``logged``, ``reuse``), the log read "
        "and verified the way recovery reads it, writing nothing (``plan``, shared with the "
        "offline readers), in-doubt intents and the one decision that settles each "
        "(``decisions``, ``attempts``, ``escalation``), snapshots and retention (``snapshots``, "
        "``retention``), how an actor ends (``lifecycle``), durable timers (``timers``), the "
        "actor's events and the operators' rulings (``events``, ``rulings``). May "
        "import the journal layer and ``_tracing``; never the actor core above it."
    ),
    "runtime/_effects": (
        "What a handler is given and does: ``Actor`` and ``ActorRef``, the type registry, "
        "``Context`` and every effect it logs first: ``ctx.call`` with its tools, retries and "
        "attempts (``tools``, ``retry``, ``calls``, ``cancelling``, ``cancelwrite``), the durable "
        "waits (``ctxtimers``), the tasks of a step and their replay order (``tasks``, "
        "``ctxtasks``, ``sequencer``), and what a step needs of its actor (``stephost``, a "
        "Protocol). May import the journal layer, ``_tracing`` and ``_durability``."
    ),
    "runtime/_core": (
        "One live actor: its cell (lifecycle, posts, the step loop), one step run in its "
        "``Context`` (``step``), recovery from the newest valid snapshot and the log tail "
        "(``recovery``), the read-only host a step is replayed on without acting (``readonly``; "
        "``read_state`` and the replay tester), the replay rules the three share (``replay``) "
        "and the restart of a quarantined actor "
        "(``restart``). The cell reaches "
        "the runtime only through ``CellHost``, a Protocol it defines. May import every package "
        "below it (the journal layer, ``_tracing``, ``_durability``, ``_effects``)."
    ),
    "runtime/_cluster": (
        "Ownership across runtimes (docs/scaling.md): leases and fencing, the feed of ownership "
        "changes (``leases``; the plain ``Lease`` record is in ``_journal``), remote asks "
        "answered from the owner's log (``remote``) and the "
        "ownership loop (``ownership``), which reaches the runtime only through "
        "``OwnershipHost``. May import every package below it, up to ``_core``."
    ),
    "runtime/_runtime": (
        "``ActorSystem`` and what it wires: spawning, the one delivery path and recovery on start "
        "(``system``), the host its cells and its ownership see (``host``), spawn options, the "
        "passivation policy, read-only queries and the timer API (``options``, ``passivation``, "
        "``query``, ``systimers``). The top of the private packages: may import all of them."
    ),
    "runtime/_views": (
        "What operators read: the terminal formatting of what a store holds (``term``) and one "
        "actor's self-contained HTML timeline (``html``), shared by the ``actorlog`` command and "
        "the web console. May import the public API, ``actorlog.ops`` and the journal layer; "
        "never the actor core."
    ),
    "runtime/cli": (
        "The ``actorlog`` command (docs/operators.md): ``main`` and the commands (``_main``), its "
        "parser (``_parse``), and one module per family of commands (``_history``, "
        "``_lifecycle``, ``_timers``, ``_check``). Uses the public API, ``actorlog.ops``, "
        "``actorlog.testing``, ``actorlog.web`` (``actorlog serve``), ``_views`` and the journal "
        "layer; never the actor core's internals."
    ),
    "tests/journal": "Tests of actorlog._journal: codec, records, names, ids, argument checks.",
    "tests/durability": (
        "Tests of actorlog._durability: commits, message ids, snapshots, retention, lifecycle, "
        "in-doubt decisions."
    ),
    "tests/effects": (
        "Tests of actorlog._effects: ctx.call, tools and retries, concurrent effects in a step, "
        "cancellation, live equals replay."
    ),
    "tests/core": "Tests of actorlog._core: the cell, delivery and recovery of one live actor.",
}

#: Files the script writes whole (besides the docstring-only package __init__s).
GENERATED: dict[str, str] = {
    "runtime/cli/__init__.py": (
        '"""{doc}"""\n\nfrom __future__ import annotations\n\nfrom ._main import main\n\n'
        '__all__ = ["main"]\n'
    ),
    "runtime/cli/__main__.py": (
        '"""``python -m actorlog.cli``: the ``actorlog`` command."""\n\n'
        "from __future__ import annotations\n\nimport sys\n\nfrom ._main import main\n\n"
        "sys.exit(main())\n"
    ),
}

#: Exact text edits the generic rewrite cannot make (a path built from parts, a line the longer
#: names push past 100 characters), each applied to the rewritten text of that file (its old
#: or its new path) unless its new text is there already: (file, old, new).
SPECIAL: list[tuple[str, str, str]] = [
    (
        "tests/stores/test_store_imports.py",
        'KIT = [ROOT / "runtime" / "testing.py", *sorted((ROOT / "runtime").glob("_kit*.py"))]',
        "# the kit; the replay tester beside it (_replay.py) replays through the runtime\n"
        'KIT = [p for p in sorted((ROOT / "runtime" / "testing").glob("*.py")) '
        'if p.name != "_replay.py"]',
    ),
    (
        "tests/stores/test_store_imports.py",
        'for m in _actorlog_imports(path, "actorlog")\n        if m not in',
        'for m in _actorlog_imports(path, "actorlog.testing")\n        if m not in',
    ),
    (
        "tests/stores/test_store_imports.py",
        'path.name == "testing.py" and m == "actorlog.testing._replay"',
        'path.name == "__init__.py" and m == "actorlog.testing._replay"',
    ),
    ("pyproject.toml", 'actorlog = "actorlog.cli._main:main"', 'actorlog = "actorlog.cli:main"'),
    (
        "pyproject.toml",
        "\n[tool.ruff.lint.flake8-type-checking]",
        "\n[tool.ruff.lint.isort]\n# ``from .._journal import codec as _codec, names as _names``:\n"
        "# the re-layout's module imports keep their old local names, one line a package\n"
        "combine-as-imports = true\n\n[tool.ruff.lint.flake8-type-checking]",
    ),
    (
        ".ci/run",
        "--dist worksteal tests/runtime tests/stores",
        "--dist worksteal tests/journal tests/durability tests/effects tests/core "
        "tests/runtime \\\n"
        "    tests/stores",
    ),
    (
        "runtime/_timers.py",
        "    ``actorlog._durability.timers.CLOCK`` (private; a fake clock) to drive timers without "
        'waiting."""',
        "    ``actorlog._durability.timers.CLOCK`` (private; a fake clock) to drive timers\n"
        '    without waiting."""',
    ),
]

#: The roots of the dotted names: folder -> package.
ROOTS = {"runtime": "actorlog", "stores": "actorlog.stores", "tests": "tests"}
#: Where modules live (the unmapped check looks here).
SCANNED = ("runtime", "stores", "tests")
#: Text files rewritten, by suffix (and a few names).
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".sh", ".cfg", ".ini", ".txt", ".html"}
TEXT_NAMES = {".ci/run"}
#: Files that keep old names on purpose.
KEEP_TEXT = {
    "CHANGELOG.md",
    "scripts/relayout.py",
    "tests/test_relayout_script.py",
    "docs/architecture.md",  # written for the new layout (it names old paths on purpose)
}
SKIP_DIRS = {".git", ".venv", "build", "node_modules", "__pycache__", "site"}


class RelayoutError(Exception):
    """A run that must stop before it changes anything."""


# --------------------------------------------------------------------------------------------
# names and paths
# --------------------------------------------------------------------------------------------


def dotted(path: str) -> str | None:
    """The module name of a .py path: ``runtime/_journal/codec.py``: ``actorlog._journal.codec``."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    root = ROOTS.get(parts[0])
    if root is None:
        return None
    rest = parts[1:]
    if rest and rest[-1] == "__init__":
        rest = rest[:-1]
    return ".".join([root, *rest])


def resolve_move(path: str, moves: dict[str, str]) -> str | None:
    """Where ``path`` goes (itself if it stays), or None if no rule covers it."""
    if path in moves:
        return moves[path]
    best = ""
    for old in moves:
        if old.endswith("/") and path.startswith(old) and len(old) > len(best):
            best = old
    if best:
        return moves[best] + path[len(best) :]
    return None


def is_new_location(path: str, moves: dict[str, str]) -> bool:
    """``path`` already stands where the mapping puts something (a second run)."""
    if path in moves.values():
        return True
    return any(new.endswith("/") and path.startswith(new) for new in moves.values())


def tracked_files(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return sorted({line for line in out.splitlines() if line and (root / line).exists()})


def generated_paths() -> set[str]:
    out = set(GENERATED)
    for folder in PACKAGE_DOCS:
        out.add(f"{folder}/__init__.py")
    return out


def unmapped(files: list[str], moves: dict[str, str]) -> list[str]:
    """The modules of runtime/, stores/ and tests/ that the mapping does not cover."""
    generated = generated_paths()
    missing = []
    for path in files:
        if not path.endswith(".py") or path.split("/")[0] not in SCANNED:
            continue
        if path in generated or resolve_move(path, moves) is not None:
            continue
        if is_new_location(path, moves):
            continue
        missing.append(path)
    return missing


def plan(files: list[str], moves: dict[str, str]) -> dict[str, str]:
    """old path -> new path for every file that must move now (a folder rule moves all files)."""
    out: dict[str, str] = {}
    for path in files:
        if path.split("/")[0] not in SCANNED:
            continue
        new = resolve_move(path, moves)
        if new is not None and new != path:
            out[path] = new
    return out


def module_map(moves: dict[str, str], files: list[str]) -> dict[str, str]:
    """old dotted name -> new dotted name, for every module that changes its name."""
    out: dict[str, str] = {}
    for old, new in moves.items():
        if old.endswith("/"):
            continue
        a, b = dotted(old), dotted(new)
        if a and b and a != b:
            out[a] = b
    # folder rules: every module under them, old or already moved, and the folders themselves
    for old, new in moves.items():
        if not old.endswith("/") or old == new:
            continue
        a, b = dotted(old + "__init__.py"), dotted(new + "__init__.py")
        if a and b:
            out[a] = b
        for path in files:
            rel = None
            if path.startswith(old):
                rel = path[len(old) :]
            elif path.startswith(new):
                rel = path[len(new) :]
            if rel is None or not rel.endswith(".py"):
                continue
            a, b = dotted(old + rel), dotted(new + rel)
            if a and b:
                out[a] = b
    return out


def path_map(moves: dict[str, str]) -> dict[str, str]:
    """old path -> new path (files and folders, as written in text) for every path that changes."""
    out = {old: new for old, new in moves.items() if old != new}
    for old, new in list(out.items()):
        if old.endswith("/"):
            out[old.rstrip("/")] = new.rstrip("/")
    return out


def check_names(modmap: dict[str, str], all_new: set[str]) -> None:
    """No new name is, or starts with, a name that changes: so a rewrite never applies twice."""
    bad = []
    for new in sorted(all_new):
        for old in modmap:
            if new == old or new.startswith(old + "."):
                bad.append(f"{new} (starts with the old {old})")
    if bad:
        raise RelayoutError("new module names that collide with old ones:\n  " + "\n  ".join(bad))


# --------------------------------------------------------------------------------------------
# imports
# --------------------------------------------------------------------------------------------


def package_of(module: str, path: str) -> str:
    return module if path.endswith("__init__.py") else module.rpartition(".")[0]


def relative(target: str, package: str) -> str:
    """``target`` written relative to ``package`` (``..store`` from ``actorlog._journal``)."""
    t, p = target.split("."), package.split(".")
    common = 0
    while common < min(len(t), len(p)) and t[common] == p[common]:
        common += 1
    level = len(p) - common + 1
    return "." * level + ".".join(t[common:])


def rewrite_imports(
    text: str,
    anchor: str,
    anchor_path: str,
    dest: str,
    dest_path: str,
    modmap: dict[str, str],
    known: set[str],
) -> str:
    """Rewrite the ``from X import ...`` statements of one file.

    ``anchor`` is the module name the file had when its relative imports were written, ``dest``
    the one it will have. A statement whose modules do not change (and whose relative form
    stays right) is left as it is, byte for byte.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    old_pkg, new_pkg = package_of(anchor, anchor_path), package_of(dest, dest_path)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
            continue
        if node.level:
            parts = old_pkg.split(".")
            base_parts = parts[: len(parts) - node.level + 1]
            base = ".".join([*base_parts, node.module] if node.module else base_parts)
        else:
            base = node.module or ""
        if not (base == "actorlog" or base.startswith(("actorlog.", "tests.", "tests"))):
            continue
        # (from-module, name, asname) after the move
        out: list[tuple[str, str, str | None]] = []
        changed = False
        for alias in node.names:
            full = f"{base}.{alias.name}"
            if alias.name != "*" and (full in known or full in modmap):
                new_full = modmap.get(full, full)
                parent, _, leaf = new_full.rpartition(".")
                bind = alias.asname or alias.name
                out.append((parent, leaf, None if bind == leaf else bind))
                changed |= new_full != full
            else:
                new_base = modmap.get(base, base)
                out.append((new_base, alias.name, alias.asname))
                changed |= new_base != base
        if node.level and old_pkg != new_pkg:
            changed = True  # the same target, seen from another folder
        if not changed:
            continue
        indent = " " * node.col_offset
        groups: dict[str, list[str]] = {}
        for frm, name, asname in out:
            written = relative(frm, new_pkg) if node.level else frm
            groups.setdefault(written, []).append(name if asname is None else f"{name} as {asname}")
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        # keep a trailing comment of the statement's last line
        tail = lines[last][node.end_col_offset or 0 :].rstrip("\n")
        stmts = []
        for i, (frm, names) in enumerate(groups.items()):
            one = f"from {frm} import {', '.join(names)}"
            if len(indent) + len(one) > 99:
                one = f"from {frm} import (\n" + "".join(f"{indent}    {n},\n" for n in names)
                one += f"{indent})"
            stmts.append(indent + one + (tail if i == len(groups) - 1 else ""))
        prefix = lines[first][: node.col_offset]
        if prefix.strip():
            continue  # an import after other code on its line: left alone
        edits.append((first, last, "\n".join(stmts) + "\n"))
    for first, last, new in sorted(edits, reverse=True):
        lines[first : last + 1] = [new]
    return "".join(lines)


# --------------------------------------------------------------------------------------------
# references in text
# --------------------------------------------------------------------------------------------

_ESCAPED = re.compile(r"(?<![\w.\\])(?:actorlog|tests)(?:\\\.\w+)+")
_DOTTED = re.compile(r"(?<![\w.])(?:actorlog|tests)(?:\.\w+)+")
_PATH = re.compile(r"(?<![\w\-])((?:\.\./)*)((?:runtime|stores|tests)(?:/[\w\-.]+)+/?)")


_FROM_ACTORLOG = re.compile(r"(?m)^([ \t]*)from actorlog import (\w+(?:, \w+)*)[ \t]*$")


def rewrite_from_lines(text: str, modmap: dict[str, str]) -> str:
    """``from actorlog import _codec`` written as text (a script in a string, a code block in
    the docs), which the ``ast`` pass does not see: one line a package, old local names kept."""

    def sub(m: re.Match[str]) -> str:
        indent, names = m[1], m[2].split(", ")
        if not any(f"actorlog.{n}" in modmap for n in names):
            return m[0]
        groups: dict[str, list[str]] = {}
        for name in names:
            new = modmap.get(f"actorlog.{name}")
            if new is None:
                groups.setdefault("actorlog", []).append(name)
            else:
                parent, _, leaf = new.rpartition(".")
                groups.setdefault(parent, []).append(leaf if leaf == name else f"{leaf} as {name}")
        return "\n".join(f"{indent}from {frm} import {', '.join(ns)}" for frm, ns in groups.items())

    return _FROM_ACTORLOG.sub(sub, text)


def rewrite_dotted(text: str, modmap: dict[str, str]) -> str:
    def sub(m: re.Match[str] | _Plain) -> str:
        name = m.group(0)
        parts = name.split(".")
        for n in range(len(parts), 1, -1):
            prefix = ".".join(parts[:n])
            if prefix in modmap:
                return modmap[prefix] + name[len(prefix) :]
        return name

    text = _DOTTED.sub(sub, text)
    # the same names escaped in a regular expression (``tests\\.multi\\.agents``)
    return _ESCAPED.sub(lambda m: sub(_Plain(m[0].replace("\\.", "."))).replace(".", "\\."), text)


class _Plain:
    """A match-like holder of an unescaped name, for ``rewrite_dotted``'s ``sub``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def group(self, _index: int = 0) -> str:
        return self.name


def basename_map(moves: dict[str, str], files: list[str]) -> dict[str, str]:
    """``_calls.py`` -> ``_effects/calls.py``: the moved runtime modules whose old file name is
    unique in runtime/ and stores/, so that prose naming a module by its file name alone can
    follow it (the new path is relative to runtime/)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    moved = {old for old, new in moves.items() if old != new}
    placed = set(moves.values())
    for path in files:
        if path.split("/")[0] in ("runtime", "stores") and path not in moved | placed:
            taken.add(path.rpartition("/")[2])
    for old, new in moves.items():
        name = old.rpartition("/")[2]
        if old == new or not old.startswith("runtime/") or not name.startswith("_"):
            continue
        if name.endswith(".py") and name not in taken and name != "__init__.py":
            out[name] = new.removeprefix("runtime/")
    return out


_MD_NAME = re.compile(r"(?<=`)(_\w+\.py)(?=`)")
_PY_NAME = re.compile(r"(?<=``)(_\w+\.py)(?=``)")


def rewrite_names(text: str, names: dict[str, str], markdown: bool) -> str:
    """A module named by its old file name in backquotes: Markdown gets the new path from the
    root (``runtime/_effects/calls.py``, which the docs check resolves), docstrings and
    comments the path in runtime/ (``_effects/calls.py``)."""

    def sub(m: re.Match[str]) -> str:
        new = names.get(m[1])
        if new is None:
            return m[1]
        return f"runtime/{new}" if markdown else new

    return (_MD_NAME if markdown else _PY_NAME).sub(sub, text)


def rewrite_paths(text: str, pmap: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        up, path = m.group(1), m.group(2)
        parts = path.split("/")
        for n in range(len(parts), 0, -1):
            prefix = "/".join(parts[:n])
            for key in (prefix, prefix + "/"):
                if key in pmap and (n == len(parts) or not key.endswith(".py")):
                    rest = path[len(key) :]
                    return up + pmap[key] + rest
        return up + path

    return _PATH.sub(sub, text)


# --------------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------------


def special(text: str, paths: set[str]) -> str:
    for where, old_text, new_text in SPECIAL:
        if where in paths and new_text not in text:
            text = text.replace(old_text, new_text)
    return text


def is_text(path: str) -> bool:
    if path in KEEP_TEXT or any(part in SKIP_DIRS for part in path.split("/")):
        return False
    return Path(path).suffix in TEXT_SUFFIXES or path in TEXT_NAMES


def package_init(doc: str) -> str:
    return f'"""{doc}"""\n'


def wrap_doc(doc: str, width: int = 96) -> str:
    words, lines, line = doc.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    # one line closes on its own line's end, more on a line of their own (as ruff formats them)
    return lines[0] if len(lines) == 1 else "\n".join(lines) + "\n"


def packages_list(root: Path) -> list[str]:
    """Every package folder of the distribution, as setuptools lists them."""
    out = []
    for folder, name in (
        ("runtime", "actorlog"),
        ("stores", "actorlog.stores"),
        ("benchmarks", "actorlog.benchmarks"),
    ):
        base = root / folder
        for init in sorted(base.rglob("__init__.py")):
            rel = init.parent.relative_to(base).parts
            if any(p in SKIP_DIRS or p.startswith(".") for p in rel):
                continue
            out.append(".".join([name, *rel]))
    return sorted(out, key=lambda n: (n.count("."), n))


def write(root: Path, path: str, text: str, dry: bool) -> bool:
    file = root / path
    if file.exists() and file.read_text(encoding="utf-8") == text:
        return False
    if not dry:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
    return True


def run(root: Path, *, dry: bool = False, moves: dict[str, str] = MOVES) -> list[str]:
    """Apply the re-layout in ``root``; returns what it changed (empty on a second run)."""
    files = tracked_files(root)
    missing = unmapped(files, moves)
    if missing:
        raise RelayoutError(
            "modules not in the mapping (add a line for each to MOVES in scripts/relayout.py, "
            "then run it again):\n  " + "\n  ".join(missing)
        )
    moving = plan(files, moves)
    clash = [new for new in moving.values() if (root / new).exists()]
    if clash:
        raise RelayoutError("already there, would be overwritten:\n  " + "\n  ".join(clash))
    modmap = module_map(moves, files)
    after = [moving.get(p, p) for p in files]
    known = {d for p in after if (d := dotted(p))} | set(modmap) | set(modmap.values())
    check_names(modmap, {d for p in after if (d := dotted(p))})
    pmap = path_map(moves)
    names = basename_map(moves, files)
    changed: list[str] = []

    # 1. rewrite every text file where it stands (imports need the file's old place)
    for path in files:
        if not is_text(path):
            continue
        file = root / path
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = text
        if path.endswith(".py"):
            anchor = dotted(path)
            dest_path = moving.get(path, path)
            dest = dotted(dest_path)
            if anchor and dest:
                new = rewrite_imports(new, anchor, path, dest, dest_path, modmap, known)
            elif path.split("/")[0] in ("examples", "benchmarks", "scripts", "docs"):
                new = rewrite_imports(new, "x", path, "x", path, modmap, known)
        new = rewrite_from_lines(new, modmap)
        new = rewrite_dotted(new, modmap)
        new = rewrite_paths(new, pmap)
        if path.endswith((".md", ".py")):
            new = rewrite_names(new, names, markdown=path.endswith(".md"))
        new = special(new, {path, moving.get(path, path)})
        if new != text:
            changed.append(f"rewrote {path}")
            if not dry:
                file.write_text(new, encoding="utf-8")

    # 2. move
    for old, new in sorted(moving.items()):
        changed.append(f"moved {old} -> {new}")
        if not dry:
            (root / new).parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "mv", old, new], cwd=root, check=True)

    # 3. the package __init__s
    for folder, doc in PACKAGE_DOCS.items():
        path = f"{folder}/__init__.py"
        if path in GENERATED:
            continue
        if write(root, path, f'"""{wrap_doc(doc)}"""\n', dry):
            changed.append(f"wrote {path}")
    for path, template in GENERATED.items():
        folder = path.rpartition("/")[0]
        text = template.replace("{doc}", wrap_doc(PACKAGE_DOCS.get(folder, "")))
        if write(root, path, text, dry):
            changed.append(f"wrote {path}")
    if not dry:
        subprocess.run(["git", "add", "-A", *SCANNED], cwd=root, check=True)

    # 4. setuptools' list of packages
    pyproject = root / "pyproject.toml"
    if pyproject.exists() and not dry:
        text = pyproject.read_text(encoding="utf-8")
        listed = ", ".join(f'"{p}"' for p in packages_list(root))
        new = re.sub(r"(?m)^packages = \[.*\]$", lambda _m: f"packages = [{listed}]", text)
        new = special(new, {"pyproject.toml"})
        if new != text:
            pyproject.write_text(new, encoding="utf-8")
            changed.append("wrote pyproject.toml packages")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; list what would")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    try:
        changed = run(args.root, dry=args.check)
    except RelayoutError as exc:
        print(f"relayout: {exc}", file=sys.stderr)
        return 1
    for line in changed:
        print(line)
    print(f"relayout: {len(changed)} change(s)" if changed else "relayout: nothing to change")
    return 0


if __name__ == "__main__":
    sys.exit(main())
