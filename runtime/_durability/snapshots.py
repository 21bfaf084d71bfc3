"""Snapshot policy and envelope (FORMAT.md [F12])."""

from __future__ import annotations

import enum
import functools
import json
import time
from typing import Any

import anyio
import anyio.to_thread
import attrs

from .._journal import codec as _codec, compact as _compact
from .._journal.errors import ConfigurationError, SnapshotError
from .._tracing.telemetry import ATTR, SPAN, set_error, tracer
from ..store import SnapshotInfo, SnapshotRow, Store
from . import retention as _retention

__all__ = [
    "BUDGET_HEADROOM",
    "MAX_SNAPSHOT_BYTES",
    "MIN_TAIL_SHARE",
    "OFFLOAD_BYTES",
    "RecoveryCost",
    "SnapshotPolicy",
    "SnapshotTrigger",
    "build_snapshot",
    "check_round_trip",
    "write_snapshot",
]

#: States whose last snapshot was at least this large are encoded, checked and digested on a
#: worker thread, so the event loop keeps serving other actors meanwhile (a thread hop costs
#: tens of microseconds; encoding a few megabytes costs tens of milliseconds).
OFFLOAD_BYTES = 256 * 1024

#: [F12] Largest encoded state.
MAX_SNAPSHOT_BYTES = 1024 * 1024 * 1024


class SnapshotTrigger(enum.StrEnum):
    """Why a snapshot was written (the ``actorlog.snapshot.trigger`` span attribute and the
    ``trigger`` of the ``snapshot`` history event)."""

    #: ``snapshot_every`` steps since the last one
    EVERY_STEPS = "every_steps"
    #: ``snapshot_every_seconds`` since the last one
    EVERY_SECONDS = "every_seconds"
    #: the estimated recovery time reached the headroom mark of ``recovery_budget``
    RECOVERY_BUDGET = "recovery_budget"
    #: the actor was passivated (idle, or ``max_actors`` reached)
    PASSIVATION = "passivation"
    #: called directly (not by a policy)
    MANUAL = "manual"


@attrs.frozen
class SnapshotPolicy:
    """When to snapshot and how many to keep (per actor class, overridable per spawn)."""

    every: int | None = 100
    every_seconds: float | None = None
    keep: int = 3
    #: seconds: snapshot when the estimated recovery time of the current tail reaches
    #: ``BUDGET_HEADROOM`` of this (see :class:`RecoveryCost`)
    recovery_budget: float | None = None
    #: what of the log may be compacted away (``_retention.parse``: checked, normalized)
    retention: _retention.Retention = attrs.field(default="all", converter=_retention.parse)

    def __attrs_post_init__(self) -> None:
        for name, value in (
            ("recovery_budget", self.recovery_budget),
            ("snapshot_every_seconds", self.every_seconds),
        ):
            if value is not None and not _positive_finite(value):
                raise ConfigurationError(
                    f"{name} must be a positive, finite number of seconds or None, not "
                    f"{_codec.shown(value)}"
                )
        if self.every is not None and not (_is_int(self.every) and self.every >= 1):
            raise ConfigurationError(
                f"snapshot_every must be a positive int or None, not {_codec.shown(self.every)}"
            )
        if not (_is_int(self.keep) and self.keep >= 2):
            raise ConfigurationError(
                f"snapshot_keep must be an int >= 2 (so there is always an older snapshot "
                f"to fall back to), not {_codec.shown(self.keep)}"
            )

    def due(
        self,
        steps_since: int,
        seconds_since: float,
        recovery: tuple[float, float] = (0.0, 0.0),
    ) -> bool:
        """``recovery`` is the estimated (floor, tail) of recovering now: the floor is what
        even a fresh snapshot costs to load, the tail what replaying since the last one costs.
        """
        return self.trigger(steps_since, seconds_since, recovery) is not None

    def trigger(
        self,
        steps_since: int,
        seconds_since: float,
        recovery: tuple[float, float] = (0.0, 0.0),
    ) -> SnapshotTrigger | None:
        """Which setting makes a snapshot due now (the first that does), or None (see
        :meth:`due`)."""
        if steps_since <= 0:
            return None
        if self.every is not None and steps_since >= self.every:
            return SnapshotTrigger.EVERY_STEPS
        if self.recovery_budget is not None:
            floor, tail = recovery
            budget = self.recovery_budget
            # Snapshot when floor + tail reaches the headroom mark. If the floor alone is
            # that high (a huge state), snapshotting more cannot help: then snapshot only
            # once the tail is worth a tenth of the budget, instead of on every step.
            if tail >= max(budget * BUDGET_HEADROOM - floor, budget * MIN_TAIL_SHARE):
                return SnapshotTrigger.RECOVERY_BUDGET
        if self.every_seconds is not None and seconds_since >= self.every_seconds:
            return SnapshotTrigger.EVERY_SECONDS
        return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_finite(value: object) -> bool:
    """A real number of seconds: not a bool, not NaN (which compares False to everything and
    would silently mean "never"), not infinite."""
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")
    )


#: Snapshot when the estimate reaches this fraction of ``recovery_budget``: the estimate is
#: an estimate, and the step that crosses the line adds its own cost too.
BUDGET_HEADROOM = 0.7
#: Never snapshot for the budget before the tail costs this share of it (see ``due``).
MIN_TAIL_SHARE = 0.1


class RecoveryCost:
    """Online estimate of how long recovering an actor would take right now.

    recovery ~= fixed + snapshot_bytes * per_byte + tail_entries * per_entry + replay_cpu

    ``replay_cpu`` is the handler time of the steps since the snapshot, measured live as the
    step's duration minus the time it spent awaiting effects (tools, commits), which replay
    serves from the log. ``per_entry`` (reading and verifying one entry) and ``per_byte``
    (loading a snapshot) start from conservative defaults and are re-measured at every
    recovery of an actor of the same class, so the estimate follows the machine and the
    state's size.
    """

    def __init__(self) -> None:
        self.fixed = 0.005  # the store queries of a recovery
        self.per_entry = 35e-6  # ~30k entries/s measured by benchmarks.recovery
        self.per_byte = 10e-9

    def parts(
        self, snapshot_bytes: int, tail_entries: int, replay_cpu: float
    ) -> tuple[float, float]:
        """(floor, tail): loading the snapshot, and replaying what came after it."""
        return (
            self.fixed + snapshot_bytes * self.per_byte,
            tail_entries * self.per_entry + replay_cpu,
        )

    def estimate(self, snapshot_bytes: int, tail_entries: int, replay_cpu: float) -> float:
        return sum(self.parts(snapshot_bytes, tail_entries, replay_cpu))

    def observe(
        self,
        *,
        duration: float,
        load_seconds: float,
        snapshot_bytes: int,
        entries: int,
        replay_cpu: float,
    ) -> None:
        """Fold in a measured recovery (moving averages, so one outlier cannot dominate)."""
        if snapshot_bytes > 4096 and load_seconds > 0:
            self.per_byte = 0.5 * self.per_byte + 0.5 * (load_seconds / snapshot_bytes)
        if entries >= 20:
            rest = max(duration - load_seconds - replay_cpu, 0.0)
            self.per_entry = 0.5 * self.per_entry + 0.5 * max(rest / entries, 1e-6)


def build_snapshot(
    actor_id: str,
    state: Any,
    *,
    seq: int,
    handled_seq: int,
    schema_version: int,
) -> SnapshotRow:
    """Encode the state into a digest-carrying snapshot row.

    Pure (no I/O, no event loop): large states are built on a worker thread. Raises
    ``EncodeError`` (the state cannot be encoded) or ``SnapshotError`` (it does not decode
    back into its class as the same value: such a snapshot could not be recovered from).
    """
    data = _codec.encode_json(state, "actor state", limit=MAX_SNAPSHOT_BYTES)
    check_round_trip(data, type(state))
    data = _compact.pack_snapshot(data)  # [F19] large states are stored compressed
    info = SnapshotInfo(
        actor_id=actor_id,
        seq=seq,
        handled_seq=handled_seq,
        type_tag=_codec.type_tag(type(state)),
        schema_version=schema_version,
        digest=_codec.snapshot_digest(
            actor_id, seq, handled_seq, _codec.type_tag(type(state)), schema_version, data
        ),
        size=len(data),
        created_at=time.time(),
    )
    return SnapshotRow(info=info, data=data)


def check_round_trip(data: bytes, state_type: type) -> None:
    """Raise ``SnapshotError`` unless ``data`` decodes into ``state_type`` and encodes back to
    the same bytes (e.g. a union of two look-alike attrs classes, or ``None`` in an ``int``
    field, would not: recovery could not use such a snapshot)."""
    tag = _codec.type_tag(state_type)
    try:
        again = _codec.encode_json(
            _codec.structure(json.loads(data), state_type),
            "actor state",
            limit=MAX_SNAPSHOT_BYTES,
        )
    except Exception as exc:
        raise SnapshotError(f"the state does not decode back into {tag}: {exc}") from exc
    if again != data:
        raise SnapshotError(
            f"the state does not round-trip through {tag}: decoded and encoded again it "
            "differs (a field's annotation does not describe its value?)"
        )


async def write_snapshot(
    store: Store,
    actor_id: str,
    actor_type: str,
    state: Any,
    *,
    seq: int,
    handled_seq: int,
    schema_version: int,
    keep: int,
    offload: bool,
    trigger: str = SnapshotTrigger.MANUAL,
    recovery_estimate: float | None = None,
) -> int:
    """Save a snapshot of ``state`` covering ``seq`` and delete those beyond the newest
    ``keep``; traced as ``actorlog.snapshot``. Returns its size in bytes.

    With ``offload`` (a large state) it is encoded on a worker thread: the caller's handler
    is not running meanwhile, so the state does not change under it. ``trigger`` (a
    :class:`SnapshotTrigger`) and ``recovery_estimate`` (seconds) go on the span.
    """
    t0 = time.perf_counter()
    attributes: dict[str, Any] = {
        ATTR.ACTOR_ID: actor_id,
        ATTR.ACTOR_TYPE: actor_type,
        ATTR.SNAPSHOT_SEQ: seq,
        ATTR.SNAPSHOT_HANDLED_SEQ: handled_seq,
        ATTR.SNAPSHOT_TRIGGER: str(trigger),
    }
    if recovery_estimate is not None:
        attributes[ATTR.SNAPSHOT_RECOVERY_ESTIMATE] = recovery_estimate
    with tracer.start_as_current_span(SPAN.SNAPSHOT, attributes=attributes) as span:
        try:
            build = functools.partial(
                build_snapshot,
                actor_id,
                state,
                seq=seq,
                handled_seq=handled_seq,
                schema_version=schema_version,
            )
            row = await anyio.to_thread.run_sync(build) if offload else build()
            await store.save_snapshot(row)
            infos = await store.list_snapshots(actor_id)
            old = [i.seq for i in infos[keep:]]
            if old:
                await store.delete_snapshots(actor_id, old)
            span.set_attribute(ATTR.SNAPSHOT_BYTES, row.info.size)
            return row.info.size
        except Exception as exc:
            set_error(span, str(exc))
            raise
        finally:
            span.set_attribute(ATTR.SNAPSHOT_DURATION, time.perf_counter() - t0)
