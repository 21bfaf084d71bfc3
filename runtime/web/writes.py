"""The console's writes: signing in, resolve and fork, each through :mod:`actorlog.ops` (the
same functions, rules and audit record as ``actorlog resolve`` and ``actorlog fork``).

A write is refused unless all of these hold:

* the console was started with ``--allow-writes``;
* the request comes from the console's own pages: an ``Origin`` (or ``Sec-Fetch-Site``)
  header, when the browser sends one, names this origin;
* the browser signed in with the token (a ``SameSite=Strict``, ``HttpOnly`` session cookie)
  and the form carries the CSRF token only this origin's pages hold; or the request carries
  ``Authorization: Bearer TOKEN`` (a script).

The store is opened for writing only for the write, so on SQLite a runtime holding the file
makes the write fail with ``StoreLockedError`` (its message says what to do), exactly as the
command line does; on PostgreSQL the write is a conditional append next to the runtimes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .. import ops
from .._durability import decisions as _decisions
from .._journal.errors import ConfigurationError
from . import common as _app
from .config import SESSION_COOKIE


class Refused(Exception):
    """A write this request may not make (HTTP 403), and why."""


def _same_origin(request: Request) -> bool:
    """Whether a browser sent this from the console's own pages. Browsers send ``Origin``
    with every POST (and ``Sec-Fetch-Site``); a client without them is not a browser that a
    hostile page could drive."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.url.netloc}"


async def _authorized_form(request: Request) -> FormData:
    """The write's form, once the request may write; else :class:`Refused`."""
    cfg = _app.config_of(request)
    if not cfg.allow_writes:
        raise Refused(
            "this console is read-only: start it with 'actorlog serve STORE --allow-writes' "
            "to write from the browser"
        )
    if not _same_origin(request):
        raise Refused("refused a write from another origin (cross-site request)")
    form = await request.form()
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        if not cfg.token_matches(auth[7:].strip()):
            raise Refused("wrong token")
        return form
    if not _app.signed_in(request):
        raise Refused(
            "writes need the token: sign in at /login with the token 'actorlog serve' "
            "printed (or ACTORLOG_SERVE_TOKEN)"
        )
    csrf = form.get("csrf")
    if not isinstance(csrf, str) or not cfg.csrf_matches(csrf):
        raise Refused("the form's CSRF token is missing or wrong: reload the page and retry")
    return form


def _text(form: FormData, name: str) -> str:
    v = form.get(name)
    return v if isinstance(v, str) else ""


def _number(form: FormData, name: str) -> int:
    return _app.parse_int(_text(form, name), name)


def _refused(request: Request, exc: Refused) -> Response:
    return _app.show(request, "error.html", status_code=403, message=str(exc))


def _to_actor(actor_id: str, notice: str) -> Response:
    return RedirectResponse("/actor?" + urlencode({"id": actor_id, "notice": notice}), 303)


async def login(request: Request) -> Response:
    """Sign in with the token: the link printed at start (``/login?token=...``) or the form."""
    cfg = _app.config_of(request)
    if request.method == "POST":
        if not _same_origin(request):
            return _refused(request, Refused("refused a sign-in from another origin"))
        token = _text(await request.form(), "token")
    else:
        token = request.query_params.get("token", "")
    if not token:
        return _app.show(request, "login.html")
    if not cfg.allow_writes or not cfg.token_matches(token):
        return _app.show(
            request, "login.html", status_code=403, message="wrong token (or writes are off)"
        )
    response = RedirectResponse("/", 303)
    response.set_cookie(
        SESSION_COOKIE,
        cfg.session_value(),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(request: Request) -> Response:
    response = RedirectResponse("/", 303)
    response.delete_cookie(SESSION_COOKIE)
    return response


async def resolve(request: Request) -> Response:
    """Settle an in-doubt intent: ``action`` result (``value``: JSON), retry or fail; or
    rule on a cancelled write in doubt (result or fail), as ``ops.resolve`` does."""
    try:
        form = await _authorized_form(request)
    except Refused as exc:
        return _refused(request, exc)
    actor_id = _text(form, "id")
    intent_seq = _number(form, "intent_seq")
    action = _text(form, "action")
    kwargs: dict[str, Any] = {}
    if action == "result":
        kwargs["result"] = _app.parse_json(_text(form, "value"), "the result")
    elif action == "retry":
        kwargs["retry"] = True
    elif action == "fail":
        kwargs["fail"] = _text(form, "message") or "failed by an operator from the console"
    else:
        raise ConfigurationError(f"action must be result, retry or fail, not {action!r}")
    async with _app.writable(request) as store:
        d = await ops.resolve(
            store,
            actor_id,
            intent_seq,
            by=_text(form, "by") or None,
            reason=_text(form, "reason"),
            **kwargs,
        )
    if d.seq == 0:  # a ruling on a cancelled write: the operator history, not the log
        return _to_actor(
            actor_id,
            f"recorded ruling ({d.action}) on intent seq {intent_seq} by {d.by}: "
            f"{'it happened' if d.action == 'result' else 'it did not happen'}. Its step "
            "went on and is unchanged.",
        )
    return _to_actor(
        actor_id,
        f"recorded decision seq {d.seq} ({d.action}) on intent seq {intent_seq} by {d.by}. "
        "The actor continues when a runtime next recovers it.",
    )


async def fork_page(request: Request) -> Response:
    """The effects a fork at ``at`` would not undo, listed before the operator confirms."""
    actor_id = _app.actor_id_param(request)
    at = _app.int_param(request, "at")
    effects, warnings = await ops.fork_effects(_app.store_of(request), actor_id, at)
    return _app.show(
        request,
        "fork.html",
        actor_id=actor_id,
        at=at,
        effects=effects,
        warnings=warnings,
        new_id=f"{actor_id}-fork-{at}",
        whoami=_decisions.whoami(),
    )


async def fork(request: Request) -> Response:
    """Fork after the operator saw the effects: refused again if they are not the ones
    shown (``seen``: how many were listed)."""
    try:
        form = await _authorized_form(request)
    except Refused as exc:
        return _refused(request, exc)
    actor_id, new_id = _text(form, "id"), _text(form, "new_id")
    at, seen = _number(form, "at"), _number(form, "seen")
    async with _app.writable(request) as store:
        try:
            r = await ops.fork(store, actor_id, at=at, new_id=new_id, by=_text(form, "by") or None)
        except ops.ForkRefusedError as exc:
            if len(exc.effects) + len(exc.warnings) != seen:
                raise ConfigurationError(
                    f"the log changed: {len(exc.effects)} effect(s) after seq {at} now, "
                    f"{seen} were shown; review them again"
                ) from None
            r = await ops.fork(
                store, actor_id, at=at, new_id=new_id, yes=True, by=_text(form, "by") or None
            )
    return _to_actor(
        r.actor_id,
        f"forked {r.source_id} at seq {r.at}: {r.entries_copied} entries copied. Run it with "
        f"system.spawn(<its class>, {r.actor_id!r}).",
    )
