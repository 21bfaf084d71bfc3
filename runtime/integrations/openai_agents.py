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
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

import anyio
import attrs
import pydantic
from agents import (
    Agent,
    FunctionTool,
    Handoff,
    Model,
    ModelProvider,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    MultiProvider,
    RunConfig,
    RunContextWrapper,
    Runner,
    StreamEvent,
    TResponseInputItem,
    Usage,
)
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseOutputItem, TResponseStreamEvent
from agents.tool import Tool as SdkTool
from agents.tool_context import ToolContext
from openai.types.responses.response_prompt_param import ResponsePromptParam
from opentelemetry import trace
from pydantic_core import to_jsonable_python

from .._actor import Actor
from .._context import Context
from .._errors import ConfigurationError
from .._system import ActorSystem
from .._tools import Happened, Tool
from ._effects import (
    _KEY,
    ESCALATE,
    IDEMPOTENT,
    READ,
    ToolEffect,
    effect_by_name,
    idempotency_key,
    reconciled,
)

__all__ = [
    "AgentActor",
    "AgentState",
    "DurableAgent",
    "DurableRunResult",
    "ESCALATE",
    "EventHandler",
    "IDEMPOTENT",
    "MODEL_CALL",
    "READ",
    "RunInput",
    "StreamEvent",
    "TOOL_PREFIX",
    "ToolEffect",
    "idempotency_key",
    "reconciled",
]

TContext = TypeVar("TContext")

#: The log's tool name of a model call (``get_response``) and of a streamed model call
#: (``stream_response``), and the prefix of a function tool's name.
MODEL_CALL = "openai_agents.model_call"
MODEL_STREAM = "openai_agents.model_stream"
TOOL_PREFIX = "openai_agents.tool."

#: Receives each event of a streamed run (``Runner.run_streamed``'s ``stream_events()``).
EventHandler = Callable[[StreamEvent], Awaitable[None]]

_OUTPUT_ITEMS: pydantic.TypeAdapter[list[TResponseOutputItem]] = pydantic.TypeAdapter(
    list[TResponseOutputItem]
)
_STREAM_EVENTS: pydantic.TypeAdapter[list[TResponseStreamEvent]] = pydantic.TypeAdapter(
    list[TResponseStreamEvent]
)
_USAGE: pydantic.TypeAdapter[Usage] = pydantic.TypeAdapter(Usage)


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
    ) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"DurableAgent needs an agents.Agent, not {agent!r}")
        name = agent.name if name is None else name
        if not isinstance(name, str) or not name or len(name) > 200:
            raise ConfigurationError(
                f"a DurableAgent needs a stable name (1 to 200 characters), not {name!r}"
            )
        if tools is not None and not isinstance(tools, Mapping):
            raise ConfigurationError(f"tools must be a mapping of tool name -> effect: {tools!r}")
        self.tools = {str(k): effect_by_name(str(k), v) for k, v in (tools or {}).items()}
        if not isinstance(default_tool_effect, ToolEffect):
            raise ConfigurationError(
                f"default_tool_effect must be a ToolEffect (READ, IDEMPOTENT, ESCALATE, "
                f"reconciled(fn)), not {default_tool_effect!r}"
            )
        if run_config is not None and not isinstance(run_config, RunConfig):
            raise ConfigurationError(f"run_config must be an agents.RunConfig: {run_config!r}")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigurationError(f"max_turns must be an int >= 1, not {max_turns!r}")
        if event_handler is not None and not callable(event_handler):
            raise ConfigurationError(f"event_handler must be an async function: {event_handler!r}")
        self.agent = agent
        self.name = name
        self.default_tool_effect = default_tool_effect
        self.run_config = run_config or RunConfig()
        self.context = context
        self.max_turns = max_turns
        self.event_handler = event_handler
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
        if not isinstance(input, str):
            raise ConfigurationError(f"input must be the user's message as a str: {input!r}")
        if not isinstance(new_conversation, bool):
            raise ConfigurationError(f"new_conversation must be a bool: {new_conversation!r}")
        ref = await system.spawn(AgentActor, actor_id)
        msg = RunInput(self.name, input, new_conversation=new_conversation)
        reply = await ref.ask(msg, message_id=message_id, timeout=timeout)
        return self._result(reply)

    def _result(self, reply: dict[str, Any]) -> DurableRunResult:
        output: Any = reply["output"]
        spec = _find_agent(self.agent, reply["last_agent"])
        out_type = getattr(spec, "output_type", None)
        if out_type is not None and out_type is not str and output is not None:
            try:
                output = pydantic.TypeAdapter(out_type).validate_python(output)
            except Exception:  # an output spec that is not a type: the JSON form
                pass
        items: list[Any] = list(reply["items"])
        return DurableRunResult(
            final_output=output,
            items=items,
            new_items=items[int(reply["new_from"]) :],
            last_agent=str(reply["last_agent"]),
            usage=_USAGE.validate_python(reply["usage"]),
        )

    # -- actor side ------------------------------------------------------------------------

    async def _step(self, ctx: Context, state: AgentState, msg: RunInput) -> dict[str, Any]:
        history: list[Any] = [] if msg.new_conversation else list(state.items)
        items: list[Any] = [*history, {"role": "user", "content": msg.input}]
        run = _Run(ctx, self)
        rc = self.run_config
        model = rc.model
        run_config = dataclasses.replace(
            rc,
            model=_JournaledModel(model, run, _model_name(model))
            if isinstance(model, Model)
            else model,
            model_provider=_JournaledProvider(rc.model_provider or MultiProvider(), run),
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
        state.items = all_items
        state.runs += 1
        last = result.last_agent
        span = trace.get_current_span()
        span.set_attribute("actorlog.openai_agents.agent", self.name)
        span.set_attribute("actorlog.openai_agents.last_agent", last.name)
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        return {
            "output": to_jsonable_python(result.final_output, fallback=str),
            "items": all_items,
            "new_from": len(history),
            "last_agent": last.name,
            "usage": _USAGE.dump_python(usage, mode="json"),
        }


def _find_agent(start: Agent[Any], name: str) -> Agent[Any] | None:
    """The agent named ``name`` among ``start`` and the agents its handoffs name directly."""
    seen: set[int] = set()
    todo: list[Agent[Any]] = [start]
    while todo:
        agent = todo.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        if agent.name == name:
            return agent
        todo.extend(h for h in agent.handoffs if isinstance(h, Agent))
    return None


# -- one run: the journaled copies of its agents, models and tools -------------------------


class _Run:
    """The copies of one run's agents (memoized: a handoff back to an agent gets the same
    copy), and the lock that makes its tool calls run one after another."""

    def __init__(self, ctx: Context, durable: DurableAgent[Any]) -> None:
        self.ctx = ctx
        self.durable = durable
        self.lock = anyio.Lock()
        self._agents: dict[int, Agent[Any]] = {}
        self._tools: dict[int, SdkTool] = {}

    def convert(self, agent: Agent[Any]) -> Agent[Any]:
        done = self._agents.get(id(agent))
        if done is not None:
            return done
        changes: dict[str, Any] = {}
        if isinstance(agent.model, Model):
            changes["model"] = _JournaledModel(agent.model, self, _model_name(agent.model))
            changes["model_settings"] = agent.model_settings
        clone = agent.clone(**changes)
        self._agents[id(agent)] = clone
        self._agents[id(clone)] = clone
        clone.handoffs = [self._handoff(h) for h in agent.handoffs]
        original_tools = clone.get_all_tools

        async def get_all_tools(run_context: RunContextWrapper[Any]) -> list[SdkTool]:
            return [self._tool(t) for t in await original_tools(run_context)]

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


def _journaled_tool(
    t: FunctionTool, run: _Run
) -> Callable[[ToolContext[Any], str], Awaitable[Any]]:
    """``on_invoke_tool`` of the copy: ``ctx.call`` with the tool's declared effect."""
    declared = run.durable.effect_of(t.name)
    invoke = t.on_invoke_tool

    async def on_invoke_tool(tool_ctx: ToolContext[Any], input_json: str) -> Any:
        async def call(args: Any, *, idempotency_key: str = "") -> Any:
            token = _KEY.set(idempotency_key or None)
            trace.get_current_span().set_attribute("actorlog.openai_agents.tool_name", t.name)
            try:
                value = await invoke(tool_ctx, input_json)
            finally:
                _KEY.reset(token)
            return to_jsonable_python(value, fallback=str)

        reconcile = None
        if declared.reconcile is not None:
            user_fn = declared.reconcile

            async def reconcile(key: str, arguments: dict[str, Any]) -> Any:
                args = arguments.get("args")
                answer = await user_fn(key, args if isinstance(args, dict) else {})
                if isinstance(answer, Happened):
                    return Happened(to_jsonable_python(answer.result, fallback=str))
                return answer

        tool = Tool(
            call,
            name=TOOL_PREFIX + t.name,
            effect=declared.effect,
            idempotent=declared.idempotent,
            reconcile=reconcile,
        )
        try:
            args: Any = json.loads(input_json) if input_json else {}
        except ValueError:
            args = input_json  # logged as the model wrote it
        # The SDK starts a turn's tool calls as concurrent tasks: they take the lock in the
        # order they were started (the order of the calls in the model's response), so the
        # log holds them in the same order on every replay.
        async with run.lock:
            return await run.ctx.call(tool, args)

    return on_invoke_tool


# -- journaling: model calls ----------------------------------------------------------------


def _model_name(model: Model | str | None) -> str:
    if isinstance(model, str):
        return model
    if model is None:
        return "default"
    return str(getattr(model, "model", None) or type(model).__name__)


def fingerprint(
    system_instructions: str | None,
    input: str | list[TResponseInputItem],
    model_settings: ModelSettings,
    tools: list[SdkTool],
    output_schema: AgentOutputSchemaBase | None,
    handoffs: list[Handoff[Any, Any]],
    durable: DurableAgent[Any] | None = None,
) -> str:
    """What a model call asks: the instructions, the input items, the settings, every tool
    (name, description, parameter schema and, for function tools, the declared effect), the
    handoffs and the output schema. Replay checks that the run asks the same thing the log
    recorded at that position."""

    def tool(t: SdkTool) -> Any:
        if isinstance(t, FunctionTool):
            e = durable.effect_of(t.name) if durable is not None else None
            return {
                "name": t.name,
                "description": t.description,
                "parameters": t.params_json_schema,
                "strict": t.strict_json_schema,
                "actorlog": None
                if e is None
                else {
                    "effect": e.effect,
                    "idempotent": e.idempotent,
                    "reconcile": bool(e.reconcile),
                },
            }
        return {"type": type(t).__name__, "name": getattr(t, "name", None)}

    plain = {
        "instructions": system_instructions,
        "input": to_jsonable_python(input, fallback=str),
        "settings": model_settings.to_json_dict(),
        "tools": [tool(t) for t in tools],
        "handoffs": [
            {"name": h.tool_name, "description": h.tool_description, "schema": h.input_json_schema}
            for h in handoffs
        ],
        "output": None
        if output_schema is None
        else {
            "plain": output_schema.is_plain_text(),
            "schema": None if output_schema.is_plain_text() else output_schema.json_schema(),
        },
    }
    blob = json.dumps(plain, sort_keys=True, separators=(",", ":"), default=repr).encode()
    return hashlib.sha256(blob).hexdigest()


def _dump_response(response: ModelResponse) -> dict[str, Any]:
    return {
        "output": _OUTPUT_ITEMS.dump_python(list(response.output), mode="json"),
        "usage": _USAGE.dump_python(response.usage, mode="json"),
        "response_id": response.response_id,
        "request_id": response.request_id,
    }


def _load_response(plain: Any) -> ModelResponse:
    if not isinstance(plain, dict) or "output" not in plain:
        raise ConfigurationError(f"the log holds {type(plain).__name__} for a model response")
    return ModelResponse(
        output=_OUTPUT_ITEMS.validate_python(plain["output"]),
        usage=_USAGE.validate_python(plain["usage"]),
        response_id=plain.get("response_id"),
        request_id=plain.get("request_id"),
    )


class _JournaledProvider(ModelProvider):
    """Wraps each model the run's provider looks up by name."""

    def __init__(self, wrapped: ModelProvider, run: _Run) -> None:
        self.wrapped = wrapped
        self.run = run

    def get_model(self, model_name: str | None) -> Model:
        return _JournaledModel(
            self.wrapped.get_model(model_name), self.run, _model_name(model_name)
        )


class _JournaledModel(Model):
    """Each call is ``ctx.call`` of a read effect whose result is the logged response."""

    def __init__(self, wrapped: Model, run: _Run, name: str) -> None:
        self.wrapped = wrapped
        self.run = run
        self.name = name

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[SdkTool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        async def model_call(model: str, request: str) -> Any:
            response = await self.wrapped.get_response(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
            _usage_attributes(model, response.usage)
            return _dump_response(response)

        t = Tool(model_call, name=MODEL_CALL, effect="read", idempotent=False, reconcile=None)
        key = fingerprint(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            self.run.durable,
        )
        return _load_response(await self.run.ctx.call(t, self.name, key))

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[SdkTool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        # The stream is read to its end inside the journaled call and logged whole; the
        # runner then gets the logged events, live and on replay alike.
        async def model_stream(model: str, request: str) -> Any:
            events: list[TResponseStreamEvent] = []
            stream = self.wrapped.stream_response(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
            async for event in stream:
                events.append(event)
            span = trace.get_current_span()
            span.set_attribute("actorlog.openai_agents.stream_events", len(events))
            for event in events:
                if event.type == "response.completed":
                    usage = event.response.usage
                    if usage is not None:
                        _usage_attributes(
                            model,
                            Usage(
                                requests=1,
                                input_tokens=usage.input_tokens,
                                output_tokens=usage.output_tokens,
                            ),
                        )
            return _STREAM_EVENTS.dump_python(events, mode="json")

        t = Tool(model_stream, name=MODEL_STREAM, effect="read", idempotent=False, reconcile=None)
        key = fingerprint(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            self.run.durable,
        )
        plain = await self.run.ctx.call(t, self.name, key)
        for event in _STREAM_EVENTS.validate_python(plain):
            yield event


def _usage_attributes(model: str, usage: Usage) -> None:
    span = trace.get_current_span()
    span.set_attribute("gen_ai.request.model", model)
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
