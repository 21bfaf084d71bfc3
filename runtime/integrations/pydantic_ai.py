"""Durable pydantic-ai agents: every model request and tool call journaled by actorlog.

::

    from pydantic_ai import Agent
    from actorlog import ActorSystem
    from actorlog.integrations.pydantic_ai import AgentActor, DurableAgent, IDEMPOTENT, READ

    agent = Agent("openai:gpt-5", name="travel")
    durable = DurableAgent(agent, tools={"search": READ, "book": IDEMPOTENT})

    async with ActorSystem("sqlite:///agents.db", actors=[AgentActor]) as system:
        result = await durable.run(system, "trip-42", "Plan my trip", message_id="trip-42/1")

A run is one message to an ``AgentActor`` with a stable id. Inside its step, each model
request goes through ``ctx.call`` as a read effect (the response is logged; replay returns
it and never asks the model again), and each tool call goes through ``ctx.call`` with the
tool's declared effect (read, idempotent write, reconcile, or, by default, escalate to an
operator when in doubt). The conversation's message history is the actor's state, so a
run killed anywhere resumes at the model request or tool call where it stopped.
See docs/pydantic-ai.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import attrs
from opentelemetry import trace
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.agent import AbstractAgent, EventStreamHandler
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse
from pydantic_ai.models import (
    KnownModelName,
    Model,
    ModelRequestParameters,
    StreamedResponse,
)
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_ai.usage import RunUsage
from pydantic_core import to_jsonable_python

from .._effects import tasks as _tasks
from .._effects.actor import Actor
from .._effects.context import Context
from .._effects.tools import Tool
from .._journal.errors import ConfigurationError
from .._runtime.system import ActorSystem
from ._effects import (
    _KEY,
    ESCALATE,
    IDEMPOTENT,
    READ,
    JournalingTools,
    ReconcileToolFn,
    ToolEffect,
    adapter_of,
    calling,
    check_stream_options,
    checked_options,
    idempotency_key,
    reconciled,
    shown,
    this_call,
)
from ._pai_fingerprint import CHAINED, RequestChain, fingerprint, tools_fingerprint
from ._pai_history import WarmHistories
from ._pai_stream import (
    DeltaForwarder,
    _dump_response,
    _load_response,
    can_stream,
    drain,
    streamed_request,
    whole_response,
)
from ._pai_tasks import _Identities
from ._replies import ChainCache, answers, check_call, check_run, reply_fields, result_of, whole

__all__ = [
    "AgentActor",
    "AgentState",
    "DurableAgent",
    "DurableRunResult",
    "ESCALATE",
    "IDEMPOTENT",
    "READ",
    "RunPrompt",
    "ToolEffect",
    "idempotency_key",
    "reconciled",
]

DepsT = TypeVar("DepsT")
OutputT = TypeVar("OutputT")

#: The log's tool name of a model request, and the prefix of a pydantic-ai tool's name.
MODEL_REQUEST = "pydantic_ai.model_request"
TOOL_PREFIX = "pydantic_ai.tool."

_MARK = "__pydantic_ai__"

# -- declaring what a tool does (shared with the other integrations: _effects) ------------

PydanticReconcileFn = ReconcileToolFn
_BY_NAME = {"read": READ, "idempotent": IDEMPOTENT, "escalate": ESCALATE}


# -- the actor ------------------------------------------------------------------------------


@attrs.define
class RunPrompt:
    """The message that runs a DurableAgent once (``DurableAgent.run`` / ``answer`` send it)."""

    agent: str
    prompt: str | None = None
    #: answers to deferred tool calls (human in the loop): tool_call_id -> result (JSON)
    deferred_results: dict[str, Any] | None = None
    #: decisions on tool calls that required approval: tool_call_id -> approved
    approvals: dict[str, bool] | None = None
    new_conversation: bool = False


@attrs.define
class AgentState:
    """The conversation so far: pydantic-ai messages as JSON (``ModelMessagesTypeAdapter``)."""

    messages: list[Any] = attrs.Factory(list)
    runs: int = 0
    #: the message seq of the run whose conversation ``messages`` is (0: none yet, or a
    #: state written before runs replied with their new messages only, FORMAT.md [F23])
    run_seq: int = 0
    #: where the chain of replies ``run_seq``'s reply belongs to starts (a message seq)
    origin: int = 0
    #: the chained fingerprint of the conversation's last model request ("": the next
    #: request starts the chain) and how many messages that request sent
    chain: str = ""
    chained: int = 0


_AGENTS: dict[str, DurableAgent[Any, Any]] = {}


class AgentActor(Actor[AgentState]):
    """Runs a registered DurableAgent; one actor per conversation (its stable id)."""

    async def receive(self, ctx: Context, msg: RunPrompt) -> dict[str, Any]:
        durable = _AGENTS.get(msg.agent)
        if durable is None:
            raise ConfigurationError(
                f"no DurableAgent named {msg.agent!r} in this process: create it (at import "
                "time, before the ActorSystem starts) so recovery can run it"
            )
        return await durable._step(ctx, self.state, msg)


# -- results --------------------------------------------------------------------------------


@attrs.frozen
class DurableRunResult(Generic[OutputT]):
    """What a durable run produced (the same after any crash)."""

    output: OutputT | DeferredToolRequests
    #: the whole conversation, this run included
    messages: list[ModelMessage]
    #: this run's messages
    new_messages: list[ModelMessage]
    usage: RunUsage

    @property
    def deferred(self) -> DeferredToolRequests | None:
        """The tool calls waiting for an answer (``DurableAgent.answer``), if the run stopped
        for them."""
        return self.output if isinstance(self.output, DeferredToolRequests) else None


# -- the agent wrapper ----------------------------------------------------------------------


class DurableAgent(Generic[DepsT, OutputT]):
    """A pydantic-ai ``Agent`` whose runs are actor steps journaled by actorlog.

    Create it once per process at import time (recovery on start looks it up by name), and
    register ``AgentActor`` with the ``ActorSystem``.

    Args:
        agent: the pydantic-ai agent; its model, tools, toolsets and output type are used.
        name: the name runs are logged under (default: ``agent.name``); keep it stable.
        tools: each tool's effect by tool name (``READ``, ``IDEMPOTENT``,
            ``reconciled(fn)``, ``ESCALATE``). A tool can also declare its own with
            ``metadata={"actorlog": "read" | "idempotent" | "escalate" | ToolEffect}``;
            undeclared tools get ``default_tool_effect``.
        default_tool_effect: ``ESCALATE`` unless said otherwise.
        model: the model to use instead of the agent's own.
        deps: the agent's dependencies (process-local: they are not logged).
        event_stream_handler: receives the run's events, the model's deltas live; see
            docs/pydantic-ai.md for what it is given after a resume.
        emit_deltas: also hand each model request's deltas to the step's callers with
            ``ctx.emit`` (plain dicts, docs/pydantic-ai.md); model requests are then
            streamed with or without a handler.
    """

    def __init__(
        self,
        agent: Agent[DepsT, OutputT],
        *,
        name: str | None = None,
        tools: Mapping[str, ToolEffect | str] | None = None,
        default_tool_effect: ToolEffect = ESCALATE,
        model: Model | str | None = None,
        deps: DepsT | None = None,
        event_stream_handler: EventStreamHandler[DepsT] | None = None,
        emit_deltas: bool = False,
    ) -> None:
        if not isinstance(agent, AbstractAgent):
            raise ConfigurationError(f"DurableAgent needs a pydantic_ai Agent, not {shown(agent)}")
        name = name or agent.name
        if not name:
            raise ConfigurationError("a DurableAgent needs a stable name: Agent(name=...)")
        tool_effects = checked_options(name, tools, default_tool_effect)
        if model is None and agent.model is None:
            raise ConfigurationError(f"agent {name!r} has no model: pass model=...")
        self.agent = agent
        self.name = name
        self.tools: dict[str, ToolEffect] = tool_effects
        self.default_tool_effect = default_tool_effect
        self.model = model
        self.deps = deps
        check_stream_options(event_stream_handler, emit_deltas)
        self.event_stream_handler = event_stream_handler
        self.emit_deltas = emit_deltas
        #: the journaling ``Tool`` of each tool, made once (``JournalingTools``)
        self._journaling = JournalingTools(TOOL_PREFIX, _settled)
        #: each conversation's messages as its last run in this process left them, and as
        #: the caller of its last run rebuilt it (from the chain of replies)
        self._histories, self._chains = WarmHistories(), ChainCache("messages")
        _AGENTS[name] = self

    # -- caller side -----------------------------------------------------------------------

    async def run(
        self,
        system: ActorSystem,
        actor_id: str,
        prompt: str,
        *,
        message_id: str | None = None,
        new_conversation: bool = False,
        timeout: float | None = None,
    ) -> DurableRunResult[OutputT]:
        """Run the agent on ``prompt`` in the conversation ``actor_id``.

        With ``message_id``, calling again after any crash returns the recorded result
        without running (or paying for) anything again.
        """
        check_run("prompt", prompt, new_conversation)
        msg = RunPrompt(self.name, prompt, new_conversation=new_conversation)
        return await self._ask(system, actor_id, msg, message_id, timeout)

    async def answer(
        self,
        system: ActorSystem,
        actor_id: str,
        results: Mapping[str, Any] | None = None,
        *,
        approvals: Mapping[str, bool] | None = None,
        message_id: str | None = None,
        timeout: float | None = None,
    ) -> DurableRunResult[OutputT]:
        """Continue a run that stopped for deferred tool calls (human in the loop):
        ``results`` maps the ``tool_call_id`` of each call that raised ``CallDeferred`` to
        its result (JSON-encodable); ``approvals`` maps each call that required approval to
        True (run it, journaled like any call) or False (deny it)."""
        plain, approved = answers(results, approvals, to_jsonable_python)
        msg = RunPrompt(self.name, None, deferred_results=plain, approvals=approved)
        return await self._ask(system, actor_id, msg, message_id, timeout)

    async def _ask(
        self,
        system: ActorSystem,
        actor_id: str,
        msg: RunPrompt,
        message_id: str | None,
        timeout: float | None,
    ) -> DurableRunResult[OutputT]:
        check_call(system, timeout)  # before anything is sent
        ref = await system.spawn(AgentActor, actor_id)
        reply = await ref.ask(msg, message_id=message_id, timeout=timeout)
        chains = self._chains
        plain = await whole(system.store, actor_id, reply, "messages", check=False, cache=chains)
        return self._result(reply, plain)

    async def result(
        self, system: ActorSystem, actor_id: str, reply: dict[str, Any]
    ) -> DurableRunResult[OutputT]:
        """The ``DurableRunResult`` of a run's reply (the dict ``AgentActor`` replies with,
        e.g. ``stream.reply`` of ``ref.ask_stream``), its whole conversation read from the
        chain of replies in ``system``'s store (docs/pydantic-ai.md, "What a run's reply
        holds"). Raises ``ConfigurationError`` for what is not a run's reply (or a reply
        of another conversation than ``actor_id``), ``CorruptEntryError`` for a damaged chain."""
        return await result_of(system, actor_id, reply, "messages", self._result)

    def _result(self, reply: dict[str, Any], plain: list[Any]) -> DurableRunResult[OutputT]:
        output: Any = reply["output"]
        if reply.get("deferred"):
            output = adapter_of(DeferredToolRequests).validate_python(output)
        else:
            spec: Any = self.agent.output_type
            try:
                output = adapter_of(spec).validate_python(output)
            except Exception:  # an output spec that is not a type: the JSON form
                pass
        messages = ModelMessagesTypeAdapter.validate_python(plain)
        return DurableRunResult(
            output=output,
            messages=messages,
            new_messages=messages[int(reply["new_from"]) :],
            usage=adapter_of(RunUsage).validate_python(reply["usage"]),
        )

    # -- actor side ------------------------------------------------------------------------

    def effect_of(self, tool_name: str, metadata: Mapping[str, Any] | None = None) -> ToolEffect:
        """The declared effect of a tool: from ``tools=``, else from the tool's own metadata
        (``@agent.tool_plain(metadata={"actorlog": "read" | "idempotent" | "escalate"})``),
        else ``default_tool_effect``."""
        if tool_name in self.tools:
            return self.tools[tool_name]
        declared = (metadata or {}).get("actorlog")
        if declared is None:
            return self.default_tool_effect
        if isinstance(declared, ToolEffect):
            return declared
        try:
            return _BY_NAME[declared]
        except (KeyError, TypeError):
            raise ConfigurationError(
                f"tool {shown(tool_name)}: metadata actorlog={shown(declared)} is not one of "
                f"{', '.join(sorted(_BY_NAME))} (or a ToolEffect)"
            ) from None

    async def _step(self, ctx: Context, state: AgentState, msg: RunPrompt) -> dict[str, Any]:
        history = [] if msg.new_conversation else state.messages
        run = self._histories.take(ctx.actor_id, history)
        messages = run.messages
        deferred = None
        if msg.deferred_results or msg.approvals:
            deferred = DeferredToolResults(
                calls=dict(msg.deferred_results or {}),
                approvals=dict(msg.approvals or {}),
            )
        base = self.model if self.model is not None else self.agent.model
        assert base is not None  # checked in __init__
        ids = _Identities(ctx)
        emit: Callable[[Any], None] | None = None
        if self.emit_deltas:
            emit = ctx.emit
        # the fingerprints chain on from the conversation's last request ([F23])
        chain = RequestChain(dump=run.dump)
        if history and state.chain and state.chained <= len(messages):
            chain = RequestChain(messages[: state.chained], state.chain, run.dump)
        model = _JournaledModel(base, ctx, self, ids, emit, chain)
        handler = self.event_stream_handler
        if handler is None and emit is not None:
            handler = drain  # streamed requests: pydantic-ai streams for a handler only
        toolsets: list[AbstractToolset[DepsT]] = [
            _JournaledToolset(ts, self, ctx, ids) for ts in self.agent.toolsets
        ]
        run_id = f"{ctx.actor_id}:{ctx.step_seq}"
        # A run recorded before parallel tool calls resumes as recorded: one tool call at a
        # time (pydantic-ai's 'sequential' mode); else in ``ids.outside()`` (_pai_tasks).
        mode: Any = "sequential" if ids.legacy else "parallel"
        with (
            ids.outside(),
            self.agent.override(tools=[], toolsets=toolsets),
            Agent.parallel_tool_call_execution_mode(mode),
        ):
            agent: Any = self.agent  # run()'s overloads are too many for mypy to check
            result = await agent.run(
                msg.prompt,
                message_history=messages or None,
                deferred_tool_results=deferred,
                model=model,
                deps=self.deps,
                run_id=run_id,
                conversation_id=ctx.actor_id,
                event_stream_handler=handler,
                infer_name=False,
            )
        all_messages = self._histories.put(ctx.actor_id, result.all_messages(), run)
        # the reply holds the run's new messages; the rest is in the chain of replies
        conversation, origin = reply_fields(
            "messages",
            history,
            all_messages,
            base=state.run_seq if history else 0,
            origin=state.origin,
            run_seq=ctx.step_seq,
            whole=model.whole_form,
        )
        state.messages = all_messages
        state.runs += 1
        state.run_seq, state.origin = ctx.step_seq, origin
        state.chain, state.chained = chain.last, len(chain.sent)
        usage = result.usage
        span = trace.get_current_span()
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        span.set_attribute("actorlog.pydantic_ai.agent", self.name)
        return {
            "output": to_jsonable_python(result.output),
            "deferred": isinstance(result.output, DeferredToolRequests),
            "new_from": len(messages),
            "usage": to_jsonable_python(usage),
            **conversation,
        }


# -- journaling: model requests -------------------------------------------------------------


#: Put the tools' fingerprint into each logged model request (since issue 18.22). False
#: logs what earlier versions did (model name and messages fingerprint only): for tests of
#: logs recorded by them.
_FINGERPRINT_TOOLS = True
#: Log each model request's chained fingerprint (since issue 25, [F23]). False logs the
#: whole request's, as versions before did: for tests of logs recorded by them.
_CHAIN_FINGERPRINTS = True


async def _model_request(model: str, request: str, tools: str | None = None) -> Any:
    """Each model request: the model's name and fingerprints of what it is asked (logged)."""
    return await this_call()(model, request, tools)


#: what each model request is journaled as (run inside ``calling(work)``)
_MODEL_REQUEST: Tool[Any, Any] = Tool(
    _model_request, name=MODEL_REQUEST, effect="read", idempotent=False, reconcile=None
)


class _JournaledModel(WrapperModel):
    """Each request is ``ctx.call`` of a read effect whose result is the ModelResponse."""

    def __init__(
        self,
        wrapped: Model | KnownModelName | str,
        ctx: Context,
        durable: DurableAgent[Any, Any],
        ids: _Identities,
        emit: Callable[[Any], None] | None = None,
        chain: RequestChain | None = None,
    ) -> None:
        super().__init__(wrapped)
        self._actor_ctx = ctx
        self._durable = durable
        self._ids = ids
        #: the chained fingerprints of the conversation's requests ([F23])
        self._chain = RequestChain() if chain is None else chain
        #: the last request was logged (or recorded) in the whole form, as before [F23]
        self.whole_form = False
        #: ``ctx.emit`` when the deltas go to the step's callers (``emit_deltas``)
        self._emit = emit
        #: streamed requests so far in this run (their number in the emitted dicts)
        self._requests = 0

    async def _journaled(
        self,
        messages: list[ModelMessage],
        params: ModelRequestParameters,
        call: Callable[[], Awaitable[ModelResponse]],
        node: _tasks.Node | None = None,
    ) -> ModelResponse:
        async def model_request(model: str, request: str, tools: str | None = None) -> Any:
            response = await call()
            span = trace.get_current_span()
            span.set_attribute("gen_ai.request.model", model)
            if response.model_name:
                span.set_attribute("gen_ai.response.model", response.model_name)
            span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
            return _dump_response(response)

        ctx = self._actor_ctx
        with _tasks._Set(self._ids.node() if node is None else node):
            recorded = ctx._next_recorded_args()
            chained = self._chain.next(messages)
            args: list[Any] = [self.wrapped.model_name, chained]
            if not (_CHAIN_FINGERPRINTS and _FINGERPRINT_TOOLS) or (
                recorded is not None
                and not (len(recorded) == 3 and str(recorded[1]).startswith(CHAINED))
            ):
                # A request logged before fingerprints were chained holds the whole
                # request's: it is checked as it was logged, and the next request starts
                # the chain again.
                args[1] = fingerprint(messages)
                self._chain.restart()
            self.whole_form = args[1] is not chained
            # A request logged by a version before the tools were fingerprinted holds two
            # arguments: it is checked as it was logged (against the messages only).
            if _FINGERPRINT_TOOLS and (recorded is None or len(recorded) != 2):
                args.append(tools_fingerprint(params, self._durable))
            with calling(model_request):
                plain = await ctx.call(_MODEL_REQUEST, *args)
        return _load_response(plain)

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        return await self._journaled(
            messages,
            model_request_parameters,
            lambda: self.wrapped.request(messages, model_settings, model_request_parameters),
        )

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        params = model_request_parameters
        self._requests += 1
        forward = None if self._emit is None else DeltaForwarder(self._emit, self._requests - 1)
        if not can_stream(self.wrapped):  # asked without streaming, handed on whole
            ran = False

            async def ask() -> ModelResponse:
                nonlocal ran
                ran = True
                return await self.wrapped.request(messages, model_settings, params)

            response = await self._journaled(messages, params, ask)
            yield whole_response(response, params, forward, replayed=not ran)
            return
        # The provider's events are handed on as they arrive, the response logged at the
        # end; a request served from the log is not streamed (_pai_stream).
        node = self._ids.node()  # numbered now, in the order the run asks (_Identities)

        def journal(call: Callable[[], Awaitable[ModelResponse]]) -> Awaitable[ModelResponse]:
            return self._journaled(messages, params, call, node)

        def open_stream() -> AbstractAsyncContextManager[StreamedResponse]:
            return self.wrapped.request_stream(messages, model_settings, params, run_context)

        stopped = self._actor_ctx._handler_cancelled
        async with streamed_request(journal, open_stream, params, forward, stopped) as stream:
            yield stream


# -- journaling: tool calls -----------------------------------------------------------------


def _settled(value: Any) -> dict[str, Any]:
    """A tool's result (or a reconcile function's ``Happened(result)``), as it is logged."""
    return {_MARK: "value", "value": to_jsonable_python(value)}


@dataclass
class _JournaledToolset(WrapperToolset[DepsT]):
    """Each tool call is ``ctx.call`` with the tool's declared effect."""

    durable: DurableAgent[DepsT, Any]
    actor_ctx: Context
    ids: _Identities

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[DepsT],
        tool: ToolsetTool[DepsT],
    ) -> Any:
        declared = self.durable.effect_of(name, tool.tool_def.metadata)
        wrapped = self.wrapped

        async def call(args: dict[str, Any], *, idempotency_key: str = "") -> Any:
            token = _KEY.set(idempotency_key or None)
            trace.get_current_span().set_attribute("actorlog.pydantic_ai.tool_name", name)
            try:
                value = await wrapped.call_tool(name, tool_args, ctx, tool)
            except ModelRetry as exc:
                return {_MARK: "retry", "message": exc.message}
            except CallDeferred as exc:
                return {_MARK: "deferred", "metadata": exc.metadata, "kind": exc.kind}
            except ApprovalRequired as exc:
                return {_MARK: "approval", "metadata": exc.metadata}
            finally:
                _KEY.reset(token)
            return _settled(value)

        t = self.durable._journaling.get(name, declared)
        with _tasks._Set(self.ids.node()), calling(call):
            plain = await self.actor_ctx.call(t, to_jsonable_python(tool_args))
        if not (isinstance(plain, dict) and _MARK in plain):
            return plain  # an operator resolved the call with a bare result
        kind = plain[_MARK]
        if kind == "retry":
            raise ModelRetry(str(plain["message"]))
        if kind == "deferred":
            raise CallDeferred(plain.get("metadata"), kind=plain.get("kind") or "external")
        if kind == "approval":
            raise ApprovalRequired(plain.get("metadata"))
        return plain["value"]
