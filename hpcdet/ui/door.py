"""Who may use the UI: the holder of the user's token, from the same origin for actions, on
an address no other machine reaches unless the user asked for it. Pure where it can be."""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from hpcdet.errors import UsageError

COOKIE = "hpcdet_token"
TOKEN_FILE = "ui-token"


def token(state: Path) -> str:
    """The user's UI token, made once (mode 0600 in the private state directory)."""
    path = state / TOKEN_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    made = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(made + "\n")
    return made


def presented(cookie: str | None, header: str | None, query: str | None) -> str | None:
    """The token a request carries: its cookie, an ``Authorization: Bearer`` header, or the
    ``token`` query parameter of the first visit."""
    if header and header.lower().startswith("bearer "):
        return header[7:].strip()
    return cookie or query


def admits(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


def same_origin(origin: str | None, referer: str | None, host: str | None) -> bool:
    """An action (a POST) must come from a page of this server: its Origin (or, lacking one,
    its Referer) names the Host it was sent to. A page of another site the user has open
    cannot act with the user's cookie."""
    source = origin or referer
    if not source or not host:
        return False
    return urlsplit(source).netloc == host


def check_bind(host: str, allow_remote: bool) -> str | None:
    """A warning to print for ``host``, or None; raises for a non-loopback address the user
    did not explicitly allow."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback:
        return None
    if not allow_remote:
        raise UsageError(f"--host {host} is not a loopback address: anyone who reaches it could "
                         "try the token. Use the default (a private socket, or --port on "
                         "127.0.0.1 with ssh -L), or add --allow-remote if you mean it")
    return (f"serving on {host}: other machines can reach this port; only the token keeps "
            "them out")


Dispatch = Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]

# Nothing from elsewhere: no framing by another site, no scripts or data from it.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data: blob:; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


def guard(secret: str, headers: dict[str, str] | None = None) -> Dispatch:
    """The door as Starlette middleware: 401 without the token, 403 for an action from
    another origin; the first visit's ``?token=`` becomes a cookie and leaves the address;
    every answer carries ``headers`` (SECURITY_HEADERS unless given)."""
    extra = SECURITY_HEADERS if headers is None else headers

    async def dispatch(request: Request, call_next: Callable[[Request], Awaitable[Response]]
                       ) -> Response:
        response = await _enter(secret, request, call_next)
        response.headers.update(extra)
        return response

    return dispatch


async def _enter(secret: str, request: Request,
                 call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    given = presented(request.cookies.get(COOKIE), request.headers.get("authorization"),
                      request.query_params.get("token"))
    if not admits(secret, given):
        return JSONResponse({"error": "this needs its token: open the URL hpcdet printed "
                             "when it started"}, status_code=401)
    if request.method not in ("GET", "HEAD") and not same_origin(
            request.headers.get("origin"), request.headers.get("referer"),
            request.headers.get("host")):
        return JSONResponse({"error": "actions come only from this server's own pages"},
                            status_code=403)
    if "token" in request.query_params:
        # The first visit: keep the token in a cookie and out of the address bar/history.
        rest = {k: v for k, v in request.query_params.items() if k != "token"}
        target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        moved = RedirectResponse(target, status_code=303)
        moved.set_cookie(COOKIE, secret, httponly=True, samesite="strict")
        return moved
    return await call_next(request)
