"""What a ``DurableAgent``'s model request asks and offers, as the fingerprints logged with
it (docs/pydantic-ai.md): replay checks that the agent asks the same thing the log recorded
at that position. Every log recorded so far holds these hexes, so their computation never
changes (``tests/integrations/test_pydantic_ai_fingerprint.py``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models import ModelRequestParameters

from .._journal.errors import ConfigurationError
from ._effects import ToolEffect

__all__ = ["CHAINED", "RequestChain", "chained", "fingerprint", "tools_fingerprint"]

#: Fields of pydantic-ai messages that differ between an original run and its replay
#: (clock readings and per-run ids); left out of a model request's fingerprint.
_VOLATILE = frozenset({"timestamp", "run_id", "conversation_id"})


class _Declared(Protocol):
    """What declares each tool's effect (a ``DurableAgent``)."""

    def effect_of(
        self, tool_name: str, metadata: Mapping[str, Any] | None = None
    ) -> ToolEffect: ...


#: what a JSON dump holds besides dicts and lists (kept as they are by ``_strip``)
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _strip(value: Any) -> Any:
    """``value`` (a JSON dump: dicts, lists, scalars) without the ``_VOLATILE`` keys, at any
    depth. Scalars are kept without a call: a request's dump is mostly scalars."""
    kind = type(value)
    if kind is dict:
        return {
            k: v if type(v) in _SCALARS else _strip(v)
            for k, v in value.items()
            if k not in _VOLATILE
        }
    if kind is list:
        return [v if type(v) in _SCALARS else _strip(v) for v in value]
    return value


def fingerprint(messages: Sequence[ModelMessage]) -> str:
    """What a model request asks, without clock readings and run ids: replay checks that the
    agent asks the same thing the log recorded at that position."""
    plain = _strip(ModelMessagesTypeAdapter.dump_python(list(messages), mode="json"))
    blob = json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


#: the prefix of a chained fingerprint (FORMAT.md [F23]); a whole request's has none
CHAINED = "c:"


def _dump(messages: Sequence[ModelMessage]) -> list[Any]:
    return list(ModelMessagesTypeAdapter.dump_python(list(messages), mode="json"))


def chained(
    previous: str,
    new: Sequence[ModelMessage],
    dump: Callable[[Sequence[ModelMessage]], list[Any]] = _dump,
) -> str:
    """A model request's chained fingerprint: ``new``, the messages it sends that the
    previous request of its chain did not (without clock readings and run ids, as
    ``fingerprint``), hashed after ``previous``, that request's chained fingerprint ("" at
    the chain's start). ``dump``: what dumps them as ``ModelMessagesTypeAdapter`` does."""
    plain = _strip(dump(new))
    blob = json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()
    return CHAINED + hashlib.sha256(previous.encode() + b"\n" + blob).hexdigest()


class RequestChain:
    """The chained fingerprints of a conversation's model requests, across its runs.

    A request continues the chain when the messages it sends start with the very message
    objects the previous request sent (pydantic-ai appends to its history and hands the
    same objects on); its fingerprint then covers only the messages after them. A request
    whose messages do not (a history processor that rebuilt them, the first request of a
    conversation, or one after a request logged in the whole form) starts the chain again:
    its fingerprint covers all its messages. Both are the same on every replay: they
    depend on what the run's code does with the messages, not on timing.
    """

    def __init__(
        self,
        sent: Sequence[ModelMessage] | None = None,
        last: str = "",
        dump: Callable[[Sequence[ModelMessage]], list[Any]] = _dump,
    ) -> None:
        #: the messages the chain's last request sent (the objects themselves)
        self.sent: list[ModelMessage] = list(sent or [])
        #: that request's chained fingerprint ("": none, the next request starts the chain)
        self.last = last
        #: dumps messages as ``ModelMessagesTypeAdapter`` does (a run's ``RunHistory.dump``
        #: keeps the dumps for the conversation's JSON at the run's end)
        self._dump = dump

    def next(self, messages: Sequence[ModelMessage]) -> str:
        """The chained fingerprint of a request sending ``messages`` (and it becomes the
        chain's last)."""
        sent = self.sent
        n = len(sent)
        same = len(messages) >= n and all(a is b for a, b in zip(sent, messages[:n], strict=True))
        if self.last and same:
            fp = chained(self.last, messages[n:], self._dump)
        else:
            fp = chained("", messages, self._dump)
        self.sent, self.last = list(messages), fp
        return fp

    def restart(self) -> None:
        """The next request starts the chain again (this one was logged in the whole form)."""
        self.last = ""


def tools_fingerprint(params: ModelRequestParameters, durable: _Declared | None = None) -> str:
    """What a model request offers the model: every tool definition (name, description,
    parameter schema, strictness, kind) and, for function tools, the effect actorlog
    journals it with (``durable.effect_of``), plus the output mode. A change to any of these
    makes a recorded request differ from a replayed one."""

    def effect(name: str, metadata: Mapping[str, Any] | None) -> Any:
        if durable is None:
            return None
        try:
            e = durable.effect_of(name, metadata)
        except ConfigurationError as exc:  # raised again when the tool is called
            return f"invalid: {exc}"
        return {
            "effect": e.effect,
            "idempotent": e.idempotent,
            "reconcile": e.reconcile is not None,
        }

    tools = [
        {
            "name": td.name,
            "description": td.description,
            "parameters": td.parameters_json_schema,
            "strict": td.strict,
            "kind": td.kind,
            "actorlog": effect(td.name, td.metadata) if group == "function" else None,
            "group": group,
        }
        for group, defs in (("function", params.function_tools), ("output", params.output_tools))
        for td in defs
    ]
    plain = {
        "tools": tools,
        "output_mode": params.output_mode,
        "allow_text_output": params.allow_text_output,
    }
    blob = json.dumps(plain, sort_keys=True, separators=(",", ":"), default=repr).encode()
    return hashlib.sha256(blob).hexdigest()
