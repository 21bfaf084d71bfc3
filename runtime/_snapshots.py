"""Snapshot policy and envelope (FORMAT.md [F12])."""

from __future__ import annotations

import time
from typing import Any

import attrs

from . import _codec
from ._errors import ConfigurationError
from .store import SnapshotInfo, SnapshotRow

__all__ = ["MAX_SNAPSHOT_BYTES", "SnapshotPolicy", "build_snapshot"]

#: [F12] Largest encoded state.
MAX_SNAPSHOT_BYTES = 1024 * 1024 * 1024


@attrs.frozen
class SnapshotPolicy:
    """When to snapshot and how many to keep (per actor class, overridable per spawn)."""

    every: int | None = 100
    every_seconds: float | None = None
    keep: int = 3

    def __attrs_post_init__(self) -> None:
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

    def due(self, steps_since: int, seconds_since: float) -> bool:
        if steps_since <= 0:
            return False
        if self.every is not None and steps_since >= self.every:
            return True
        return self.every_seconds is not None and seconds_since >= self.every_seconds


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
