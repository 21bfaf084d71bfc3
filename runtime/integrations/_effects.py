"""What an agent framework's tool does, declared for actorlog: shared by the integrations
(``actorlog.integrations.pydantic_ai``, ``actorlog.integrations.openai_agents``).

It imports no agent framework, so each integration needs only its own extra installed.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from typing import Any

import attrs

from .._effects.tools import Effect, Happened, NotHappened, Tool
from .._journal.checks import shown
from .._journal.errors import ConfigurationError

__all__ = [
    "ESCALATE",
    "IDEMPOTENT",
    "READ",
    "ReconcileToolFn",
    "ToolEffect",
    "JournalingTools",
    "adapter_of",
    "check_timeout",
    "effect_by_name",
    "idempotency_key",
    "reconciled",
    "calling",
    "shown",
    "this_call",
]

#: id(spec) -> (spec, its pydantic TypeAdapter): made once per output spec
_ADAPTERS: dict[int, tuple[Any, Any]] = {}


def adapter_of(spec: Any) -> Any:
    """The ``pydantic.TypeAdapter`` of ``spec`` (an agent's output type), made once per spec
    and reused: making one generates the type's schema, which cost a durable run more than
    its commits (issue 25). Raises what ``TypeAdapter`` raises (a spec that is not a type);
    a failure is not cached (a forward reference may resolve later)."""
    import pydantic  # both frameworks depend on it; this module imports neither

    found = _ADAPTERS.get(id(spec))
    if found is not None and found[0] is spec:
        return found[1]
    adapter = pydantic.TypeAdapter(spec)
    if len(_ADAPTERS) >= 256:
        _ADAPTERS.clear()
    _ADAPTERS[id(spec)] = (spec, adapter)  # the spec kept alive: its id stays its own
    return adapter


#: The work of the journaled call this context is making (``calling``): what the one ``Tool``
#: of a tool (or of a model request) runs for that call.
_WORK: contextvars.ContextVar[Callable[..., Coroutine[Any, Any, Any]] | None] = (
    contextvars.ContextVar("actorlog_integration_work", default=None)
)


@contextlib.contextmanager
def calling(work: Callable[..., Coroutine[Any, Any, Any]]) -> Iterator[None]:
    """Around ``ctx.call(tool, ...)`` of a ``Tool`` made with ``this_call``: the tool runs
    ``work`` (a closure over one call's state) with the call's arguments. The runtime runs a
    tool inside its ``ctx.call`` (the first attempt, retries, a re-run after a crash), so
    each call gets its own work, and each tool is one ``Tool``, made once (making one costs an
    ``inspect.signature`` and a ``typing.get_type_hints``)."""
    token = _WORK.set(work)
    try:
        yield
    finally:
        _WORK.reset(token)


def this_call() -> Callable[..., Coroutine[Any, Any, Any]]:
    """The work of the call being made (``calling``).

    Raises:
        ConfigurationError: outside the ``ctx.call`` of an integration (a journaling tool
            called directly).
    """
    work = _WORK.get()
    if work is None:
        raise ConfigurationError(
            "an agent integration's journaled call runs only inside the ctx.call its "
            "DurableAgent makes"
        )
    return work


async def _tool_call(args: Any, *, idempotency_key: str = "") -> Any:
    """Each tool call: the tool's arguments (logged), its key if it is idempotent."""
    return await this_call()(args, idempotency_key=idempotency_key)


class JournalingTools:
    """The ``Tool`` of each (tool name, declared effect) of one agent, which each of its calls
    is journaled with (run inside ``calling(work)``): its name is ``prefix + name``, its call
    ``(args, *, idempotency_key="")``, and a reconcile function's ``Happened(result)`` is
    logged as ``Happened(settled(result))``. Made on first use and kept (at most ``limit``: a
    toolset whose tool names keep changing cannot grow it without bound)."""

    def __init__(self, prefix: str, settled: Callable[[Any], Any], limit: int = 1024) -> None:
        self._prefix = prefix
        self._settled = settled
        self._limit = limit
        self._made: dict[tuple[str, ToolEffect], Tool[Any, Any]] = {}

    def get(self, name: str, declared: ToolEffect) -> Tool[Any, Any]:
        key = (name, declared)
        try:
            found = self._made.get(key)
        except TypeError:  # a ToolEffect holding an unhashable reconcile callable
            return self._make(name, declared)
        if found is None:
            found = self._make(name, declared)
            if len(self._made) >= self._limit:
                self._made.clear()
            self._made[key] = found
        return found

    def _make(self, name: str, declared: ToolEffect) -> Tool[Any, Any]:
        reconcile = None
        if declared.reconcile is not None:
            user_fn, settled = declared.reconcile, self._settled

            async def reconcile(key: str, arguments: dict[str, Any]) -> Any:
                args = arguments.get("args")
                answer = await user_fn(key, args if isinstance(args, dict) else {})
                if isinstance(answer, Happened):
                    return Happened(settled(answer.result))
                return answer

        return Tool(
            _tool_call,
            name=self._prefix + name,
            effect=declared.effect,
            idempotent=declared.idempotent,
            reconcile=reconcile,
        )


#: ``await fn(idempotency_key, tool_args)`` -> ``Happened(result)`` / ``NotHappened()`` /
#: ``None`` ("don't know": escalate)
ReconcileToolFn = Callable[[str, dict[str, Any]], Awaitable["Happened | NotHappened | None"]]


def check_timeout(timeout: object) -> float | None:
    """A run's ``timeout=`` (seconds to wait for the reply), checked.

    Raises:
        ConfigurationError: not None or a finite number (like ``ActorRef.ask``'s, zero or
            less times out at once; the message stays logged and runs).
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ConfigurationError(f"timeout must be seconds or None, not {shown(timeout)}")
    try:
        t = float(timeout)
    except OverflowError:
        t = math.inf
    if math.isnan(t) or math.isinf(t):
        raise ConfigurationError(f"timeout={shown(timeout)}: it must be a finite number")
    return t


@attrs.frozen
class ToolEffect:
    """What an agent's tool does, and so what recovery does when a call of it is in doubt
    (logged as started, no result): see actorlog's ``@tool``.

    * ``READ``: safe to repeat; re-run when in doubt.
    * ``IDEMPOTENT``: a write that takes ``idempotency_key()`` and applies once per key;
      re-run with the same key when in doubt.
    * ``reconciled(fn)``: a write; after a crash ``await fn(key, tool_args)`` says whether
      it happened (``Happened(result)`` / ``NotHappened()`` / ``None`` for "don't know").
    * ``ESCALATE`` (the default for undeclared tools): a write; the actor waits in status
      ``in_doubt`` until an operator resolves it (``system.resolve`` or the CLI).
    """

    effect: Effect = "write"
    idempotent: bool = False
    reconcile: ReconcileToolFn | None = None


READ = ToolEffect("read")
IDEMPOTENT = ToolEffect("write", idempotent=True)
ESCALATE = ToolEffect("write")

_BY_NAME: Mapping[str, ToolEffect] = {"read": READ, "idempotent": IDEMPOTENT, "escalate": ESCALATE}


def reconciled(fn: ReconcileToolFn) -> ToolEffect:
    """A write whose in-doubt calls are settled by asking ``fn(key, tool_args)``."""
    if not callable(fn):
        raise ConfigurationError(f"reconciled() needs an async function, not {shown(fn)}")
    return ToolEffect("write", reconcile=fn)


def effect_by_name(tool_name: str, declared: Any) -> ToolEffect:
    """A declared effect given by name (``"read"``, ``"idempotent"``, ``"escalate"``) or as a
    ``ToolEffect``.

    Raises:
        ConfigurationError: anything else.
    """
    if isinstance(declared, ToolEffect):
        return declared
    try:
        return _BY_NAME[declared]
    except (KeyError, TypeError):
        raise ConfigurationError(
            f"tool {shown(tool_name)}: effect {shown(declared)} is not one of "
            f"{', '.join(sorted(_BY_NAME))} (or a ToolEffect)"
        ) from None


def checked_options(
    name: object, tools: object, default_tool_effect: object
) -> dict[str, ToolEffect]:
    """A DurableAgent's ``name``, ``tools`` and ``default_tool_effect``, checked (both
    integrations); the tools' effects by name.

    Raises:
        ConfigurationError: a name that is not 1 to 200 printable characters, ``tools`` not a
            mapping of tool name to effect, a default that is not a ``ToolEffect``.
    """
    if not isinstance(name, str) or not name or len(name) > 200 or not name.isprintable():
        raise ConfigurationError(
            f"a DurableAgent needs a stable name (1 to 200 printable characters), not {shown(name)}"
        )
    if tools is not None and not isinstance(tools, Mapping):
        raise ConfigurationError(f"tools must be a mapping of tool name -> effect: {shown(tools)}")
    if not isinstance(default_tool_effect, ToolEffect):
        raise ConfigurationError(
            f"default_tool_effect must be a ToolEffect (READ, IDEMPOTENT, ESCALATE, "
            f"reconciled(fn)), not {shown(default_tool_effect)}"
        )
    return {str(k): effect_by_name(str(k), v) for k, v in (tools or {}).items()}


def check_stream_options(event_stream_handler: object, emit_deltas: object) -> None:
    """A DurableAgent's ``event_stream_handler`` (a callable or None) and ``emit_deltas``
    (a bool), checked when the agent is made, not at its first run's events.

    Raises:
        ConfigurationError: either is of another kind.
    """
    if event_stream_handler is not None and not callable(event_stream_handler):
        raise ConfigurationError(
            f"event_stream_handler must be an async callable or None, not "
            f"{shown(event_stream_handler)}"
        )
    if not isinstance(emit_deltas, bool):
        raise ConfigurationError(f"emit_deltas must be True or False, not {shown(emit_deltas)}")


_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("actorlog_pai_key", default=None)


def idempotency_key() -> str:
    """Inside a tool declared ``IDEMPOTENT``: the stable idempotency key of this call, the
    same on every re-run after a crash. Pass it to the external system."""
    key = _KEY.get()
    if not key:
        raise ConfigurationError(
            "idempotency_key() is only available inside a tool declared IDEMPOTENT and run "
            "by a DurableAgent"
        )
    return key
