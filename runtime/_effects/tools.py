"""``@tool``: declaring a side effect and what to do when it is in doubt."""

from __future__ import annotations

import contextvars
import functools
import inspect
import typing
from collections.abc import Awaitable, Callable
from types import EllipsisType
from typing import Any, Generic, Literal, ParamSpec, TypeVar, overload

import attrs

from .._journal.checks import shown, validate_stable_name
from .._journal.errors import ConfigurationError, ReadOnlyQueryError, ToolCalledDirectlyError
from .retry import NO_RETRY, Retry, check_timeout

__all__ = ["Happened", "NotHappened", "Tool", "in_step", "running_tool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")
Effect = Literal["read", "write"]
#: How an in-doubt intent (logged, no result) is settled. See docs/recovery.md.
Policy = Literal["rerun", "rerun-same-key", "reconcile", "escalate"]


@attrs.frozen
class Happened:
    """A reconcile function's answer: the call did happen, and this is its result."""

    result: Any = None


@attrs.frozen
class NotHappened:
    """A reconcile function's answer: the call did not happen; it is safe to run it again."""


#: Inside a handler: which actor's step runs here (``in_step``); ``None`` outside any step
#: and while ``ctx.call`` runs a tool (``running_tool``: a tool may call tools directly).
#: Child tasks a handler starts inherit it.
_STEP: contextvars.ContextVar[str | None] = contextvars.ContextVar("actorlog_step", default=None)
#: the same, for the runtime's hot paths: ``token = STEP.set(where)`` ... ``STEP.reset(token)``
STEP = _STEP
#: the actor a read-only query runs for (``_query``), or None
QUERY: contextvars.ContextVar[str | None] = contextvars.ContextVar("actorlog_query", default=None)


def refuse_in_query(what: str) -> None:
    """Raise ``ReadOnlyQueryError`` if called from inside a query (an effect it attempts)."""
    where = QUERY.get()
    if where is not None:
        raise ReadOnlyQueryError(where, what)


def refuse_query_in_step(actor_id: str) -> None:
    """A handler may not query: the answer is not logged, so its replay could differ.

    Raises:
        ConfigurationError: called inside a handler's step.
    """
    where = _STEP.get()
    if where is not None:
        raise ConfigurationError(
            f"ref.query() of actor {actor_id!r} was called inside the handler of {where}; its "
            "answer would not be logged, so a replay could see another one. Ask the actor "
            "through a logged effect instead (ctx.send, or a tool)"
        )


class _StepMark:
    """Sets ``_STEP`` for the duration of a ``with`` block (a class, not a generator-based
    context manager: it runs twice per step, and once per tool call)."""

    __slots__ = ("_token", "_value")

    def __init__(self, value: str | None) -> None:
        self._value = value
        self._token: contextvars.Token[str | None] | None = None

    def __enter__(self) -> None:
        self._token = _STEP.set(self._value)

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None
        _STEP.reset(self._token)


def in_step(where: str) -> _StepMark:
    """Around a handler's ``receive`` (live and replayed): a tool called directly in here
    raises ``ToolCalledDirectlyError``."""
    return _StepMark(where)


def running_tool() -> _StepMark:
    """Around ``ctx.call``'s own run of a tool (and of a reconcile function)."""
    return _StepMark(None)


ReconcileFn = Callable[[str, dict[str, Any]], Awaitable["Happened | NotHappened | None"]]


class Tool(Generic[P, R]):
    """A declared side effect. Call it through ``ctx.call(tool, ...)`` inside a handler;
    calling it directly there raises ``ToolCalledDirectlyError`` (it would not be logged).
    Outside any actor (plain code, tests) calling it runs the function as it is.

    Attributes:
        name: the name recorded in the log (defaults to the function's qualified name).
        effect: ``"read"`` (safe to repeat) or ``"write"``.
        idempotent: the function takes an ``idempotency_key`` keyword argument and applying
            it twice with the same key has the effect of applying it once.
        reconcile: ``async fn(idempotency_key, arguments) -> Happened | NotHappened | None``
            asked after a crash whether an in-doubt call happened (``None``: don't know).
        retry: the :class:`Retry` policy (``None``: one attempt).
        timeout: seconds an attempt may run before it is cancelled and recorded as a
            ``ToolTimeoutError`` (``None``: no limit).
    """

    def __init__(
        self,
        fn: Callable[P, Awaitable[R]],
        *,
        name: str | None,
        effect: Effect,
        idempotent: bool,
        reconcile: ReconcileFn | None,
        retry: Retry | None = None,
        timeout: float | None = None,
    ) -> None:
        if retry is not None and not isinstance(retry, Retry):
            raise ConfigurationError(
                f"retry must be an actorlog.Retry(...) or None, not {shown(retry)}"
            )
        self.retry: Retry = retry or NO_RETRY
        self.timeout = check_timeout(timeout)
        if not inspect.iscoroutinefunction(fn):
            raise ConfigurationError(
                f"@tool needs an async function; {shown(getattr(fn, '__qualname__', fn))} is not"
            )
        if effect not in ("read", "write"):
            raise ConfigurationError(f"effect must be 'read' or 'write', not {shown(effect)}")
        if not isinstance(idempotent, bool):
            raise ConfigurationError(f"idempotent must be True or False, not {shown(idempotent)}")
        if reconcile is not None and not callable(reconcile):
            raise ConfigurationError("reconcile must be an async callable (key, arguments)")
        if name is None:
            module = getattr(fn, "__module__", None)
            qualname = getattr(fn, "__qualname__", None)
            if not isinstance(module, str) or not isinstance(qualname, str):
                raise ConfigurationError(
                    f"cannot name tool {shown(fn)} (it has no __module__/__qualname__): "
                    "declare it with @tool(name=...)"
                )
            name = f"{module}.{qualname}"
        validate_stable_name(name, "a tool name")
        self.fn = fn
        self.name = name
        self.effect: Effect = effect
        self.idempotent = idempotent
        self.reconcile = reconcile
        self.signature = inspect.signature(fn)
        if idempotent:
            p = self.signature.parameters.get("idempotency_key")
            has_var_kw = any(
                q.kind is inspect.Parameter.VAR_KEYWORD for q in self.signature.parameters.values()
            )
            if (p is None or p.kind is inspect.Parameter.POSITIONAL_ONLY) and not has_var_kw:
                raise ConfigurationError(
                    f"tool {self.name!r} is idempotent=True, so it must accept an "
                    "'idempotency_key' keyword argument"
                )
        #: the function takes a ``fencing_token`` keyword: ``ctx.call`` passes the actor's
        #: current fencing token (docs/scaling.md, "Fencing tokens for the outside world")
        self.wants_fencing_token = _takes_keyword(self.signature, "fencing_token")
        self._arity = _plain_arity(self.signature, self._supplied_names())
        functools.update_wrapper(self, fn)

    def with_options(
        self,
        *,
        retry: Retry | EllipsisType | None = ...,
        timeout: float | EllipsisType | None = ...,
    ) -> Tool[P, R]:
        """This tool with another retry policy and/or timeout, for one call:
        ``ctx.call(t.with_options(retry=Retry(attempts=2), timeout=5), ...)``. The name,
        effect and in-doubt policy stay, so the log cannot tell the two apart (the options
        are not logged: they decide what happens, and what happened is logged)."""
        copy = Tool.__new__(Tool)
        copy.__dict__.update(self.__dict__)
        if retry is not ...:
            if retry is not None and not isinstance(retry, Retry):
                raise ConfigurationError(
                    f"retry must be an actorlog.Retry(...) or None, not {shown(retry)}"
                )
            copy.retry = retry or NO_RETRY
        if timeout is not ...:
            copy.timeout = check_timeout(timeout)
        return copy

    @property
    def policy(self) -> Policy:
        """What recovery does with an in-doubt call of this tool."""
        if self.effect == "read":
            return "rerun"
        if self.idempotent:
            return "rerun-same-key"
        if self.reconcile is not None:
            return "reconcile"
        return "escalate"

    @functools.cached_property
    def return_type(self) -> Any:
        try:
            hints = typing.get_type_hints(self.fn)
        except Exception:  # unresolvable annotations: results come back as plain JSON values
            return Any
        return hints.get("return", Any)

    def _supplied_names(self) -> tuple[str, ...]:
        return (("idempotency_key",) if self.idempotent else ()) + (
            ("fencing_token",) if self.wants_fencing_token else ()
        )

    def check_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``bind`` without building its result: a call that passes exactly the positional
        parameters of a plain signature is accepted at once. Raises ``ConfigurationError``."""
        if kwargs or len(args) != self._arity:
            self.bind(args, kwargs)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
        """Check the call against the signature. Raises ``ConfigurationError`` on mismatch."""
        try:
            supplied: dict[str, Any] = {}
            if self.idempotent:
                supplied["idempotency_key"] = ""
            if self.wants_fencing_token:
                supplied["fencing_token"] = 0
            for name in supplied:
                if name in kwargs:
                    raise TypeError(f"{name} is supplied by actorlog; do not pass it")
            return self.signature.bind(*args, **kwargs, **supplied)
        except TypeError as exc:
            raise ConfigurationError(f"bad call of tool {self.name!r}: {exc}") from exc

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        where = _STEP.get()
        if where is not None:
            raise ToolCalledDirectlyError(self.name, where)
        refuse_in_query(f"called tool {self.name!r}")
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name} effect={self.effect} policy={self.policy}>"


def _plain_arity(signature: inspect.Signature, supplied: tuple[str, ...]) -> int:
    """How many positional arguments alone make a valid call, when the parameters other than
    the ``supplied`` ones are positional without defaults and come before them; else -1
    (every call is bound against the signature)."""
    n = 0
    seen_supplied = False
    for p in signature.parameters.values():
        if p.name in supplied:
            seen_supplied = True
            continue
        plain = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        if not plain or seen_supplied:
            return -1
        n += 1
    return n


def _takes_keyword(signature: inspect.Signature, name: str) -> bool:
    p = signature.parameters.get(name)
    return p is not None and p.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


@overload
def tool(fn: Callable[P, Awaitable[R]], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    effect: Effect = "write",
    idempotent: bool = False,
    reconcile: ReconcileFn | None = None,
    name: str | None = None,
    retry: Retry | None = None,
    timeout: float | None = None,
) -> Callable[[Callable[P, Awaitable[R]]], Tool[P, R]]: ...


def tool(
    fn: Callable[P, Awaitable[R]] | None = None,
    /,
    *,
    effect: Effect = "write",
    idempotent: bool = False,
    reconcile: ReconcileFn | None = None,
    name: str | None = None,
    retry: Retry | None = None,
    timeout: float | None = None,
) -> Tool[P, R] | Callable[[Callable[P, Awaitable[R]]], Tool[P, R]]:
    """Declare an async function as a tool: a side effect journaled by ``ctx.call``.

    ``@tool(effect="read")`` is re-run when in doubt; ``@tool(effect="write",
    idempotent=True)`` is re-run with the same ``idempotency_key``; ``reconcile=fn`` asks
    ``fn`` whether the call happened; any other write (including bare ``@tool``) escalates
    to an operator. ``retry=Retry(...)`` runs it again after a failure, ``timeout=`` cancels
    an attempt that runs longer (docs/retries.md).
    """
    if retry is not None and not isinstance(retry, Retry):
        raise ConfigurationError(
            f"retry must be an actorlog.Retry(...) or None, not {shown(retry)}"
        )
    check_timeout(timeout)

    def wrap(f: Callable[P, Awaitable[R]]) -> Tool[P, R]:
        return Tool(
            f,
            name=name,
            effect=effect,
            idempotent=idempotent,
            reconcile=reconcile,
            retry=retry,
            timeout=timeout,
        )

    if fn is not None:
        return wrap(fn)
    return wrap


def unwrap_partial(
    fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """``ctx.call(functools.partial(f, *a, **k), *args, **kwargs)`` is
    ``ctx.call(f, *a, *args, **k, **kwargs)``: the frozen arguments are logged like others."""
    while isinstance(fn, functools.partial):
        args = (*fn.args, *args)
        kwargs = {**fn.keywords, **kwargs}
        fn = fn.func
    return fn, args, kwargs


def as_tool(fn: Any) -> Tool[Any, Any]:
    """``ctx.call`` accepts undeclared async functions: they are writes that escalate."""
    if isinstance(fn, Tool):
        return fn
    cached = getattr(fn, "__actorlog_tool__", None)
    if isinstance(cached, Tool):
        return cached
    t: Tool[Any, Any] = Tool(fn, name=None, effect="write", idempotent=False, reconcile=None)
    try:
        fn.__actorlog_tool__ = t
    except (AttributeError, TypeError):
        pass
    return t
