"""An entry's payload as the dict of its fields, whichever format wrote it (FORMAT.md [F5]:
a JSON object; [F19]: format 2's compact array), for tests that read stored rows."""

from __future__ import annotations

import json
from typing import Any

from actorlog._journal import compact


def payload_of(kind: str, payload: bytes | str | memoryview) -> dict[str, Any]:
    obj = json.loads(payload if isinstance(payload, str) else bytes(payload))
    if isinstance(obj, list):
        return compact.to_object(kind, obj)
    assert isinstance(obj, dict), obj
    return obj
