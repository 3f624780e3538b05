"""`hpcdet ui -c NAME` and `hpcdet tensorboard -c NAME IDS`: the login node's server on its
private socket, reached from a loopback port of the laptop.

The server runs as a long exec channel (and stops when it ends); each browser connection is
one more channel running `hpcdet relay` there, which pipes it to the private socket. Nothing
listens on the login node's network.
"""

from __future__ import annotations

import re
import socket
import sys
import threading
from collections.abc import Sequence

from hpcdet.remote import wire
from hpcdet.remote.forward import remote_command
from hpcdet.remote.session import RemoteSession

_TOKEN = re.compile(rb"token=([A-Za-z0-9_\-]+)")
LOCAL_PORTS = {"ui": 8765, "tensorboard": 8766}


def forward_ui(session: RemoteSession, argv: Sequence[str]) -> int:
    which = argv[0]
    if any(a == "--port" or a.startswith("--port=") for a in argv):
        return session.run(argv)  # a port on the login node, as asked
    hpcdet = session.cluster.hpcdet
    server = session.open(exec=remote_command(hpcdet, [*argv, "--exit-on-eof"]))
    listener = _listen(LOCAL_PORTS[which])
    port = listener.getsockname()[1]
    try:
        token = _token(server)
        if token is None:
            return _rest(server)  # it failed before serving: its error was shown
        url = f"http://127.0.0.1:{port}/?token={token}"
        print(f"{which} of {session.cluster.name}, forwarded to this laptop: open {url}",
              flush=True)
        if sys.stdout.isatty():
            import webbrowser

            webbrowser.open(url)
        relay = remote_command(hpcdet, ["relay", which])
        threading.Thread(target=_accept, args=(listener, session, relay), daemon=True).start()
        return _rest(server)
    finally:
        listener.close()
        server.close()


def _listen(preferred: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", preferred))
    except OSError:
        listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    return listener


def _token(server: socket.socket) -> str | None:
    """The token in what the server says of itself (its ssh line for us to drop)."""
    said = b""
    while True:
        frame = wire.receive(server)
        if frame is None:
            return None
        kind, payload = frame
        if kind == wire.STDERR:
            sys.stderr.buffer.write(payload)
            sys.stderr.flush()
        elif kind == wire.STDOUT:
            said += payload
            found = _TOKEN.search(said)
            if found and said.endswith(b"\n"):
                return found.group(1).decode()
        elif kind == wire.EXIT:
            sys.stdout.buffer.write(said)
            sys.stdout.flush()
            return None


def _rest(server: socket.socket) -> int:
    """The server's output until it ends; its exit code."""
    while True:
        frame = wire.receive(server)
        if frame is None:
            return 255
        kind, payload = frame
        if kind in (wire.STDOUT, wire.STDERR):
            stream = sys.stdout if kind == wire.STDOUT else sys.stderr
            stream.buffer.write(payload)
            stream.flush()
        elif kind == wire.EXIT:
            return wire.exit_status(payload)


def _accept(listener: socket.socket, session: RemoteSession, relay: str) -> None:
    while True:
        try:
            browser, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_splice, args=(browser, session, relay), daemon=True).start()


def _splice(browser: socket.socket, session: RemoteSession, relay: str) -> None:
    try:
        channel = session.open(exec=relay, raw=True)
    except Exception as e:  # the browser gets a closed connection; the reason goes here
        print(f"cannot forward a connection: {e}", file=sys.stderr, flush=True)
        browser.close()
        return

    def pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    back = threading.Thread(target=pipe, args=(channel, browser), daemon=True)
    back.start()
    pipe(browser, channel)
    back.join()
    browser.close()
    channel.close()
