"""Durable OpenAI Agents SDK runs: every model call and function tool call journaled.

::

    from agents import Agent, function_tool
    from actorlog import ActorSystem
    from actorlog.integrations.openai_agents import AgentActor, DurableAgent, IDEMPOTENT, READ

    agent = Agent(name="travel", instructions="...", tools=[search, book])
    durable = DurableAgent(agent, tools={"search": READ, "book": IDEMPOTENT})

    async with ActorSystem("sqlite:///agents.db", actors=[AgentActor]) as system:
        result = await durable.run(system, "trip-42", "Plan my trip", message_id="trip-42/1")

A run is one message to an ``AgentActor`` (one actor per conversation). Inside its step,
``Runner.run`` (or ``Runner.run_streamed``) runs on copies of the agents whose models and
function tools go through ``ctx.call``: each model call is a read effect whose response is
logged (replay returns it and never asks the model again), each function tool call has the
tool's declared effect (read, idempotent write, reconcile, or, by default, escalate to an
operator when in doubt). The conversation's items are the actor's state. See
docs/openai-agents.md.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

import anyio
import attrs
from agents import (
    Agent,
    ApplyPatchTool,
    ComputerTool,
    CustomTool,
    FunctionTool,
    Handoff,
    LocalShellTool,
    Model,
    MultiProvider,
    RunConfig,
    RunContextWrapper,
    Runner,
    ShellTool,
    StreamEvent,
    Usage,
)
from agents.tool import Tool as SdkTool
from agents.tool_context import ToolContext
from opentelemetry import trace
from pydantic_core import to_jsonable_python

from .._effects.actor import Actor
from .._effects.context import Context
from .._journal.errors import ConfigurationError
from .._runtime.system import ActorSystem
from ._effects import (
    _KEY,
    ESCALATE,
    IDEMPOTENT,
    READ,
    JournalingTools,
    ToolEffect,
    adapter_of,
    calling,
    checked_options,
    idempotency_key,
    reconciled,
    shown,
)
from ._openai_models import (
    MODEL_CALL,
    MODEL_STREAM,
    USAGE,
    CallChain,
    JournaledModel,
    JournaledProvider,
    fingerprint,
    model_name_of,
)
from ._replies import ChainCache, check_call, check_run, reply_fields, result_of, whole

__all__ = [
    "AgentActor",
    "AgentState",
    "DurableAgent",
    "DurableRunResult",
    "ESCALATE",
    "EventHandler",
    "IDEMPOTENT",
    "MODEL_CALL",
    "MODEL_STREAM",
    "READ",
    "RunInput",
    "StreamEvent",
    "TOOL_PREFIX",
    "fingerprint",
    "ToolEffect",
    "idempotency_key",
    "reconciled",
]

TContext = TypeVar("TContext")

#: The prefix of a function tool's name in the log.
TOOL_PREFIX = "openai_agents.tool."

#: Receives each event of a streamed run (``Runner.run_streamed``'s ``stream_events()``).
EventHandler = Callable[[StreamEvent], Awaitable[None]]

# -- the actor ------------------------------------------------------------------------------


@attrs.define
class RunInput:
    """The message that runs a DurableAgent once (``DurableAgent.run`` sends it)."""

    agent: str
    input: str
    new_conversation: bool = False


@attrs.define
class AgentState:
    """The conversation so far: the run's input items as JSON (``result.to_input_list()``)."""

    items: list[Any] = attrs.Factory(list)
    runs: int = 0
    #: the message seq of the run whose conversation ``items`` is (0: none yet, or a state
    #: written before runs replied with their new items only, FORMAT.md [F23])
    run_seq: int = 0
    #: where the chain of replies ``run_seq``'s reply belongs to starts (a message seq)
    origin: int = 0
    #: the chained fingerprint of the conversation's last model call ("": the next call
    #: starts the chain) and how many input items that call sent (FORMAT.md [F23])
    chain: str = ""
    chained: int = 0


_AGENTS: dict[str, DurableAgent[Any]] = {}


class AgentActor(Actor[AgentState]):
    """Runs a registered DurableAgent; one actor per conversation (its stable id)."""

    async def receive(self, ctx: Context, msg: RunInput) -> dict[str, Any]:
        durable = _AGENTS.get(msg.agent)
        if durable is None:
            raise ConfigurationError(
                f"no DurableAgent named {msg.agent!r} in this process: create it (at import "
                "time, before the ActorSystem starts) so recovery can run it"
            )
        return await durable._step(ctx, self.state, msg)


@attrs.frozen
class DurableRunResult:
    """What a durable run produced (the same after any crash)."""

    #: the run's final output: a string, or the JSON form of the last agent's output_type
    #: validated back into that type
    final_output: Any
    #: the whole conversation as input items in their JSON form (``RunResult.to_input_list()``),
    #: this run included
    items: list[dict[str, Any]]
    #: this run's items (the user's input and everything the run added)
    new_items: list[dict[str, Any]]
    #: the name of the agent that produced the output (after handoffs)
    last_agent: str
    usage: Usage


# -- the agent wrapper ----------------------------------------------------------------------


class DurableAgent(Generic[TContext]):
    """An OpenAI Agents SDK ``Agent`` whose runs are actor steps journaled by actorlog.

    Create it once per process at import time (recovery on start looks it up by name), and
    register ``AgentActor`` with the ``ActorSystem``.

    Args:
        agent: the starting agent; its handoffs (and theirs) are made durable too.
        name: the name runs are logged under (default: ``agent.name``); keep it stable.
        tools: each function tool's effect by tool name (``READ``, ``IDEMPOTENT``,
            ``reconciled(fn)``, ``ESCALATE``, or the names ``"read"``, ``"idempotent"``,
            ``"escalate"``); undeclared tools get ``default_tool_effect``.
        default_tool_effect: ``ESCALATE`` unless said otherwise.
        run_config: the SDK's ``RunConfig`` for every run (model, model provider, settings,
            guardrails, tracing); its models are journaled like the agents' own.
        context: the run context object (process-local: it is not logged).
        max_turns: passed to the runner.
        event_handler: when given, runs are streamed (``Runner.run_streamed``) and each
            stream event is passed to it; see docs/openai-agents.md for what it sees after
            a resume.
        sequential_tools: run the function tool calls of one model turn one after another
            (in the order of the response) instead of concurrently as the SDK does; both
            are durable (docs/openai-agents.md, "Tool calls in one turn").
    """

    def __init__(
        self,
        agent: Agent[TContext],
        *,
        name: str | None = None,
        tools: Mapping[str, ToolEffect | str] | None = None,
        default_tool_effect: ToolEffect = ESCALATE,
        run_config: RunConfig | None = None,
        context: TContext | None = None,
        max_turns: int = 10,
        event_handler: EventHandler | None = None,
        sequential_tools: bool = False,
    ) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"DurableAgent needs an agents.Agent, not {shown(agent)}")
        name = agent.name if name is None else name
        self.tools = checked_options(name, tools, default_tool_effect)
        if run_config is not None and not isinstance(run_config, RunConfig):
            raise ConfigurationError(f"run_config must be an agents.RunConfig: {shown(run_config)}")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigurationError(f"max_turns must be an int >= 1, not {shown(max_turns)}")
        if not isinstance(sequential_tools, bool):
            raise ConfigurationError(f"sequential_tools must be a bool: {shown(sequential_tools)}")
        if event_handler is not None and not callable(event_handler):
            raise ConfigurationError(
                f"event_handler must be an async function: {shown(event_handler)}"
            )
        for reachable in _agents(agent):
            for t in reachable.tools:
                _check_tool(reachable, t)
        self.agent = agent
        self.name = name
        self.default_tool_effect = default_tool_effect
        self.run_config = run_config or RunConfig()
        self.context = context
        self.max_turns = max_turns
        self.event_handler = event_handler
        self.sequential_tools = sequential_tools
        #: the journaling ``Tool`` of each function tool, made once (``JournalingTools``)
        self._journaling = JournalingTools(TOOL_PREFIX, _settled)
        #: each conversation as its last run's caller in this process rebuilt it
        self._chains = ChainCache("items")
        _AGENTS[name] = self

    def effect_of(self, tool_name: str) -> ToolEffect:
        """The declared effect of a function tool: from ``tools=``, else
        ``default_tool_effect``."""
        return self.tools.get(tool_name, self.default_tool_effect)

    # -- caller side -----------------------------------------------------------------------

    async def run(
        self,
        system: ActorSystem,
        actor_id: str,
        input: str,
        *,
        message_id: str | None = None,
        new_conversation: bool = False,
        timeout: float | None = None,
    ) -> DurableRunResult:
        """Run the agent on the user message ``input`` in the conversation ``actor_id``.

        With ``message_id``, calling again after any crash returns the recorded result
        without running (or paying for) anything again.

        Raises:
            ConfigurationError: ``input`` is not a string (nothing is sent).
            HandlerError: the run failed (a model error, ``MaxTurnsExceeded``, a guardrail
                tripwire, a tool that raised); the conversation is as it was before.
        """
        check_run("input", input, new_conversation)
        check_call(system, timeout)
        ref = await system.spawn(AgentActor, actor_id)
        msg = RunInput(self.name, input, new_conversation=new_conversation)
        reply = await ref.ask(msg, message_id=message_id, timeout=timeout)
        plain = await whole(system.store, actor_id, reply, "items", check=False, cache=self._chains)
        return self._result(reply, plain)

    async def result(
        self, system: ActorSystem, actor_id: str, reply: dict[str, Any]
    ) -> DurableRunResult:
        """The ``DurableRunResult`` of a run's reply (the dict ``AgentActor`` replies with),
        its whole conversation read from the chain of replies in ``system``'s store
        (docs/openai-agents.md, "What a run's reply holds").

        Raises:
            ConfigurationError: ``system``, ``actor_id`` or ``reply`` is not one, or
                ``reply`` continues runs ``actor_id``'s log does not hold (another
                conversation's reply).
            CorruptEntryError: a reply of the chain is damaged, or its start is in neither
                the log nor a snapshot.
        """
        return await result_of(system, actor_id, reply, "items", self._result)

    def _result(self, reply: dict[str, Any], items: list[Any]) -> DurableRunResult:
        output: Any = reply["output"]
        spec = _find_agent(self.agent, reply["last_agent"])
        out_type = getattr(spec, "output_type", None)
        if out_type is not None and out_type is not str and output is not None:
            try:
                output = adapter_of(out_type).validate_python(output)
            except Exception:  # an output spec that is not a type: the JSON form
                pass
        return DurableRunResult(
            final_output=output,
            items=items,
            new_items=items[int(reply["new_from"]) :],
            last_agent=str(reply["last_agent"]),
            usage=USAGE.validate_python(reply["usage"]),
        )

    # -- actor side ------------------------------------------------------------------------

    async def _step(self, ctx: Context, state: AgentState, msg: RunInput) -> dict[str, Any]:
        history: list[Any] = [] if msg.new_conversation else list(state.items)
        items: list[Any] = [*history, {"role": "user", "content": msg.input}]
        # the fingerprints chain on from the conversation's last model call ([F23])
        chain = CallChain()
        if history and state.chain and state.chained <= len(history):
            chain = CallChain(history[: state.chained], state.chain)
        run = _Run(ctx, self, chain)
        rc = self.run_config
        model = rc.model
        run_config = dataclasses.replace(
            rc,
            model=JournaledModel(model, ctx, self.effect_of, model_name_of(model), chain)
            if isinstance(model, Model)
            else model,
            model_provider=JournaledProvider(
                rc.model_provider or MultiProvider(), ctx, self.effect_of, chain
            ),
        )
        start = run.convert(self.agent)
        if self.event_handler is None:
            result: Any = await Runner.run(
                start, items, context=self.context, max_turns=self.max_turns, run_config=run_config
            )
        else:
            streamed = Runner.run_streamed(
                start, items, context=self.context, max_turns=self.max_turns, run_config=run_config
            )
            async for event in streamed.stream_events():
                await self.event_handler(event)
            result = streamed
        all_items = to_jsonable_python(result.to_input_list(), fallback=str)
        usage = result.context_wrapper.usage
        # the reply holds the run's new items; the rest is in the chain of replies ([F23])
        conversation, origin = reply_fields(
            "items",
            history,
            all_items,
            base=state.run_seq if history else 0,
            origin=state.origin,
            run_seq=ctx.step_seq,
        )
        state.items = all_items
        state.runs += 1
        state.run_seq, state.origin = ctx.step_seq, origin
        state.chain, state.chained = chain.last, len(chain.sent)
        last = result.last_agent
        span = trace.get_current_span()
        span.set_attribute("actorlog.openai_agents.agent", self.name)
        span.set_attribute("actorlog.openai_agents.last_agent", last.name)
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        return {
            "output": to_jsonable_python(result.final_output, fallback=str),
            "new_from": len(history),
            "last_agent": last.name,
            "usage": USAGE.dump_python(usage, mode="json"),
            **conversation,
        }


def _agents(start: Agent[Any]) -> list[Agent[Any]]:
    """``start`` and the agents its handoffs name directly (``Handoff`` objects name theirs
    only when they are invoked)."""
    seen: dict[int, Agent[Any]] = {}
    todo: list[Agent[Any]] = [start]
    while todo:
        agent = todo.pop()
        if id(agent) not in seen:
            seen[id(agent)] = agent
            todo.extend(h for h in agent.handoffs if isinstance(h, Agent))
    return list(seen.values())


def _find_agent(start: Agent[Any], name: str) -> Agent[Any] | None:
    return next((a for a in _agents(start) if a.name == name), None)


#: Tools the SDK runs in this process without a function actorlog can journal.
_LOCAL_TOOLS = (ComputerTool, LocalShellTool, ApplyPatchTool, CustomTool)


def _check_tool(agent: Agent[Any], t: Any) -> None:
    """Refuse a tool that runs here but cannot be journaled (it would run again on replay).

    Raises:
        ConfigurationError: a computer, local shell, apply-patch or custom tool, or a shell
            tool with a local executor.
    """
    if isinstance(t, _LOCAL_TOOLS) or (isinstance(t, ShellTool) and t.executor is not None):
        raise ConfigurationError(
            f"agent {agent.name!r} has a {type(t).__name__} ({getattr(t, 'name', '')!r}): "
            "DurableAgent journals function tools only, and this tool would run again on "
            "every replay; wrap what it does in a function tool"
        )


# -- one run: the journaled copies of its agents, models and tools -------------------------


class _Run:
    """The copies of one run's agents (memoized: a handoff back to an agent gets the same
    copy), and the lock that makes its tool calls run one after another when the agent
    asks for that (``sequential_tools``)."""

    def __init__(self, ctx: Context, durable: DurableAgent[Any], chain: CallChain) -> None:
        self.ctx = ctx
        self.durable = durable
        #: the chained fingerprints of the conversation's model calls
        self.chain = chain
        self.lock = anyio.Lock()
        self._agents: dict[int, Agent[Any]] = {}
        self._tools: dict[int, SdkTool] = {}

    def convert(self, agent: Agent[Any]) -> Agent[Any]:
        done = self._agents.get(id(agent))
        if done is not None:
            return done
        changes: dict[str, Any] = {}
        if isinstance(agent.model, Model):
            changes["model"] = JournaledModel(
                agent.model,
                self.ctx,
                self.durable.effect_of,
                model_name_of(agent.model),
                self.chain,
            )
            changes["model_settings"] = agent.model_settings
        clone = agent.clone(**changes)
        self._agents[id(agent)] = clone
        self._agents[id(clone)] = clone
        clone.handoffs = [self._handoff(h) for h in agent.handoffs]
        original_tools = clone.get_all_tools

        async def get_all_tools(run_context: RunContextWrapper[Any]) -> list[SdkTool]:
            tools = await original_tools(run_context)
            for t in tools:
                _check_tool(agent, t)
            return [self._tool(t) for t in tools]

        # the runner asks each agent for its tools every turn (MCP servers' included)
        object.__setattr__(clone, "get_all_tools", get_all_tools)
        try:  # results and hooks show the user's agent, not the copy
            from agents._public_agent import set_public_agent

            set_public_agent(clone, agent)
        except ImportError:  # pragma: no cover - a later SDK without it
            pass
        return clone

    def _handoff(self, h: Agent[Any] | Handoff[Any, Any]) -> Any:
        if isinstance(h, Agent):
            return self.convert(h)
        invoke = h.on_invoke_handoff

        async def on_invoke_handoff(run_context: RunContextWrapper[Any], args: str) -> Any:
            return self.convert(await invoke(run_context, args))

        wrapped = copy.copy(h)
        wrapped.on_invoke_handoff = on_invoke_handoff
        return wrapped

    def _tool(self, t: SdkTool) -> SdkTool:
        if not isinstance(t, FunctionTool):
            return t  # hosted tools run inside the model call, which is journaled
        done = self._tools.get(id(t))
        if done is None:
            done = copy.copy(t)
            done.on_invoke_tool = _journaled_tool(t, self)
            self._tools[id(t)] = done
            self._tools[id(done)] = done
        return done


def _settled(result: Any) -> Any:
    """A reconcile function's ``Happened(result)``, as a call's result is logged."""
    return to_jsonable_python(result, fallback=str)


def _journaled_tool(
    t: FunctionTool, run: _Run
) -> Callable[[ToolContext[Any], str], Awaitable[Any]]:
    """``on_invoke_tool`` of the copy: ``ctx.call`` with the tool's declared effect."""
    tool = run.durable._journaling.get(t.name, run.durable.effect_of(t.name))
    invoke = t.on_invoke_tool

    async def on_invoke_tool(tool_ctx: ToolContext[Any], input_json: str) -> Any:
        async def call(args: Any, *, idempotency_key: str = "") -> Any:
            token = _KEY.set(idempotency_key or None)
            trace.get_current_span().set_attribute("actorlog.openai_agents.tool_name", t.name)
            try:
                value = await invoke(tool_ctx, input_json)
            finally:
                _KEY.reset(token)
            return _settled(value)

        try:
            args: Any = json.loads(input_json) if input_json else {}
        except ValueError:
            args = input_json  # logged as the model wrote it
        if not run.durable.sequential_tools:
            # concurrent, as the SDK runs them: each tool call runs in a task the SDK
            # started, and actorlog identifies its effects by that task (FORMAT.md [F18])
            with calling(call):
                return await run.ctx.call(tool, args)
        # The SDK starts a turn's tool calls as concurrent tasks: they take the lock in the
        # order they were started (the order of the calls in the model's response).
        async with run.lock:
            with calling(call):
                return await run.ctx.call(tool, args)

    return on_invoke_tool
