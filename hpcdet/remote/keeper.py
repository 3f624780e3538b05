"""The per-user keeper: one authenticated SSH transport per cluster, shared by every command.

``python -m hpcdet.remote.keeper`` (started detached by the first remote command) listens on a
Unix socket in the user's private keeper directory; each CLI connection asks for one channel
(an exec or the sftp subsystem) on the cluster's transport, opened at the first request (its
second factor asked once, through that request's terminal) and again after it died. It leaves
after ``HPCDET_KEEPER_IDLE`` seconds (default 30 min) without a connection.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import shlex
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcdet.errors import HpcdetError
from hpcdet.remote import wire
from hpcdet.remote.forward import hpcdet_words
from hpcdet.remote.place import idle_seconds, keeper_dir

_VERSION = re.compile(r"^hpcdet (\S+)")
_CHUNK = 1 << 16


@dataclass
class Held:
    """A cluster's transport, and the hpcdet commands whose version it found fitting."""

    transport: Any
    checked: dict[str, str] = field(default_factory=dict)


class Keeper:
    def __init__(self, idle: float) -> None:
        self.idle = idle
        self.held: dict[str, Held] = {}
        self.locks: dict[str, threading.Lock] = {}
        self.guard = threading.Lock()
        self.active = 0
        self.last = time.monotonic()

    # ------------------------------------------------------------------ the socket

    def serve(self, listener: socket.socket) -> None:
        listener.settimeout(1.0)
        while True:
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                with self.guard:
                    if self.active == 0 and time.monotonic() - self.last > self.idle:
                        return
                continue
            with self.guard:
                self.active += 1
            threading.Thread(target=self._serve_one, args=(conn,), daemon=True).start()

    def _serve_one(self, conn: socket.socket) -> None:
        try:
            self.handle(conn)
        except (OSError, EOFError, wire.WireError):
            pass  # the CLI went away (Ctrl-C): its channel is closed below
        finally:
            conn.close()
            with self.guard:
                self.active -= 1
                self.last = time.monotonic()

    def handle(self, conn: socket.socket) -> None:
        frame = wire.receive(conn)
        if frame is None or frame[0] != wire.OPEN:
            return
        request = wire.decode(frame[1])
        try:
            channel = self.channel(request, conn)
        except HpcdetError as e:
            wire.send_json(conn, wire.ERROR, {"message": str(e)})
            return
        except Exception as e:  # paramiko's and the network's: said, never a traceback
            wire.send_json(conn, wire.ERROR, {"message": _unreachable(request, e)})
            return
        try:
            wire.send(conn, wire.READY)
            if request.get("subsystem") == "sftp" or request.get("raw"):
                _relay(conn, channel)
            else:
                _pump(conn, channel)
        finally:
            if not channel.exit_status_ready():
                _interrupt(channel)
            channel.close()

    # ------------------------------------------------------------------ transports

    def channel(self, request: dict[str, Any], conn: socket.socket) -> Any:
        """A channel for ``request`` on its cluster's transport, made (and the version of
        hpcdet there checked) when there is none or it died."""
        import paramiko

        host = str(request["ssh"])
        with self.guard:
            lock = self.locks.setdefault(host, threading.Lock())
        for attempt in (1, 2):
            with lock:
                held = self.held.get(host)
                if held is None or not held.transport.is_active():
                    held = Held(self.connect(host, conn))
                    self.held[host] = held
                self.check_version(held, request)
            try:
                channel = held.transport.open_session(timeout=15)
                if request.get("subsystem") == "sftp":
                    channel.invoke_subsystem("sftp")
                else:
                    channel.exec_command(str(request["exec"]))
                return channel
            except (paramiko.SSHException, EOFError, OSError):
                with lock:
                    if self.held.get(host) is held:
                        del self.held[host]
                        held.transport.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def connect(self, host: str, conn: socket.socket) -> Any:
        from hpcdet.remote.connect import open_transport
        from hpcdet.remote.endpoint import resolve

        def prompter(title: str, instructions: str, prompts: list[tuple[str, bool]]
                     ) -> list[str]:
            if not prompts:
                return []
            wire.send_json(conn, wire.PROMPT, {"title": title, "instructions": instructions,
                                                "prompts": [[p, bool(e)] for p, e in prompts]})
            frame = wire.receive(conn)
            if frame is None or frame[0] != wire.ANSWER:
                raise wire.WireError("the command went away before it answered")
            answers = wire.decode(frame[1])
            return [str(a) for a in answers]

        transport = open_transport(resolve(host), prompter)
        transport.set_keepalive(60)
        return transport

    def check_version(self, held: Held, request: dict[str, Any]) -> None:
        command = str(request.get("hpcdet") or "hpcdet")
        wanted = str(request.get("version") or "")
        if command not in held.checked:
            code, out, err = _run(held.transport, f"{hpcdet_words(command)} version")
            found = _VERSION.match(out.strip())
            if code != 0 or found is None:
                raise wire.RemoteError(_missing(request, command, code, out, err, wanted))
            held.checked[command] = found.group(1)
        there = held.checked[command]
        if wanted and there != wanted:
            raise wire.RemoteError(
                f"the login node of {request.get('cluster')} has hpcdet {there}, this laptop "
                f"hpcdet {wanted}: the two must be the same version. On the login node run: "
                f"python3 -m pip install --user hpcdet=={wanted} (or install hpcdet {there} "
                f"on this laptop)")


def _run(transport: Any, command: str) -> tuple[int, str, str]:
    channel = transport.open_session(timeout=15)
    try:
        channel.exec_command(command)
        channel.shutdown_write()
        out, err = bytearray(), bytearray()
        while True:
            if channel.recv_ready():
                out += channel.recv(_CHUNK)
            elif channel.recv_stderr_ready():
                err += channel.recv_stderr(_CHUNK)
            elif channel.exit_status_ready() and channel.eof_received:
                break
            else:
                select.select([channel], [], [], 1.0)
        while channel.recv_stderr_ready():
            err += channel.recv_stderr(_CHUNK)
        return (channel.recv_exit_status(), out.decode(errors="replace"),
                err.decode(errors="replace"))
    finally:
        channel.close()


def _missing(request: dict[str, Any], command: str, code: int, out: str, err: str,
             wanted: str) -> str:
    said = (err.strip() or out.strip() or f"exit code {code}").splitlines()[-1]
    name, ssh = request.get("cluster"), request.get("ssh")
    return (f"no working hpcdet on the login node of {name} ({ssh}): `{command} version` "
            f"there said: {said}. On the login node run: python3 -m pip install --user "
            f"hpcdet=={wanted or 'VERSION'}; or, if it is installed elsewhere there, tell this "
            f"laptop where: hpcdet cluster add {name} --ssh {shlex.quote(str(ssh))} "
            f"--hpcdet PATH")


def _unreachable(request: dict[str, Any], error: BaseException) -> str:
    what = str(error) or type(error).__name__
    return (f"cannot reach the login node of {request.get('cluster')} "
            f"({request.get('ssh')}): {what}")


def _pump(conn: socket.socket, channel: Any) -> None:
    """An exec channel's output to the CLI as frames, the CLI's input to the channel, until
    the command's exit status (or the CLI leaves: the channel is closed)."""
    while True:
        readable, _, _ = select.select([channel, conn], [], [], 5.0)
        moved = False
        while channel.recv_ready():
            data = channel.recv(_CHUNK)
            if not data:
                break
            wire.send(conn, wire.STDOUT, data)
            moved = True
        while channel.recv_stderr_ready():
            wire.send(conn, wire.STDERR, channel.recv_stderr(_CHUNK))
            moved = True
        if conn in readable:
            frame = wire.receive(conn)
            if frame is None:
                return
            if frame[0] == wire.STDIN:
                channel.sendall(frame[1])
            elif frame[0] == wire.STDIN_EOF:
                channel.shutdown_write()
        if moved:
            continue
        if channel.exit_status_ready() and (channel.eof_received or channel.closed):
            wire.send_exit(conn, channel.recv_exit_status())
            return
        if channel.closed:
            wire.send_exit(conn, -1)
            return
        if channel.eof_received:
            time.sleep(0.005)  # its pipe stays readable: wait for the exit status, not spin


def _interrupt(channel: Any) -> None:
    """Ctrl-C for the command on the login node (RFC 4254's "signal" request): without a
    terminal, a closed channel alone leaves it running until it next writes."""
    from paramiko.common import cMSG_CHANNEL_REQUEST
    from paramiko.message import Message

    if channel.closed:
        return
    m = Message()
    m.add_byte(cMSG_CHANNEL_REQUEST)
    m.add_int(channel.remote_chanid)
    m.add_string("signal")
    m.add_boolean(False)
    m.add_string("INT")
    with contextlib.suppress(Exception):
        channel.transport._send_user_message(m)


def _relay(conn: socket.socket, channel: Any) -> None:
    """Raw bytes both ways (an sftp subsystem) until either side ends."""
    while True:
        readable, _, _ = select.select([channel, conn], [], [], 5.0)
        if channel in readable or channel.recv_ready():
            data = channel.recv(_CHUNK)
            if not data:
                return
            conn.sendall(data)
        if conn in readable:
            data = conn.recv(_CHUNK)
            if not data:
                return
            channel.sendall(data)
        if channel.closed:
            return


def main() -> None:
    os.umask(0o077)
    directory = keeper_dir()
    lock = os.open(directory / "keeper.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # another keeper serves this user
    path = directory / "keeper.sock"
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    inode = os.stat(path).st_ino
    (directory / "keeper.pid").write_text(f"{os.getpid()}\n")
    keeper = Keeper(idle_seconds())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        keeper.serve(listener)
    finally:
        _leave(path, inode, listener, keeper)


def _leave(path: Path, inode: int, listener: socket.socket, keeper: Keeper) -> None:
    with contextlib.suppress(OSError):
        if os.stat(path).st_ino == inode:  # not a successor's
            path.unlink()
    listener.close()
    for held in list(keeper.held.values()):
        held.transport.close()
    print(f"keeper {os.getpid()} left after {keeper.idle:.0f} s idle", file=sys.stderr)


if __name__ == "__main__":
    main()
