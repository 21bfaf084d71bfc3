"""Journaling the model calls of an OpenAI Agents SDK run (``openai_agents``'s half that
talks to models): each ``get_response`` / ``stream_response`` is a ``ctx.call`` of a read
effect, checked against the log by a fingerprint of the request."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pydantic
from agents import (
    FunctionTool,
    Handoff,
    Model,
    ModelProvider,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    TResponseInputItem,
    Usage,
)
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseOutputItem, TResponseStreamEvent
from agents.tool import Tool as SdkTool
from openai.types.responses.response_prompt_param import ResponsePromptParam
from opentelemetry import trace
from pydantic_core import to_jsonable_python

from .._effects.context import Context
from .._effects.tools import Tool
from .._journal.errors import ConfigurationError
from ._effects import ToolEffect, calling, this_call

__all__ = [
    "CHAINED",
    "MODEL_CALL",
    "MODEL_STREAM",
    "USAGE",
    "CallChain",
    "JournaledModel",
    "JournaledProvider",
    "fingerprint",
    "model_name_of",
]

#: The log's tool name of a model call (``get_response``) and of a streamed model call
#: (``stream_response``).
MODEL_CALL = "openai_agents.model_call"
MODEL_STREAM = "openai_agents.model_stream"

_OUTPUT_ITEMS: pydantic.TypeAdapter[list[TResponseOutputItem]] = pydantic.TypeAdapter(
    list[TResponseOutputItem]
)
_STREAM_EVENTS: pydantic.TypeAdapter[list[TResponseStreamEvent]] = pydantic.TypeAdapter(
    list[TResponseStreamEvent]
)
USAGE: pydantic.TypeAdapter[Usage] = pydantic.TypeAdapter(Usage)
#: Log each model call's chained fingerprint (since issue 25, [F23]). False logs the whole
#: request's, as versions before did: for tests of logs recorded by them.
_CHAIN_FINGERPRINTS = True


async def _model_call(model: str, request: str) -> Any:
    """Each model call: the model's name and a fingerprint of what it is asked (logged)."""
    return await this_call()(model, request)


#: what each model call is journaled as (run inside ``calling(work)``)
_MODEL_CALL: Tool[Any, Any] = Tool(
    _model_call, name=MODEL_CALL, effect="read", idempotent=False, reconcile=None
)
_MODEL_STREAM: Tool[Any, Any] = Tool(
    _model_call, name=MODEL_STREAM, effect="read", idempotent=False, reconcile=None
)


def model_name_of(model: Model | str | None) -> str:
    if isinstance(model, str):
        return model
    if model is None:
        return "default"
    return str(getattr(model, "model", None) or type(model).__name__)


def _request_plain(
    system_instructions: str | None,
    input: Any,
    model_settings: ModelSettings,
    tools: list[SdkTool],
    output_schema: AgentOutputSchemaBase | None,
    handoffs: list[Handoff[Any, Any]],
    effect_of: Callable[[str], ToolEffect] | None,
) -> bytes:
    """The JSON a fingerprint hashes: the request with ``input`` (all its items, or the
    new ones only) in sorted compact JSON."""

    def tool(t: SdkTool) -> Any:
        if isinstance(t, FunctionTool):
            e = effect_of(t.name) if effect_of is not None else None
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
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), default=repr).encode()


def fingerprint(
    system_instructions: str | None,
    input: str | list[TResponseInputItem],
    model_settings: ModelSettings,
    tools: list[SdkTool],
    output_schema: AgentOutputSchemaBase | None,
    handoffs: list[Handoff[Any, Any]],
    effect_of: Callable[[str], ToolEffect] | None = None,
) -> str:
    """What a model call asks, whole (the form logged before issue 25, FORMAT.md [F23]): the
    instructions, the input items, the settings, every tool (name, description, parameter
    schema and, for function tools, the declared effect), the handoffs and the output
    schema. Replay checks that the run asks the same thing the log recorded at that
    position. Logs hold these hexes, so their computation never changes."""
    blob = _request_plain(
        system_instructions, input, model_settings, tools, output_schema, handoffs, effect_of
    )
    return hashlib.sha256(blob).hexdigest()


#: the prefix of a chained fingerprint (FORMAT.md [F23]); a whole request's has none
CHAINED = "c:"


class CallChain:
    """The chained fingerprints of a conversation's model calls, across its runs ([F23]).

    A call continues the chain when its input items start with items equal to all those the
    chain's previous call sent; its fingerprint then covers the request with only the items
    after them, hashed after the previous call's fingerprint. Any other call (the first of a
    conversation, a string input, an input filter that rewrote an earlier item, the call
    after one logged in the whole form) starts the chain again: its fingerprint covers all
    its items. Both depend on what the run sends, not on timing, so a replay computes the
    same fingerprints; an earlier item that changed makes the chain start again, and that
    call's fingerprint differ from the recorded one.
    """

    def __init__(self, sent: list[Any] | None = None, last: str = "") -> None:
        #: the input items the chain's last call sent (a list of its own)
        self.sent: list[Any] = list(sent or [])
        #: that call's chained fingerprint ("": none, the next call starts the chain)
        self.last = last

    def next(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[SdkTool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        effect_of: Callable[[str], ToolEffect] | None = None,
    ) -> str:
        """The chained fingerprint of a call (and it becomes the chain's last)."""
        previous, new, items = "", input, []
        if not isinstance(input, str):
            items = list(input)
            sent = self.sent
            n = len(sent)
            if (
                self.last
                and len(items) >= n
                and all(a is b or a == b for a, b in zip(sent, items, strict=False))
            ):
                previous, new = self.last, items[n:]
        blob = _request_plain(
            system_instructions, new, model_settings, tools, output_schema, handoffs, effect_of
        )
        fp = CHAINED + hashlib.sha256(previous.encode() + b"\n" + blob).hexdigest()
        self.sent, self.last = items, fp
        return fp

    def restart(self) -> None:
        """The next call starts the chain again (this one was logged in the whole form)."""
        self.last = ""


def _dump_response(response: ModelResponse) -> dict[str, Any]:
    return {
        "output": _OUTPUT_ITEMS.dump_python(list(response.output), mode="json"),
        "usage": USAGE.dump_python(response.usage, mode="json"),
        "response_id": response.response_id,
        "request_id": response.request_id,
    }


def _load_response(plain: Any) -> ModelResponse:
    if not isinstance(plain, dict) or "output" not in plain:
        raise ConfigurationError(f"the log holds {type(plain).__name__} for a model response")
    return ModelResponse(
        output=_OUTPUT_ITEMS.validate_python(plain["output"]),
        usage=USAGE.validate_python(plain["usage"]),
        response_id=plain.get("response_id"),
        request_id=plain.get("request_id"),
    )


class JournaledProvider(ModelProvider):
    """Wraps each model the run's provider looks up by name."""

    def __init__(
        self,
        wrapped: ModelProvider,
        ctx: Context,
        effect_of: Callable[[str], ToolEffect],
        chain: CallChain | None = None,
    ) -> None:
        self.wrapped = wrapped
        self.ctx = ctx
        self.effect_of = effect_of
        self.chain = CallChain() if chain is None else chain

    def get_model(self, model_name: str | None) -> Model:
        model = self.wrapped.get_model(model_name)
        return JournaledModel(
            model, self.ctx, self.effect_of, model_name_of(model_name), self.chain
        )


class JournaledModel(Model):
    """Each call is ``ctx.call`` of a read effect whose result is the logged response."""

    def __init__(
        self,
        wrapped: Model,
        ctx: Context,
        effect_of: Callable[[str], ToolEffect],
        name: str,
        chain: CallChain | None = None,
    ) -> None:
        self.wrapped = wrapped
        self.ctx = ctx
        self.effect_of = effect_of
        self.name = name
        #: the chained fingerprints of the conversation's calls, shared by the run's models
        self.chain = CallChain() if chain is None else chain

    def _key(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[SdkTool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
    ) -> str:
        """The call's fingerprint in the form the log holds at its position: chained, or
        (a call logged before issue 25, replayed) whole, after which the chain starts
        again."""
        request = (system_instructions, input, model_settings, tools, output_schema, handoffs)
        recorded = self.ctx._next_recorded_args()
        key = self.chain.next(*request, self.effect_of)
        if not _CHAIN_FINGERPRINTS or (
            recorded is not None
            and len(recorded) == 2
            and isinstance(recorded[1], str)
            and not recorded[1].startswith(CHAINED)
        ):
            key = fingerprint(*request, self.effect_of)
            self.chain.restart()
        return key

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

        key = self._key(system_instructions, input, model_settings, tools, output_schema, handoffs)
        with calling(model_call):
            return _load_response(await self.ctx.call(_MODEL_CALL, self.name, key))

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

        key = self._key(system_instructions, input, model_settings, tools, output_schema, handoffs)
        with calling(model_stream):
            plain = await self.ctx.call(_MODEL_STREAM, self.name, key)
        for event in _STREAM_EVENTS.validate_python(plain):
            yield event


def _usage_attributes(model: str, usage: Usage) -> None:
    span = trace.get_current_span()
    span.set_attribute("gen_ai.request.model", model)
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
