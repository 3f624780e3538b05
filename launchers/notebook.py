"""JupyterLab for `hpcdet notebook start`: ``python3 -m hpcdet.launch.notebook``, run by the
harness as a trial's entrypoint, in the trial's own environment (JupyterLab is the user's).

It listens on the node's address at a free port under ``/proxy/<task id>/``, with a token made
here and passed in the environment (never on a command line other users can read), and says
where in ``service.json`` (``hpcdet.rundir.layout.service``) once it answers; the web UI's
door proxies to it. With ``--idle-timeout`` it stops once idle that long, as Determined's
notebooks do, which ends the job and frees the allocation.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from hpcdet.rundir.atomic import write_atomic
from hpcdet.rundir.layout import service
from hpcdet.rundir.spec import RUN_DIR_ENV

POLL = 5.0  # seconds between looks at the server's use
IDLE_TYPES = ("kernels_or_terminals", "kernel_connections_or_terminals", "activity")


def reachable_address(environ: dict[str, str]) -> str:
    """The address the login node reaches this one at: the interface that routes to the host
    the job was submitted from (Slurm's and PBS's own variables), else loopback (the local
    backend runs jobs on the login node itself)."""
    submit = environ.get("SLURM_SUBMIT_HOST") or environ.get("PBS_O_HOST")
    if not submit:
        return "127.0.0.1"
    # A UDP connect sends nothing: it asks the kernel which source address routes there.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((submit, 9))
            routed = str(s.getsockname()[0])
        except OSError:  # a name this node cannot resolve
            routed = "127.0.0.1"
    # Loopback when the submit host's name resolves to it here (an /etc/hosts that maps
    # every host's own name so): the node's own name's address then.
    return routed if not routed.startswith("127.") else socket.gethostbyname(
        socket.gethostname())


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def jupyter_argv(python: str, host: str, port: int, base_url: str, root: str) -> list[str]:
    return [python, "-m", "jupyterlab", "--no-browser", f"--ServerApp.ip={host}",
            f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--ServerApp.base_url={base_url}", f"--ServerApp.root_dir={root}",
            # The door proxies with the browser's Host; the token still guards every request.
            "--ServerApp.allow_remote_access=True",
            # Containers run as root inside (rootless Podman's mapped root): JupyterLab
            # refuses root without it.
            *(["--ServerApp.allow_root=True"] if os.getuid() == 0 else [])]


def in_use(idle_type: str, kernels: list[dict[str, Any]], terminals: list[Any],
           status: dict[str, Any], now: float, timeout: float) -> bool:
    """Whether the server counts as in use for Determined's ``notebook_idle_type``."""
    if idle_type == "activity":
        last = status.get("last_activity") or ""
        return bool(last) and _seconds(last) > now - timeout
    if terminals:
        return True
    if idle_type == "kernel_connections_or_terminals":
        return any(int(k.get("connections") or 0) > 0 for k in kernels)
    return bool(kernels)


def _seconds(stamp: str) -> float:
    """Jupyter's ISO 8601 UTC time as seconds since the epoch."""
    import datetime

    text = stamp.replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(text).timestamp()


def _get(url: str, token: str) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 (our own URL)
        return json.loads(answer.read())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hpcdet.launch.notebook")
    parser.add_argument("--idle-timeout", type=int, default=None)
    parser.add_argument("--idle-type", choices=IDLE_TYPES, default=IDLE_TYPES[0])
    args = parser.parse_args(argv)
    if importlib.util.find_spec("jupyterlab") is None:  # the user's own, not hpcdet's
        print(f"JupyterLab is not installed in the trial environment ({sys.executable}): "
              "install it there (`pip install jupyterlab`), or name an image that has it in "
              "environment.image", file=sys.stderr)
        return 2
    run_dir = Path(os.environ[RUN_DIR_ENV])
    task_id = os.environ["DET_EXPERIMENT_ID"]
    host = reachable_address(dict(os.environ))
    port = free_port(host)
    base_url = f"/proxy/{task_id}/"
    token = secrets.token_urlsafe(24)
    env = {**os.environ, "JUPYTER_TOKEN": token}
    server = subprocess.Popen(jupyter_argv(sys.executable, host, port, base_url, os.getcwd()),
                              env=env)

    def stop(signum: int, _frame: Any) -> None:
        server.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    api = f"http://{host}:{port}{base_url}api"
    announced, idle_since = False, time.time()
    while server.poll() is None:
        time.sleep(1.0 if not announced else POLL)
        try:
            status = _get(f"{api}/status", token)
            kernels = _get(f"{api}/kernels", token) if args.idle_timeout else []
            terminals = _get(f"{api}/terminals", token) if args.idle_timeout else []
        except (OSError, urllib.error.URLError, ValueError):
            continue  # not answering yet, or stopping
        now = time.time()
        if not announced:
            write_atomic(service(run_dir), {"host": host, "port": port, "token": token,
                                            "base_url": base_url, "started": now}, mode=0o600)
            print(f"JupyterLab answers at {host}:{port}{base_url}", flush=True)
            announced, idle_since = True, now
        if args.idle_timeout is None:
            continue
        if in_use(args.idle_type, kernels, terminals, status, now, args.idle_timeout):
            idle_since = now
        elif now - idle_since >= args.idle_timeout:
            print(f"idle for {now - idle_since:.0f} s ({args.idle_type}; idle_timeout "
                  f"{args.idle_timeout} s): stopping JupyterLab", flush=True)
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
            return 0
    return server.wait()


if __name__ == "__main__":
    sys.exit(main())
