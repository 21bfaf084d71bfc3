"""How the console is served: the store, whether it may write, its token and secrets."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets

import attrs

from .._journal.errors import ConfigurationError

#: the environment variable a write token may come from (instead of ``--token``)
TOKEN_ENV = "ACTORLOG_SERVE_TOKEN"

#: the cookie that holds a signed-in browser's session
SESSION_COOKIE = "actorlog_session"


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the console on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@attrs.frozen
class ServeConfig:
    """What ``actorlog serve`` was asked for.

    Attributes:
        store_url: the store, as a URL.
        source: the store as shown on pages (no password).
        allow_writes: resolve, fork, cancel, terminate and delete are allowed (with the
            token).
        token: the secret a browser signs in with (``/login``) or a script sends as
            ``Authorization: Bearer``; required when ``allow_writes``.
        trace_url: a link to a step's trace, with ``{trace_id}`` (and ``{span_id}``) in it.
        poll_interval: seconds between checks of an actor's log for its live page.
        allowed_hosts: the ``Host`` headers accepted (None: any). Bound to loopback, the
            console accepts only loopback names, so a web page cannot reach it through DNS
            rebinding.
        page_size: actors per overview page.
        timeline_entries: log entries per page of an actor's timeline (the newest first;
            older ones on request) and at most per live update.
        live_send_timeout: seconds a live page may leave an update unread before the
            console drops its stream (a client that does not read holds one update, no
            more).
    """

    store_url: str
    source: str = ""
    allow_writes: bool = False
    token: str | None = None
    trace_url: str | None = None
    poll_interval: float = 0.5
    allowed_hosts: tuple[str, ...] | None = None
    page_size: int = 50
    timeline_entries: int = 400
    live_send_timeout: float = 30.0
    #: per process: signs sessions and CSRF tokens (a restart signs everyone out)
    secret: bytes = attrs.field(factory=lambda: secrets.token_bytes(32), repr=False)

    def __attrs_post_init__(self) -> None:
        if self.allow_writes and not self.token:
            raise ConfigurationError("writes need a token (--token or ACTORLOG_SERVE_TOKEN)")
        if not 1 <= self.timeline_entries <= 100_000:
            raise ConfigurationError(
                f"timeline_entries must be 1..100000, not {self.timeline_entries!r}"
            )
        if not 0 < self.live_send_timeout < float("inf"):
            raise ConfigurationError(
                f"live_send_timeout must be a positive number of seconds, not "
                f"{self.live_send_timeout!r}"
            )
        if self.trace_url is not None:
            if not self.trace_url.startswith(("http://", "https://")):
                raise ConfigurationError(
                    f"--trace-url must be an http(s) URL, not {self.trace_url!r}"
                )
            if "{trace_id}" not in self.trace_url:
                raise ConfigurationError("--trace-url must contain {trace_id}")

    def session_value(self) -> str:
        """The session cookie's value for a browser that signed in with the token."""
        return hmac.new(self.secret, b"session", hashlib.sha256).hexdigest()

    def csrf_value(self) -> str:
        """The token each write form carries (only pages of this origin can read it)."""
        return hmac.new(self.secret, b"csrf", hashlib.sha256).hexdigest()

    def token_matches(self, given: str | None) -> bool:
        if not self.token or not given:
            return False
        return hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.csrf_value().encode())

    def signed_in(self, cookie: str | None) -> bool:
        return cookie is not None and hmac.compare_digest(cookie, self.session_value())


def resolve_token(given: str | None, allow_writes: bool) -> tuple[str | None, bool]:
    """The write token: ``--token``, else ``$ACTORLOG_SERVE_TOKEN``, else (with writes) a new
    random one. Returns it and whether it was generated (to print at start)."""
    token = given or os.environ.get(TOKEN_ENV) or None
    if token is None and allow_writes:
        return secrets.token_urlsafe(24), True
    return token, False
