"""Who may use the UI: the holder of the user's token, from the same origin for actions, on
an address no other machine reaches unless the user asked for it. Pure where it can be.

The token (a 0600 file, rotated by ``--new-token``) opens the door on the first visit or in a
``Bearer`` header; the browser then keeps only a session secret made at this server's start
and held in its memory alone. Browsers send a host's cookies to every port of it, so a tab
left on a stopped server's port hands its cookie to whoever binds that port next: that cookie
opens no other server, this one's successors on the port included."""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import socket
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from hpcdet.errors import UsageError

TOKEN_FILE = "ui-token"
# The names a loopback server answers to; any other Host is a page of another site reaching it
# through DNS rebinding (or a mistake), and is refused.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


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


def new_token(state: Path) -> str:
    """Replace the user's UI token with a fresh one (old links and sessions stop working)."""
    made = secrets.token_urlsafe(32)
    fd, tmp = tempfile.mkstemp(prefix=f".{TOKEN_FILE}.", dir=state)  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(made + "\n")
        os.replace(tmp, state / TOKEN_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return made


class Door:
    """One server instance's door. ``keyring`` gives the token as it is now (re-read at each
    request, so a rotation closes running servers too); the cookie ``cookie`` holds the
    instance's ``session`` secret, made anew at start and when the token changes; ``hosts``
    are the host names the server answers to."""

    def __init__(self, keyring: Callable[[], str], cookie: str,
                 hosts: Iterable[str] = LOOPBACK_NAMES) -> None:
        self.keyring = keyring
        self.cookie = cookie
        self.hosts = frozenset(h.lower() for h in hosts)
        self.session = secrets.token_urlsafe(32)
        self._token = keyring()

    def token(self) -> str:
        current = self.keyring()
        if current != self._token:
            self._token = current
            self.session = secrets.token_urlsafe(32)
        return current


def cookie_name(port: int | None, sock_name: str) -> str:
    """The cookie's name: the port's, so servers on other ports never overwrite it (the
    private socket's name when there is no port)."""
    return f"hpcdet_{port}" if port is not None else f"hpcdet_{Path(sock_name).stem}"


def bound_hosts(host: str | None) -> frozenset[str]:
    """The Host names a server bound to ``host`` (None: the private socket) answers to: the
    loopback names, and for another address (--allow-remote) that address and this machine's
    names. Any port: ``ssh -L`` picks the laptop's."""
    if host is None or host.strip("[]").lower() in LOOPBACK_NAMES:
        return LOOPBACK_NAMES
    return LOOPBACK_NAMES | {host.strip("[]").lower(), socket.gethostname().lower(),
                             socket.getfqdn().lower()}


def host_allowed(header: str | None, hosts: frozenset[str]) -> bool:
    if not header:
        return False
    try:
        name = urlsplit("//" + header).hostname
    except ValueError:
        return False
    return name is not None and name in hosts


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


def socket_refusal(door: Door, headers: Mapping[str, str],
                   cookies: Mapping[str, str]) -> str | None:
    """Why a WebSocket handshake may not enter, or None if it may. The guard (a
    BaseHTTPMiddleware) never sees WebSockets, so their routes ask here: the Host is one of
    the server's names, the token is shown (the session cookie, or a ``Bearer`` header; never
    ``?token=``, which is the application's behind the door) and, as a WebSocket acts from
    its first frame, the Origin is one of this server's pages."""
    host = headers.get("host")
    if not host_allowed(host, door.hosts):
        return "this server answers only by the names in the URL hpcdet printed"
    token = door.token()
    header = headers.get("authorization")
    if header and header.lower().startswith("bearer "):
        admitted = admits(token, presented(None, header, None))
    else:
        admitted = admits(door.session, cookies.get(door.cookie))
    if not admitted:
        return "this needs its token: open the URL hpcdet printed when it started"
    if not same_origin(headers.get("origin"), None, host):
        return "websockets come only from this server's own pages"
    return None


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


# Pages the door passes on from an interactive task (hpcdet.ui.proxy): JupyterLab's own
# Content-Security-Policy applies to them (it evaluates code and runs inline scripts).
PROXIED = "/proxy/"


def guard(door: Door, headers: dict[str, str] | None = None) -> Dispatch:
    """The door as Starlette middleware: 401 without the token, 403 for an action from
    another origin; the first visit's ``?token=`` becomes a cookie and leaves the address;
    every answer carries ``headers`` (SECURITY_HEADERS unless given), a proxied page its
    own Content-Security-Policy."""
    extra = SECURITY_HEADERS if headers is None else headers
    proxied = {k: v for k, v in extra.items() if k != "content-security-policy"}

    async def dispatch(request: Request, call_next: Callable[[Request], Awaitable[Response]]
                       ) -> Response:
        response = await _enter(door, request, call_next)
        if request.url.path.startswith(PROXIED) and response.status_code < 400:
            for name, value in proxied.items():
                response.headers.setdefault(name, value)
        else:
            response.headers.update(extra)
        return response

    return dispatch


async def _enter(door: Door, request: Request,
                 call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    host = request.headers.get("host")
    if not host_allowed(host, door.hosts):
        names = ", ".join(sorted(door.hosts))
        return JSONResponse({"error": f"this server answers only by the names {names} "
                             f"(the request's Host header says {host!r}): open the URL "
                             "hpcdet printed"}, status_code=421)
    token = door.token()
    header = request.headers.get("authorization")
    query = request.query_params.get("token")
    cookie = request.cookies.get(door.cookie)
    if (header and header.lower().startswith("bearer ")) or query is not None:
        admitted = admits(token, presented(None, header, query))
    else:
        admitted = admits(door.session, cookie)
    if not admitted:
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
        moved.set_cookie(door.cookie, door.session, httponly=True, samesite="strict")
        return moved
    return await call_next(request)
