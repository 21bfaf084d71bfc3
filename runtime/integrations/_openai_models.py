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
    "MODEL_CALL",
    "MODEL_STREAM",
    "USAGE",
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


def fingerprint(
    system_instructions: str | None,
    input: str | list[TResponseInputItem],
    model_settings: ModelSettings,
    tools: list[SdkTool],
    output_schema: AgentOutputSchemaBase | None,
    handoffs: list[Handoff[Any, Any]],
    effect_of: Callable[[str], ToolEffect] | None = None,
) -> str:
    """What a model call asks: the instructions, the input items, the settings, every tool
    (name, description, parameter schema and, for function tools, the declared effect), the
    handoffs and the output schema. Replay checks that the run asks the same thing the log
    recorded at that position."""

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
    blob = json.dumps(plain, sort_keys=True, separators=(",", ":"), default=repr).encode()
    return hashlib.sha256(blob).hexdigest()


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
        self, wrapped: ModelProvider, ctx: Context, effect_of: Callable[[str], ToolEffect]
    ) -> None:
        self.wrapped = wrapped
        self.ctx = ctx
        self.effect_of = effect_of

    def get_model(self, model_name: str | None) -> Model:
        model = self.wrapped.get_model(model_name)
        return JournaledModel(model, self.ctx, self.effect_of, model_name_of(model_name))


class JournaledModel(Model):
    """Each call is ``ctx.call`` of a read effect whose result is the logged response."""

    def __init__(
        self,
        wrapped: Model,
        ctx: Context,
        effect_of: Callable[[str], ToolEffect],
        name: str,
    ) -> None:
        self.wrapped = wrapped
        self.ctx = ctx
        self.effect_of = effect_of
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

        key = fingerprint(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            self.effect_of,
        )
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

        key = fingerprint(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            self.effect_of,
        )
        with calling(model_stream):
            plain = await self.ctx.call(_MODEL_STREAM, self.name, key)
        for event in _STREAM_EVENTS.validate_python(plain):
            yield event


def _usage_attributes(model: str, usage: Usage) -> None:
    span = trace.get_current_span()
    span.set_attribute("gen_ai.request.model", model)
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
