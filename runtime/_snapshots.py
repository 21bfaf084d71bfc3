"""Snapshot policy and envelope (FORMAT.md [F12])."""

from __future__ import annotations

import time
from typing import Any

import attrs

from . import _codec
from ._errors import ConfigurationError
from .store import SnapshotInfo, SnapshotRow

__all__ = [
    "BUDGET_HEADROOM",
    "MAX_SNAPSHOT_BYTES",
    "MIN_TAIL_SHARE",
    "RecoveryCost",
    "SnapshotPolicy",
    "build_snapshot",
]

#: [F12] Largest encoded state.
MAX_SNAPSHOT_BYTES = 1024 * 1024 * 1024


@attrs.frozen
class SnapshotPolicy:
    """When to snapshot and how many to keep (per actor class, overridable per spawn)."""

    every: int | None = 100
    every_seconds: float | None = None
    keep: int = 3
    #: seconds: snapshot when the estimated recovery time of the current tail reaches
    #: ``BUDGET_HEADROOM`` of this (see :class:`RecoveryCost`)
    recovery_budget: float | None = None

    def __attrs_post_init__(self) -> None:
        if self.recovery_budget is not None and (
            not isinstance(self.recovery_budget, int | float) or self.recovery_budget <= 0
        ):
            raise ConfigurationError(
                "recovery_budget must be a positive number of seconds or None, "
                f"not {self.recovery_budget!r}"
            )
        if self.every is not None and (not isinstance(self.every, int) or self.every < 1):
            raise ConfigurationError(
                f"snapshot_every must be a positive int or None, not {self.every!r}"
            )
        if self.every_seconds is not None and (
            not isinstance(self.every_seconds, int | float) or self.every_seconds <= 0
        ):
            raise ConfigurationError(
                "snapshot_every_seconds must be a positive number or None, "
                f"not {self.every_seconds!r}"
            )
        if not isinstance(self.keep, int) or self.keep < 2:
            raise ConfigurationError(
                f"snapshot_keep must be an int >= 2 (so there is always an older snapshot "
                f"to fall back to), not {self.keep!r}"
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
        if steps_since <= 0:
            return False
        if self.every is not None and steps_since >= self.every:
            return True
        if self.recovery_budget is not None:
            floor, tail = recovery
            budget = self.recovery_budget
            # Snapshot when floor + tail reaches the headroom mark. If the floor alone is
            # that high (a huge state), snapshotting more cannot help: then snapshot only
            # once the tail is worth a tenth of the budget, instead of on every step.
            if tail >= max(budget * BUDGET_HEADROOM - floor, budget * MIN_TAIL_SHARE):
                return True
        return self.every_seconds is not None and seconds_since >= self.every_seconds


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
    """Encode the state (raises ``EncodeError``) into a digest-carrying snapshot row."""
    data = _codec.encode_json(state, "actor state", limit=MAX_SNAPSHOT_BYTES)
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
