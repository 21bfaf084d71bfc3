"""Streamed model requests of a ``DurableAgent`` (docs/pydantic-ai.md, "Streaming and event
stream handlers").

A streamed request is still one ``ctx.call`` of a read effect whose result is the complete
response, logged once when the stream ends. The call runs in a task of its own (the intent is
logged and made durable there, then its tool waits); once its tool runs, the task that asked
for the stream opens the provider's stream and hands each event on to pydantic-ai (and so to
the run's event stream handler) as it arrives, then gives the response to the waiting tool,
whose result is logged; pydantic-ai continues with the response as logged. A request served
from the log is not streamed: pydantic-ai gets the logged response, its parts whole (one
``PartStartEvent`` with the complete content, and its ``PartEndEvent``, per part).

``DeltaForwarder`` turns the events of each request into small plain dicts for ``ctx.emit``
(the step's callers), live and from the log alike.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from datetime import datetime
from typing import Any

import anyio
from opentelemetry import trace
from pydantic import TypeAdapter
from pydantic_ai.messages import (
    BaseToolCallPart,
    FinalResultEvent,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ModelResponsePart,
    ModelResponseStreamEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPartDelta,
)
from pydantic_ai.models import (
    CompletedStreamedResponse,
    Model,
    ModelRequestParameters,
    StreamedResponse,
)
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.usage import RequestUsage

from .._effects import tasks as _tasks
from .._journal.errors import ConfigurationError

__all__ = ["DeltaForwarder", "can_stream", "drain", "streamed_request", "whole_response"]

#: The ``event`` of each dict a DurableAgent emits (``DurableAgent(emit_deltas=True)``).
REQUEST = "pydantic_ai.request"
DELTA = "pydantic_ai.delta"
REQUEST_END = "pydantic_ai.request_end"


#: a ``ModelResponse`` alone: dumps exactly what ``ModelMessagesTypeAdapter`` dumps for it, in
#: about half the time (no list, no union to pick the member from)
_RESPONSE = TypeAdapter(ModelResponse)


def _dump_response(response: ModelResponse) -> Any:
    return _RESPONSE.dump_python(response, mode="json")


def _load_response(plain: Any) -> ModelResponse:
    (msg,) = ModelMessagesTypeAdapter.validate_python([plain])
    if not isinstance(msg, ModelResponse):
        raise ConfigurationError(f"the log holds a {type(msg).__name__} for a model response")
    return msg


def can_stream(model: Model) -> bool:
    """Does ``model`` make streamed requests? (Not a ``FunctionModel`` without a
    ``stream_function``, nor a model without ``request_stream``.) One that does not is asked
    without streaming, as before, and its responses are handed on whole."""
    while True:
        if isinstance(model, FunctionModel):
            return model.stream_function is not None
        kind = type(model)
        if kind.request_stream is Model.request_stream:
            return False
        if isinstance(model, WrapperModel) and kind.request_stream is WrapperModel.request_stream:
            model = model.wrapped
            continue
        return True


async def drain(ctx: Any, events: AsyncIterable[Any]) -> None:
    """An event stream handler that only reads the events: pydantic-ai streams a model
    request only for a handler, and ``emit_deltas`` needs it streamed."""
    async for _ in events:
        pass


def _text_of(part: ModelResponsePart) -> str | None:
    """The text a part streams: its content, or a tool call's arguments as they came (JSON
    text, or a dict as compact JSON)."""
    if isinstance(part, TextPart | ThinkingPart):
        return part.content
    if isinstance(part, BaseToolCallPart):
        args = part.args
        if args is None or isinstance(args, str):
            return args or ""
        return json.dumps(args, separators=(",", ":"), ensure_ascii=False, default=str)
    return None


class DeltaForwarder:
    """The plain dicts ``ctx.emit`` gets for the events of one model request.

    ``{"event": "pydantic_ai.request", "request": n, "replayed": bool}`` when request ``n``
    (counted from 0 in the run) starts, live or served from the log; then, for each part
    with text (text, thinking, a tool call's arguments as JSON),
    ``{"event": "pydantic_ai.delta", "request": n, "part": i, "part_kind": ...,
    "offset": k, "delta": "..."}``: the part's text from character ``k`` on is ``delta`` (a
    tool call's first one also has ``tool_name`` and ``tool_call_id``); finally
    ``{"event": "pydantic_ai.request_end", "request": n}``. A consumer keeps one string per
    (request, part): a ``request`` event clears that request's, a delta sets
    ``text = text[:offset] + delta``."""

    __slots__ = ("_emit", "_kinds", "_request", "_texts")

    def __init__(self, emit: Callable[[Any], None], request: int) -> None:
        self._emit = emit
        self._request = request
        #: part index -> the text emitted so far (chunks; joined only to check at its end)
        self._texts: dict[int, list[str]] = {}
        #: part index -> its ``part_kind``
        self._kinds: dict[int, str] = {}

    def start(self, *, replayed: bool) -> None:
        self._emit({"event": REQUEST, "request": self._request, "replayed": replayed})

    def end(self) -> None:
        self._emit({"event": REQUEST_END, "request": self._request})

    def event(self, event: ModelResponseStreamEvent) -> None:
        if isinstance(event, PartStartEvent):
            self._whole(event.index, event.part)
        elif isinstance(event, PartDeltaEvent):
            chunks = self._texts.get(event.index)
            delta = event.delta
            text: Any = None
            if isinstance(delta, TextPartDelta | ThinkingPartDelta):
                text = delta.content_delta
            elif isinstance(delta, ToolCallPartDelta) and delta.tool_name_delta is None:
                text = delta.args_delta  # a dict (not a JSON text): sent whole at its end
            if chunks is None or not isinstance(text, str) or not text:
                return
            offset = sum(map(len, chunks))
            chunks.append(text)
            self._part(event.index, self._kinds[event.index], offset, text)
        elif isinstance(event, PartEndEvent):
            whole = _text_of(event.part)
            chunks = self._texts.get(event.index)
            if whole is not None and (chunks is None or "".join(chunks) != whole):
                self._whole(event.index, event.part)  # the deltas did not add up: start over

    def _whole(self, index: int, part: ModelResponsePart) -> None:
        text = _text_of(part)
        if text is None:
            return
        self._texts[index] = [text]
        self._kinds[index] = part.part_kind
        extra: dict[str, Any] = {}
        if isinstance(part, BaseToolCallPart):
            extra = {"tool_name": part.tool_name, "tool_call_id": part.tool_call_id}
        self._part(index, part.part_kind, 0, text, extra)

    def _part(
        self, index: int, kind: str, offset: int, text: str, extra: dict[str, Any] | None = None
    ) -> None:
        self._emit(
            {
                "event": DELTA,
                "request": self._request,
                "part": index,
                "part_kind": kind,
                "offset": offset,
                "delta": text,
                **(extra or {}),
            }
        )


class RequestAbandoned(Exception):
    """The run stopped while a response streamed: the request's logged outcome."""

    def __init__(self, why: BaseException) -> None:
        reason = type(why).__name__ + (f": {why}" if str(why) else "")
        super().__init__(f"the run stopped while the response streamed ({reason})")


class _Call:
    """The journaled call of one streamed request: its tool (``run``) waits for the response
    the stream delivers."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        #: True once the tool runs (live), False if the call ended without it (the log)
        self.opened: asyncio.Future[bool] = loop.create_future()
        self.response: asyncio.Future[ModelResponse] = loop.create_future()
        self.span: trace.Span | None = None

    async def run(self) -> ModelResponse:
        if self.opened.done():  # a retry: a streamed request is made once per call
            raise RuntimeError("a streamed model request cannot be attempted again")
        self.span = trace.get_current_span()
        self.opened.set_result(True)
        return await self.response

    def ended(self, task: asyncio.Task[Any]) -> None:
        if not self.opened.done():
            self.opened.set_result(False)
        if not task.cancelled():
            task.exception()  # retrieved: whoever needs it awaits the task


def whole_response(
    response: ModelResponse,
    params: ModelRequestParameters,
    forward: DeltaForwarder | None,
    *,
    replayed: bool,
) -> StreamedResponse:
    """A response handed on whole: one ``PartStartEvent`` with the complete content and its
    ``PartEndEvent`` per part (and the ``FinalResultEvent`` where the output starts)."""
    whole = CompletedStreamedResponse(response, model_request_parameters=params, replay_events=True)
    if forward is None:
        return whole
    forward.start(replayed=replayed)
    return _Streamed(whole, params, forward)


async def _settled(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` if it runs, and wait until it is done (shielded: its cancellation
    records what it must, see ``_calls``)."""
    if not task.done():
        task.cancel()
    with anyio.CancelScope(shield=True):
        await asyncio.wait({task})


@asynccontextmanager
async def streamed_request(
    journal: Callable[[Callable[[], Awaitable[ModelResponse]]], Awaitable[ModelResponse]],
    open_stream: Callable[[], AbstractAsyncContextManager[StreamedResponse]],
    params: ModelRequestParameters,
    forward: DeltaForwarder | None,
    handler_cancelled: Callable[[], bool],
) -> AsyncIterator[StreamedResponse]:
    """One streamed request: ``journal(fn)`` is the ``ctx.call`` whose tool awaits ``fn()``
    and whose logged result it returns; ``open_stream()`` opens the provider's stream.

    A cancellation point throughout. A cancel before the stream ended cancels the call,
    which settles it as its ``ctx.call`` would be settled (in doubt at shutdown: made again
    on recovery); the run stopping while it streams (an error of the consumer, a cancel of
    the handler's own: ``handler_cancelled()``) is logged as the request's failure."""
    call = _Call()
    with _tasks.outside():  # the call logs under the node ``journal`` gives it
        task = asyncio.ensure_future(journal(call.run))
    task.add_done_callback(call.ended)
    try:
        if not await call.opened:  # served from the log: the logged response, whole
            yield whole_response(task.result(), params, forward, replayed=True)
            return
        if forward is not None:
            forward.start(replayed=False)
        stack = AsyncExitStack()
        try:
            inner = await stack.enter_async_context(open_stream())
        except Exception as exc:  # the stream failed to open: the request failed
            call.response.set_exception(exc)
            await asyncio.wait({task})
            task.result()  # the call's error (ToolCallError), as on replay
            raise
        async with stack:
            streamed = _Streamed(inner, params, forward, call, task)
            try:
                yield streamed
            except BaseException as exc:
                # The run stopped while the request streamed (its event stream handler
                # raised, and pydantic-ai cancelled the request): unless the runtime stops
                # the step (then the request is in doubt, made again on recovery), that is
                # the request's outcome, logged as its failure, so a replay stops the run at
                # the same request. (A call cancelled by the handler's own scope would wait,
                # on replay, for a cancel the replay cannot repeat: it does not stream.)
                if not call.response.done() and (isinstance(exc, Exception) or handler_cancelled()):
                    call.response.set_exception(RequestAbandoned(exc))
                    with anyio.CancelScope(shield=True):
                        await asyncio.wait({task})
                raise
            # The consumer stopped before the end without an error: the run goes on with
            # the response so far, so that is what is logged (and replayed).
            await streamed.finish()
    finally:
        await _settled(task)


class _Streamed(StreamedResponse):
    """The stream pydantic-ai iterates: the provider's (or the logged response's) events,
    each handed to the forwarder, then, live, the response as logged."""

    def __init__(
        self,
        inner: StreamedResponse,
        params: ModelRequestParameters,
        forward: DeltaForwarder | None,
        call: _Call | None = None,
        task: asyncio.Task[ModelResponse] | None = None,
    ) -> None:
        super().__init__(params)
        self._inner = inner
        self._forward = forward
        self._call = call
        self._task = task
        self._events_seen = 0
        self._logged: ModelResponse | None = None

    def __aiter__(self) -> AsyncIterator[ModelResponseStreamEvent]:
        # The inner stream's own ``__aiter__`` made the part ends and the final result
        # event: they are handed on as they are (as pydantic-ai's continuation stream does).
        if self._event_iterator is None:
            events: AsyncIterator[ModelResponseStreamEvent] = self._events()
            if self._request_deadline is not None:
                events = self._request_deadline.iterate(events)
            self._event_iterator = events
        return self._event_iterator

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        async for event in self._events():  # not used: ``__aiter__`` is
            yield event

    async def _events(self) -> AsyncIterator[ModelResponseStreamEvent]:
        call, forward = self._call, self._forward
        try:
            async for event in self._inner:
                if self._first_chunk_monotonic is None:
                    self._first_chunk_monotonic = time.perf_counter()
                    if call is not None and call.span is not None:
                        call.span.add_event("actorlog.pydantic_ai.first_event")
                self._events_seen += 1
                self.provider_response_id = self._inner.provider_response_id
                if isinstance(event, FinalResultEvent):
                    self.final_result_event = event
                if forward is not None:
                    forward.event(event)
                yield event
        except Exception as exc:
            if call is not None and self._task is not None and not call.response.done():
                call.response.set_exception(exc)  # the request failed: logged as failed
                await asyncio.wait({self._task})
                self._task.result()  # the call's error (ToolCallError), as on replay
            raise
        await self.finish()

    async def finish(self) -> None:
        """The stream ended: log the response (live) and continue with it as logged."""
        if self._finished:
            return
        call, task = self._call, self._task
        if call is not None and task is not None and not call.response.done():
            if call.span is not None:
                call.span.set_attribute("actorlog.pydantic_ai.stream_events", self._events_seen)
            call.response.set_result(self._inner.get())
            self._logged = await task
        self._finished = True
        if self._forward is not None:
            self._forward.end()

    def get(self) -> ModelResponse:
        return self._logged if self._logged is not None else self._inner.get()

    @property
    def usage(self) -> RequestUsage:
        return self._logged.usage if self._logged is not None else self._inner.usage

    async def close_stream(self) -> None:
        await self._inner.cancel()

    def get_stream_cancel_errors(self) -> tuple[type[BaseException], ...]:
        return self._inner.get_stream_cancel_errors()

    @property
    def model_name(self) -> str:
        if self._logged is not None:
            return self._logged.model_name or ""
        return self._inner.model_name

    @property
    def provider_name(self) -> str | None:
        if self._logged is not None:
            return self._logged.provider_name
        return self._inner.provider_name

    @property
    def provider_url(self) -> str | None:
        if self._logged is not None:
            return self._logged.provider_url
        return self._inner.provider_url

    @property
    def timestamp(self) -> datetime:
        if self._logged is not None:
            return self._logged.timestamp
        return self._inner.timestamp
