"""The only module that knows bytes: payload encoding (and, from ``frames``, the checksum
frame and snapshot digests).

Everything here is specified in ``docs/FORMAT.md``; the ``[Fn]`` tags cite it.
"""

from __future__ import annotations

import collections.abc
import json
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .checks import (
    shown as shown,
    validate_int,
    validate_name,
    validate_optional_text,
    validate_seconds,
    validate_stable_name,
    validate_text,
)
from .errors import EncodeError
from .frames import (
    _KIND_CODE as _KIND_CODE,
    FRAME_VERSION as FRAME_VERSION,
    _frame_parts as _frame_parts,
    entry_checksum as entry_checksum,
    info_digest as info_digest,
    log_start_checksum as log_start_checksum,
    make_row as make_row,
    snapshot_digest as snapshot_digest,
    verified_rows as verified_rows,
    verify_row as verify_row,
)

# Ids live in ``_ids`` and the bounded repr of error messages in ``_checks``; re-exported
# here, where most of the runtime calls them (``_codec.validate_actor_id``).
from .ids import (
    MAX_ACTOR_ID_CHARS as MAX_ACTOR_ID_CHARS,
    new_incarnation as new_incarnation,
    new_message_id as new_message_id,
    validate_actor_id as validate_actor_id,
    validate_message_id as validate_message_id,
)
from .names import is_pydantic_model as _is_pydantic_model, message_kind, type_tag

if TYPE_CHECKING:
    import cattrs

__all__ = [
    "MAX_ACTOR_ID_CHARS",
    "MAX_PAYLOAD_BYTES",
    "converter",
    "decode_json",
    "encode_json",
    "entry_checksum",
    "make_row",
    "info_digest",
    "log_start_checksum",
    "snapshot_digest",
    "type_tag",
    "shown",
    "validate_actor_id",
    "validate_int",
    "validate_message_id",
    "validate_name",
    "validate_optional_text",
    "validate_seconds",
    "validate_stable_name",
    "validate_text",
    "verified_rows",
    "verify_row",
]

#: [F10] Largest encoded payload of one log entry. Larger messages, arguments or results are
#: rejected at the call with ``EncodeError``; store big blobs elsewhere and log a reference.
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _c_encoder() -> Callable[[Any, int], Any] | None:
    """The C encoder of ``_encoder``, made once (without a circular-reference memo, so a
    cycle raises ``RecursionError``); None on an interpreter without the C accelerator."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    made: Callable[[Any, int], Any] = make(
        None, _encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    return made


_c_encode = _c_encoder()


def _compact_encoder() -> Callable[[Any], str]:
    """``_encoder.encode`` without its per-call set-up (``_c_encode``). The same output."""
    c_encode = _c_encode
    if c_encode is None:  # an interpreter without the C accelerator
        return _encoder.encode

    def encode(obj: Any) -> str:
        return "".join(c_encode(obj, 0))

    return encode


_encode = _compact_encoder()
_PRIMITIVES = (str, int, bool, type(None))
#: the types ``to_plain(value, what, check=False)`` returns as they are: a caller on the hot
#: path asks ``type(value) in PRIMITIVES`` inline instead of calling it
PRIMITIVES = _PRIMITIVES

#: The one cattrs converter: JSON-friendly (datetimes as ISO strings, bytes as base85, ...).
#: Made (and cattrs imported) at its first use, not at ``import actorlog``: the module's
#: ``__getattr__`` below.
converter: cattrs.Converter

#: What unstructuring a value that cannot be encoded raises (cattrs' own error is added
#: when the converter is made: it cannot be raised before).
_ENCODE_ERRORS: tuple[type[BaseException], ...] = (TypeError, ValueError, RecursionError)


def _unstructure_pydantic(value: Any) -> Any:
    """``model_dump(mode="json")``, its sets in the order of [F9a] (pydantic writes them in
    iteration order): the Python dump says which of its lists were sets."""
    plain = value.model_dump(mode="json")
    return _order_sets(value.model_dump(mode="python"), plain)


def _order_sets(py: Any, plain: Any) -> Any:
    """``plain`` (a JSON dump of ``py``) with every list that was a set in ``py`` sorted."""
    if isinstance(py, (set, frozenset)) and type(plain) is list and len(plain) == len(py):
        items = SetList(_order_sets(p, j) for p, j in zip(py, plain, strict=True))
        items.sort(key=set_order_key)
        return items
    if isinstance(py, dict) and type(plain) is dict and len(plain) == len(py):
        return {k: _order_sets(p, j) for p, (k, j) in zip(py.values(), plain.items(), strict=True)}
    if isinstance(py, (list, tuple)) and type(plain) is list and len(plain) == len(py):
        return [_order_sets(p, j) for p, j in zip(py, plain, strict=True)]
    return plain


def _structure_pydantic(obj: Any, cls: Any) -> Any:
    return cls.model_validate(obj)


def _make_converter() -> cattrs.Converter:
    global converter, _ENCODE_ERRORS
    import cattrs
    from cattrs.preconf.json import make_converter

    made = make_converter()
    # pydantic models travel as their JSON form (``model_dump(mode="json")``) and come back
    # through ``model_validate``: what a handler gets live is what replay decodes
    made.register_unstructure_hook_func(_is_pydantic_model, _unstructure_pydantic)
    made.register_structure_hook_func(_is_pydantic_model, _structure_pydantic)
    # [F9a] a set is a list in one canonical order, the same in every process (iteration
    # order depends on PYTHONHASHSEED): what replay compares must not
    made.register_unstructure_hook_factory(_is_set_type, lambda t: _set_unstructure(made, t))
    _ENCODE_ERRORS = (TypeError, ValueError, RecursionError, cattrs.BaseValidationError)
    converter = made
    return made


class SetList(list[Any]):
    """The plain form of a set or frozenset: a list (it encodes as a JSON array) in the
    canonical order of [F9a]. The subclass only marks, for replay's comparison with entries
    written before that order, that the order of this list carries no meaning."""

    __slots__ = ()


def _is_set_type(t: Any) -> bool:
    origin = typing.get_origin(t) or t
    if not isinstance(origin, type):
        return False
    return origin in (collections.abc.Set, collections.abc.MutableSet) or issubclass(
        origin, (set, frozenset)
    )


def set_order_key(plain: Any) -> str:
    """[F9a] The sort key of a set element's plain form: its compact JSON text (code point
    order is the order of its UTF-8 bytes)."""
    return _encode(plain)


def _set_unstructure(made: cattrs.Converter, t: Any) -> Callable[[Any], SetList]:
    args = typing.get_args(t)
    item: Callable[[Any], Any] = made.unstructure
    if args and args[0] is not Any:
        item = made.get_unstructure_hook(args[0])

    def unstructure_set(value: Any) -> SetList:
        items = SetList(item(x) for x in value)
        if len(items) > 1:
            items.sort(key=set_order_key)
        return items

    return unstructure_set


def same_plain(got: Any, recorded: Any) -> bool:
    """Is ``got`` (a plain value as ``unstructure`` makes it) the same as ``recorded`` (a
    plain value decoded from a log), where a set compares as a set: a log written before
    [F9a] holds a set in the order its process iterated it (it depends on the hash seed)."""
    if isinstance(got, SetList):
        if type(recorded) is not list or len(recorded) != len(got):
            return False
        left = list(got)
        for r in recorded:
            for i, g in enumerate(left):
                if same_plain(g, r):
                    del left[i]
                    break
            else:
                return False
        return True
    if isinstance(got, (list, tuple)):
        return (
            type(recorded) is list
            and len(recorded) == len(got)
            and all(same_plain(g, r) for g, r in zip(got, recorded, strict=True))
        )
    if isinstance(got, dict):
        if type(recorded) is not dict or len(recorded) != len(got):
            return False
        # keys as JSON writes them (an int key becomes a str)
        keys = [json.loads(json.dumps({k: 0})).popitem()[0] for k in got]
        return set(recorded) == set(keys) and all(
            same_plain(g, recorded[k]) for k, g in zip(keys, got.values(), strict=True)
        )
    try:
        return bool(json.loads(json.dumps(got)) == recorded)
    except (TypeError, ValueError):
        return False


def __getattr__(name: str) -> Any:
    if name == "converter":
        return _make_converter()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The types whose cattrs structure hook is the type itself (``int(v)``, ``str(v)``, ...):
#: a value of exactly that type comes back as it is.
_EXACT: frozenset[type] = frozenset({str, int, float, bool})
#: (``structure(plain, cls)`` is ``plain`` when ``type(plain) is cls and cls in EXACT``)
EXACT = _EXACT
#: attrs class -> its fields as (name, init argument, exact type), or None if a field is of
#: another kind (then cattrs structures it)
_SIMPLE: dict[type, tuple[tuple[str, str, type], ...] | None] = {}
_NOTHING: Any = object()


def _simple_fields(cls: type) -> tuple[tuple[str, str, type], ...] | None:
    import attrs

    out: list[tuple[str, str, type]] = []
    generic: Any = getattr(cls, "__parameters__", None)
    try:
        if generic or not attrs.has(cls):
            return None
        if any(isinstance(f.type, str) for f in attrs.fields(cls)):
            attrs.resolve_types(cls)  # as cattrs does before structuring the class
        for f in attrs.fields(cls):
            if not f.init or f.type not in _EXACT:
                return None
            out.append((f.name, f.alias or f.name, f.type))
    except Exception:  # an annotation that does not resolve: cattrs says what is wrong
        return None
    return tuple(out)


_PLAIN_ITEMS = frozenset({str, int, float, bool, type(None)})


class _NotJson(Exception):
    """A value :func:`_copy_json` leaves to cattrs."""


def _copy_json(value: Any, depth: int) -> Any:
    """A new copy of nested dicts with str keys, lists and plain scalars (what cattrs makes
    of them: an equal copy); raises ``_NotJson`` at anything else (a tuple, a set, a subclass,
    an attrs instance) or past 64 levels."""
    if depth > 64:
        raise _NotJson
    t = type(value)
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _NotJson
            out[k] = v if type(v) in _PLAIN_ITEMS else _copy_json(v, depth + 1)
        return out
    if t is list:
        return [v if type(v) in _PLAIN_ITEMS else _copy_json(v, depth + 1) for v in value]
    raise _NotJson


def _is_json(value: Any, depth: int) -> bool:
    """Is ``value`` what :func:`_copy_json` copies (nested dicts with str keys, lists and
    plain scalars, at most 64 levels)? The same walk, without building the copy."""
    if depth > 64:
        return False
    t = type(value)
    if t is dict:
        for k, v in value.items():
            if type(k) is not str or (type(v) not in _PLAIN_ITEMS and not _is_json(v, depth + 1)):
                return False
        return True
    if t is list:
        for v in value:  # noqa: SIM110 (a loop: no generator per item)
            if type(v) not in _PLAIN_ITEMS and not _is_json(v, depth + 1):
                return False
        return True
    return False


def unstructure_to_encode(value: Any) -> Any:
    """``unstructure(value)`` for a caller that encodes the result at once and keeps nothing
    of it (an entry's value, a reply, an event, a snapshot): plain JSON (nested str-keyed
    dicts, lists and scalars) is returned as it is, without the copy ``unstructure`` makes
    so that a plain value kept by the runtime never aliases the caller's. The encoded bytes
    are the same."""
    if (type(value) is dict or type(value) is list) and _is_json(value, 0):
        return value
    return unstructure(value)


def unstructure(value: Any) -> Any:
    """``converter.unstructure(value)``, with the same result, without cattrs for plain
    values: a scalar, a list (a new one) or a dict with str keys (a new one) of scalars (tool
    arguments, mostly), nested lists and str-keyed dicts of scalars (a conversation's messages:
    a new copy, about 4x faster than cattrs), an attrs instance whose fields are all plain (a
    small message)."""
    t = type(value)
    if t in _PLAIN_ITEMS:
        return value
    if t is list and all(type(x) in _PLAIN_ITEMS for x in value):
        return list(value)
    if t is dict and all(type(k) is str and type(v) in _PLAIN_ITEMS for k, v in value.items()):
        return dict(value)
    if t is dict or t is list:  # nested plain JSON (a conversation's messages): copied as is
        try:
            return _copy_json(value, 0)
        except _NotJson:
            pass  # something else inside: cattrs decides
    fields = _SIMPLE.get(t, _NOTHING)
    if fields is _NOTHING:
        fields = _SIMPLE[t] = _simple_fields(t) if len(_SIMPLE) < 4096 else None
    if fields is not None:  # an attrs instance of plain fields, each holding its type
        out = {}
        for name, _, want in fields:
            v = getattr(value, name)
            if type(v) is not want:
                break
            out[name] = v
        else:
            return out
    return _converter().unstructure(value)


def _plain_container(plain: list[Any] | dict[Any, Any], cls: Any) -> Any:
    """A new list or dict equal to ``plain`` if ``cls`` is ``list[T]`` or ``dict[str, T]``
    (``T`` a str, int, float or bool) and every item of ``plain`` is exactly a ``T`` (what
    cattrs makes of it), else None."""
    args = typing.get_args(cls)
    origin = typing.get_origin(cls)
    if type(plain) is list and origin is list and len(args) == 1 and args[0] in _EXACT:
        want = args[0]
        return list(plain) if all(type(x) is want for x in plain) else None
    if type(plain) is dict and origin is dict and len(args) == 2 and args[0] is str:
        want = args[1]
        if want in _EXACT and all(type(k) is str and type(v) is want for k, v in plain.items()):
            return dict(plain)
    return None


def structure(plain: Any, cls: Any) -> Any:
    """``converter.structure(plain, cls)``, with the same result, without cattrs (nor its
    import) for the common plain cases: a str, int, float or bool of exactly that type, a
    ``list[T]`` or ``dict[str, T]`` of them, and an attrs class whose fields are all of
    those scalar types, given exactly (what a replay or a start decodes most: small
    messages, tool results, replies)."""
    if type(plain) is cls and cls in _EXACT:
        return plain
    if type(plain) is list or (type(plain) is dict and _SIMPLE.get(cls) is None):
        # (an attrs class of plain fields, cached, is no container: straight below)
        copied = _plain_container(plain, cls)
        if copied is not None:
            return copied
    if type(plain) is dict and isinstance(cls, type):
        fields = _SIMPLE.get(cls, _NOTHING)
        if fields is _NOTHING:
            fields = _SIMPLE[cls] = _simple_fields(cls) if len(_SIMPLE) < 4096 else None
        if fields is not None:
            args = {}
            for name, arg, want in fields:
                v = plain.get(name, _NOTHING)
                if type(v) is not want:
                    break  # missing (a default?), or to convert: cattrs' way
                args[arg] = v
            else:
                try:
                    return cls(**args)
                except Exception:
                    pass  # a validator or converter refused it: cattrs' error says how
    return _converter().structure(plain, cls)


def _converter() -> cattrs.Converter:
    try:
        return converter
    except NameError:  # not made yet
        return _make_converter()


def encode_json(value: Any, what: str, *, limit: int = MAX_PAYLOAD_BYTES) -> bytes:
    """[F9] Unstructure ``value`` with cattrs and encode it as compact UTF-8 JSON.

    Raises:
        EncodeError: the value cannot be represented, or the result exceeds the size limit.
    """
    try:
        plain = unstructure_to_encode(value)
        data = json.dumps(
            plain, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()
    except _ENCODE_ERRORS as exc:
        raise EncodeError(what, type(value), str(exc)) from exc
    if len(data) > limit:
        raise EncodeError(what, type(value), f"encoded size {len(data)} bytes exceeds {limit}")
    return data


def encode_plain(obj: dict[str, Any] | list[Any], what: str) -> bytes:
    """Encode an entry envelope: plain JSON, or holding a value given as it is (a reply, a
    tool's result, arguments: ``to_plain(..., check=False)``). A value the encoder does not
    take as it is (an attrs instance, a set, a datetime inside) is unstructured first,
    with the envelope (what ``unstructure`` makes of an envelope of plain items is the
    envelope with that value unstructured): the same bytes as unstructuring it before."""
    try:
        try:
            if _c_encode is not None:  # ``_encode``, inlined: four entries an ask
                data = "".join(_c_encode(obj, 0)).encode()
            else:
                data = _encode(obj).encode()
        except TypeError:  # not plain JSON: through cattrs, as ``to_plain`` would have
            data = _encode(unstructure(obj)).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        raise EncodeError(what, type(obj), str(exc)) from exc
    if len(data) > MAX_PAYLOAD_BYTES:
        raise EncodeError(
            what, type(obj), f"encoded size {len(data)} bytes exceeds {MAX_PAYLOAD_BYTES}"
        )
    return data


def encode_body(plain: Any, what: str, cls: type) -> str:
    """An already-plain value as compact JSON text ([F9]), proven to encode to UTF-8 within
    the payload limit (the check ``to_plain`` makes, keeping the text).

    Raises:
        EncodeError: it cannot be encoded, or the result exceeds the size limit.
    """
    try:
        text = _encode(plain)
        size = len(text.encode())  # to bytes too: a lone surrogate only fails there
    except _ENCODE_ERRORS as exc:
        raise EncodeError(what, cls, str(exc)) from exc
    if size > MAX_PAYLOAD_BYTES:
        raise EncodeError(what, cls, f"encoded size {size} bytes exceeds {MAX_PAYLOAD_BYTES}")
    return text


def to_plain(value: Any, what: str, *, check: bool = True) -> Any:
    """Unstructure ``value`` and (with ``check``) prove it encodes to UTF-8 JSON within the
    payload limit.

    Callers that encode the result into an entry right away pass ``check=False`` and turn
    the entry's ``EncodeError`` into theirs, so the value is encoded once, not twice. Such
    a caller keeps nothing of the result after encoding it (``encode_plain``), so with
    ``check=False`` a dict or a list (a tool's result, a reply, a conversation) is returned
    as it is, neither copied nor walked: ``encode_plain`` encodes plain JSON as it is and
    unstructures anything else inside first, with the same bytes as ``unstructure``'s copy
    (the copy is made for values kept apart from the caller's; here nothing is kept).
    """
    size = 0
    try:
        if type(value) in _PRIMITIVES and not (check and type(value) is str):
            return value
        if not check and (type(value) is dict or type(value) is list):
            return value  # encoded at once by ``encode_plain``, which unstructures if needed
        plain = unstructure(value)
        if check:
            # to bytes too: a lone surrogate only fails there
            size = len(_encode(plain).encode())
    except _ENCODE_ERRORS as exc:
        raise EncodeError(what, type(value), str(exc)) from exc
    if check and size > MAX_PAYLOAD_BYTES:
        raise EncodeError(
            what, type(value), f"encoded size {size} bytes exceeds {MAX_PAYLOAD_BYTES}"
        )
    return plain


_SCALARS = (str, int, float, bool, type(None))
#: ``is_scalar``'s types (``type(plain) in SCALARS``, asked inline on the hot path)
SCALARS = _SCALARS


def is_scalar(plain: Any) -> bool:
    """A plain value that decodes from its JSON exactly as it is (a str, an int, a finite
    float, a bool, None): its decoded form need not be computed."""
    return type(plain) in _SCALARS


def is_flat(plain: Any) -> bool:
    """A plain value whose JSON decodes to an equal value of the same types, item for item:
    a scalar (``is_scalar``), or a dict with str keys (a list) of scalars, as a small
    message's body is. Its decoded form need not be computed; it may be used instead
    (structuring copies its items into a new object: nothing aliases it)."""
    t = type(plain)
    if t in _SCALARS:
        return True
    if t is dict:
        for k, v in plain.items():  # noqa: SIM110 (a loop: no generator per message)
            if type(k) is not str or type(v) not in _SCALARS:
                return False
        return True
    if t is list:
        for v in plain:  # noqa: SIM110
            if type(v) not in _SCALARS:
                return False
        return True
    return False


_decoder = json.JSONDecoder()
_decode_str = _decoder.decode
_scan: Callable[[str, int], tuple[Any, int]] = _decoder.scan_once  # type: ignore[attr-defined]


def decode_json(data: bytes) -> Any:
    """Decode a payload. Raises ``ValueError`` on malformed bytes.

    The same as ``json.loads(data)``: an object or array (every entry payload) is UTF-8 (what
    ``json.loads`` detects for bytes starting with ``{`` and a non-NUL byte), decoded as it
    does, without its detection and checks per call."""
    if (data[:1] == b"{" or data[:1] == b"[") and data[1:2] != b"\x00":
        text = data.decode("utf-8", "surrogatepass")
        try:
            obj, end = _scan(text, 0)
        except StopIteration:
            end = -1
        if end == len(text):
            return obj
        return _decode_str(text)  # whitespace after it, or an error: json.loads' own way
    return json.loads(data)


def check_attrs_instance(value: object, what: str) -> None:
    """Raise ``EncodeError`` unless ``value`` is an instance of a class a message can be:
    an attrs class, a dataclass or a pydantic model."""
    if message_kind(type(value)) is None:
        raise EncodeError(
            what,
            type(value),
            "it is not an instance of an attrs class, a dataclass or a pydantic model "
            "(wrap the value in one: @attrs.define class Ask: question: str)",
        )
