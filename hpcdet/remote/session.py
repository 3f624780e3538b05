"""The CLI's side of the keeper: a command on a cluster's login node, as if run there."""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any

from hpcdet import __version__
from hpcdet.remote import wire
from hpcdet.remote.forward import remote_command
from hpcdet.remote.place import idle_seconds, keeper_dir
from hpcdet.remote.profiles import Cluster

if TYPE_CHECKING:
    import paramiko

ENV_ASKPASS = "HPCDET_ASKPASS"
START_TIMEOUT = 15.0


class RemoteSession:
    """One cluster, through the keeper (started when none runs)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def _request(self, **what: Any) -> dict[str, Any]:
        return {"cluster": self.cluster.name, "ssh": self.cluster.ssh,
                "hpcdet": self.cluster.hpcdet, "version": __version__, **what}

    def open(self, **what: Any) -> socket.socket:
        """A socket to a new channel (``exec=`` or ``subsystem=``), once the keeper said READY;
        the second factor, if the transport needs one now, is asked here."""
        sock = connect_keeper()
        try:
            wire.send_json(sock, wire.OPEN, self._request(**what))
            while True:
                frame = wire.receive(sock)
                if frame is None:
                    raise wire.ConnectionLost("hpcdet's keeper went away; run the command "
                                              "again")
                kind, payload = frame
                if kind == wire.READY:
                    return sock
                if kind == wire.ERROR:
                    raise wire.RemoteError(str(wire.decode(payload)["message"]))
                if kind == wire.PROMPT:
                    asked = wire.decode(payload)
                    wire.send_json(sock, wire.ANSWER, answer(
                        asked["title"], asked["instructions"],
                        [(str(p), bool(e)) for p, e in asked["prompts"]]))
        except BaseException:
            sock.close()
            raise

    def execute(self, command: str, stdin: bytes | None = None,
                out: Callable[[bytes], None] | None = None,
                err: Callable[[bytes], None] | None = None) -> int:
        """``command`` in the login node's shell: its output to ``out``/``err`` as it comes,
        our stdin to it (or ``stdin``, then its end); returns its exit status."""
        sock = self.open(exec=command)
        write_out = out or _writer(sys.stdout)
        write_err = err or _writer(sys.stderr)
        try:
            if stdin is not None:
                if stdin:
                    wire.send(sock, wire.STDIN, stdin)
                wire.send(sock, wire.STDIN_EOF)
            else:
                threading.Thread(target=_forward_stdin, args=(sock,), daemon=True).start()
            while True:
                frame = wire.receive(sock)
                if frame is None:
                    raise wire.ConnectionLost(
                        f"the connection to {self.cluster.name} ended before the command did")
                kind, payload = frame
                if kind == wire.STDOUT:
                    write_out(payload)
                elif kind == wire.STDERR:
                    write_err(payload)
                elif kind == wire.EXIT:
                    status = wire.exit_status(payload)
                    if status < 0:
                        raise wire.ConnectionLost(
                            f"the connection to {self.cluster.name} closed before the command "
                            "ended; run it again")
                    return status
        finally:
            sock.close()  # before its end (Ctrl-C): the keeper closes the channel

    def run(self, argv: Sequence[str], stdin: bytes | None = None) -> int:
        """The login node's ``hpcdet <argv>``, streamed to our stdout/stderr; its exit code."""
        return self.execute(remote_command(self.cluster.hpcdet, argv), stdin)

    def run_resumed(self, argv: Sequence[str]) -> int:
        """``run``, for a command whose output only grows (a log followed): when the
        connection breaks it runs again, and what it prints again is left out."""
        printed = {"out": 0, "err": 0}

        def skipping(kind: str, write: Callable[[bytes], None]) -> Callable[[bytes], None]:
            seen = [0]

            def w(data: bytes) -> None:
                start, seen[0] = seen[0], seen[0] + len(data)
                new = data[max(printed[kind] - start, 0):]
                if new:
                    write(new)
                    printed[kind] = seen[0]
            return w

        return again_when_cut(self, lambda: self.execute(
            remote_command(self.cluster.hpcdet, argv), None,
            skipping("out", _writer(sys.stdout)), skipping("err", _writer(sys.stderr))))

    def capture(self, argv: Sequence[str], stdin: bytes = b"") -> tuple[int, str, str]:
        return self.capture_shell(remote_command(self.cluster.hpcdet, argv), stdin)

    def capture_shell(self, command: str, stdin: bytes = b"") -> tuple[int, str, str]:
        out, err = bytearray(), bytearray()
        code = self.execute(command, stdin, out.extend, err.extend)
        return code, out.decode(errors="replace"), err.decode(errors="replace")

    def sftp(self) -> paramiko.SFTPClient:
        """An SFTP client over an sftp subsystem channel of the keeper's transport."""
        import paramiko

        sock = self.open(subsystem="sftp")
        return paramiko.SFTPClient(_Named(fileno=sock.detach(), name=self.cluster.name))

    def home(self) -> str:
        code, out, err = self.capture_shell('printf %s "$HOME"')
        if code != 0 or not out.startswith("/"):
            raise wire.RemoteError(f"cannot tell the home directory on {self.cluster.name}: "
                                   f"{err.strip() or out.strip() or code}")
        return out


class _Named(socket.socket):
    """A socket paramiko's SFTP client can name in its log, as it names a channel."""

    def __init__(self, fileno: int, name: str) -> None:
        super().__init__(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fileno)
        self._name = name

    def get_name(self) -> str:
        return f"sftp to {self._name}"

    def recv_ready(self) -> bool:
        """Whether a reply waits (paramiko's pipelined writes ask, as of a channel)."""
        import select

        return bool(select.select([self], [], [], 0)[0])


def session_for(name: str) -> RemoteSession:
    """The session of the cluster profile ``name`` (its keeper started when it runs)."""
    from hpcdet.remote.profiles import load

    return RemoteSession(load().get(name))


def _writer(stream: IO[str]) -> Callable[[bytes], None]:
    def write(data: bytes) -> None:
        stream.buffer.write(data)  # type: ignore[attr-defined]
        stream.flush()
    return write


def _forward_stdin(sock: socket.socket) -> None:
    """Our stdin to the command, as ssh does; not a terminal we are in the background of
    (reading it would stop us, as `hpcdet -c X e list &` must not be)."""
    with contextlib.suppress(OSError):
        if os.isatty(0) and os.tcgetpgrp(0) != os.getpgrp():
            wire.send(sock, wire.STDIN_EOF)
            return
        while True:
            try:
                data = os.read(0, 1 << 16)
            except OSError:
                data = b""
            if not data:
                wire.send(sock, wire.STDIN_EOF)
                return
            wire.send(sock, wire.STDIN, data)


def answer(title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
    """Keyboard-interactive answers: from ``$HPCDET_ASKPASS PROMPT`` (like ssh's
    SSH_ASKPASS) when set, else typed on the terminal (hidden unless the server says echo)."""
    askpass = os.environ.get(ENV_ASKPASS)
    if askpass:
        answers = []
        for prompt, _ in prompts:
            done = subprocess.run([askpass, prompt], capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                raise wire.RemoteError(f"{ENV_ASKPASS} ({askpass}) failed for {prompt!r} "
                                       f"with exit code {done.returncode}")
            answers.append(done.stdout.rstrip("\n"))
        return answers
    try:
        tty = open("/dev/tty", "r+")  # noqa: SIM115
    except OSError:
        raise wire.RemoteError(
            "the login node asks for a second factor and there is no terminal to type it "
            f"on; run the command in a terminal, or set {ENV_ASKPASS} to a program that "
            "prints the answer to the prompt it is given") from None
    with tty:
        for line in (title, instructions):
            if line.strip():
                tty.write(line.rstrip() + "\n")
        tty.flush()
        answers = []
        for prompt, echo in prompts:
            if echo:
                tty.write(prompt)
                tty.flush()
                answers.append(tty.readline().rstrip("\n"))
            else:
                answers.append(getpass.getpass(prompt, stream=tty))
        return answers


def connect_keeper() -> socket.socket:
    """A connection to the user's keeper, started (detached) when none answers."""
    from hpcdet.private import hpcdet_command, open_private

    directory = keeper_dir()
    path = directory / "keeper.sock"
    sock = _try_connect(str(path))
    if sock is not None:
        return sock
    idle_seconds()  # a bad setting said here, not only in the detached keeper's log
    log = open_private(directory / "keeper.log", os.O_WRONLY | os.O_APPEND)
    try:
        process = subprocess.Popen(
            hpcdet_command("hpcdet.remote.keeper"), stdin=subprocess.DEVNULL, stdout=log,
            stderr=log, start_new_session=True, close_fds=True, cwd="/")
    finally:
        os.close(log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        sock = _try_connect(str(path))
        if sock is not None:
            return sock
        if process.poll() not in (None, 0):
            break
        time.sleep(0.02)
    tail = (directory / "keeper.log").read_text(errors="replace").strip().splitlines()[-5:]
    raise wire.RemoteError("hpcdet's keeper (python -m hpcdet.remote.keeper) did not start; "
                           f"its log {directory / 'keeper.log'} ends: " + " | ".join(tail))


def _try_connect(path: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


ATTEMPTS = 4
RETRY_PAUSE = 1.0


def _cut_errors() -> tuple[type[BaseException], ...]:
    import paramiko

    return (wire.ConnectionLost, wire.WireError, paramiko.SSHException, EOFError,
            ConnectionError)


def again_when_cut(session: RemoteSession, step: Callable[[], int]) -> int:
    """``step()`` again (up to ``ATTEMPTS`` times) when the connection breaks under it; safe
    only for what is made once however often it is sent."""
    cut = _cut_errors()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return step()
        except cut as e:
            if attempt == ATTEMPTS:
                raise wire.RemoteError(
                    f"the connection to {session.cluster.name} broke {ATTEMPTS} times ({e}); "
                    "run the command again: it goes on where it stopped") from None
            print(f"Warning: the connection to {session.cluster.name} broke ({e}); going on "
                  "where it stopped", file=sys.stderr)
            time.sleep(RETRY_PAUSE)
    raise AssertionError("unreachable")
