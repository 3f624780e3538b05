"""Interactive tasks as a user meets them, on any backend: a command with its output and exit
code, a shell joined through a pseudo-terminal, JupyterLab in a real headless Chromium
through the door, its idle timeout ending the job, and a shell beside a running trial."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import httpx

from tests.support import CHROMIUM, CHROMIUM_FLAGS, Hpcdet, ensure_user, ui_server

OTHER = "hpcdet-u2"  # a second user of the login node



def tasks(h: Hpcdet, group: str = "task") -> dict[int, dict[str, Any]]:
    return {t["id"]: t for t in json.loads(h.run(group, "list", "--json").stdout)}


def command_runs(h: Hpcdet, tmp: Path, hosts: Collection[str]) -> None:
    """`cmd run` in a context: its output, its exit code as the CLI's, listed as a task and
    not as an experiment."""
    ctx = h.mkdir(tmp / "ctx")
    (ctx / "prep.py").write_text(
        "import os, socket, sys\n"
        "print('prep on', socket.gethostname(), os.environ['DET_TASK_TYPE'],\n"
        "      sorted(os.listdir()))\n"
        "sys.exit(3)\n")
    done = h.run("cmd", "run", "--context", str(ctx), "--config", "resources.slots=1",
                 "python3", "prep.py", check=False)
    assert done.returncode == 3, (done.stdout, done.stderr)
    said = re.search(r"prep on (\S+) COMMAND \['prep.py'\]", done.stdout)
    assert said and said.group(1) in hosts, done.stdout
    task_id = int(re.search(r"Launched command (\d+)", done.stdout).group(1))  # type: ignore[union-attr]
    # The command's end is its trial's; the task's state follows at the daemon's next pass.
    h.wait_state(task_id, {"ERROR", "COMPLETED"})
    listed = tasks(h, "cmd")[task_id]
    assert (listed["kind"], listed["exit_code"], listed["state"]) == ("command", 3, "ERROR")
    assert listed["job_id"] and task_id in tasks(h)
    assert "prep on" in h.run("cmd", "logs", str(task_id)).stdout
    assert not [e for e in json.loads(h.run("experiment", "list", "--json").stdout)
                if e["id"] == task_id]
    # One argument runs with sh -c; its exit code 0 completes it.
    ok = h.run("cmd", "run", "--config", "resources.slots=0", "echo one && echo two")
    assert [line.rsplit("|| ", 1)[-1] for line in ok.stdout.splitlines()
            if "|| " in line] == ["one", "two"], ok.stdout


def _pty_session(h: Hpcdet, args: list[str], lines: list[str], until: str,
                 timeout: float = 120) -> str:
    """``hpcdet ARGS`` on a pseudo-terminal: each of ``lines`` typed once the prompt shows;
    everything it printed until ``until`` appeared (after the last line) and it ended."""
    main, sub = os.openpty()
    proc = subprocess.Popen([h.python, "-m", "hpcdet.cli.main", *args], env=h.env(),
                            stdin=sub, stdout=sub, stderr=sub, start_new_session=True)
    os.close(sub)
    seen, sent = b"", 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # the terminal's other end closed: it ended
                    break
                if not chunk:
                    break
                seen += chunk
            text = seen.decode(errors="replace")
            if sent < len(lines) and re.search(r"[#$] $", text):  # bash's prompt
                os.write(main, (lines[sent] + "\n").encode())
                sent += 1
            elif sent == len(lines) and until in text.split(lines[-1])[-1]:
                break
        else:
            raise AssertionError(f"no {until!r} in {timeout} s:\n{seen.decode(errors='replace')}")
    finally:
        if proc.poll() is None and sent < len(lines):
            proc.kill()
        try:
            proc.wait(timeout=30)
        finally:
            os.close(main)
    return seen.decode(errors="replace")


def shell_joins(h: Hpcdet, tmp: Path, hosts: Collection[str]) -> None:
    """`shell start -d`, then `shell open` through a pseudo-terminal: the command typed runs
    on the allocation's node with the task's environment; `shell kill` frees it."""
    secret = "a b'c$HOME"
    started = h.run("shell", "start", "-d", "--config", "resources.slots=1", "--config",
                    f"environment.environment_variables=[{json.dumps('SECRET=' + secret)}]")
    task_id = int(re.search(r"Launched shell (\d+)", started.stdout).group(1))  # type: ignore[union-attr]
    out = _pty_session(h, ["shell", "open", str(task_id)], [
        "echo \"host=$(hostname) type=$DET_TASK_TYPE secret=[$SECRET] tty=$(tty)\"; exit"],
        "exit")
    found = re.search(r"host=(\S+) type=SHELL secret=\[(.*?)\] tty=(/dev/\S+)", out)
    assert found, out
    assert found.group(1) in hosts and found.group(2) == secret, out
    assert tasks(h, "shell")[task_id]["state"] == "ACTIVE"  # leaving the shell keeps it
    assert "Killed shell" in h.run("shell", "kill", str(task_id)).stdout
    h.wait_state(task_id, {"CANCELED"})


def trial_shell(h: Hpcdet, tmp: Path, job_env: str) -> None:
    """`trial shell` into a running trial's job: the shell is inside that job."""
    ctx = h.mkdir(tmp / "trial")
    (ctx / "wait.py").write_text("import time\ntime.sleep(600)\n")
    (tmp / "wait.yaml").write_text("name: waits\nentrypoint: python3 wait.py\n"
                                   "searcher: {name: single, metric: x, max_length: 1}\n"
                                   "max_restarts: 0\nresources: {slots_per_trial: 1}\n")
    exp = h.create(tmp / "wait.yaml", ctx)
    try:
        h.wait_for("the trial to run", lambda: any(
            r["state"] == "RUNNING" for r in h.describe(exp)["runs"]), timeout=300)
        trial = h.describe(exp)["trials"][0]["id"]
        job = h.describe(exp)["runs"][-1]["job_id"]
        out = _pty_session(h, ["trial", "shell", str(trial)],
                           [f"echo \"job=${job_env} in=$(hostname)\"; exit"], "exit")
        assert f"job={job.split('_')[0]}" in out, out
    finally:
        h.run("experiment", "kill", str(exp), check=False)


def _as_another_user(url: str, service: Path) -> str:
    """What a second user of the login node gets from the door's URL, and whether they can
    read the notebook's address and token."""
    ensure_user(OTHER)
    probe = ("import sys, urllib.request, urllib.error\n"
             "try:\n    code = urllib.request.urlopen(sys.argv[1], timeout=10).status\n"
             "except urllib.error.HTTPError as e:\n    code = e.code\n"
             "try:\n    open(sys.argv[2]).read(); said = 'readable'\n"
             "except OSError:\n    said = 'unreadable'\n"
             "print(code, said)\n")
    done = subprocess.run(["runuser", "-u", OTHER, "--", "/usr/bin/python3", "-c", probe, url,
                           str(service)], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or done.stderr


def notebook_in_chromium(h: Hpcdet, tmp: Path, jupyter_python: str, hosts: Collection[str],
                         shots: Path) -> None:
    """A JupyterLab started with `notebook start` runs a cell in Chromium through the door:
    the cell runs on a compute node with a trial's slots; the door without its session
    answers 401, the node without the notebook's token 403; closing the page leaves its
    kernel unconnected, and the idle timeout ends the notebook and frees its job."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    started = h.run("notebook", "start", "--timeout", "300", "--config", "resources.slots=1",
                    "--config", f"environment.python={jupyter_python}",
                    "--config", "idle_timeout=20s",
                    "--config", "notebook_idle_type=kernel_connections_or_terminals",
                    timeout=360)
    task_id = int(re.search(r"Launched notebook (\d+)", started.stdout).group(1))  # type: ignore[union-attr]
    path = f"/proxy/{task_id}/lab"
    assert path in started.stdout and "token" not in started.stdout, started.stdout
    run_dir = next(h.state.glob(f"**/exp-{task_id}/trials/*/run-*"))
    service = json.loads((run_dir / "service.json").read_text())
    assert (run_dir / "service.json").stat().st_mode & 0o077 == 0
    node = f"http://{service['host']}:{service['port']}{service['base_url']}api/status"
    assert httpx.get(node, timeout=10).status_code == 403  # JupyterLab's own token guards it
    with ui_server(h) as (base, token), sync_playwright() as p:
        assert httpx.get(base + path, timeout=10).status_code == 401
        assert _as_another_user(base + path, run_dir / "service.json") == "401 unreadable"
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            log: list[str] = []
            page.on("console", lambda m: log.append(m.text) if m.type == "error" else None)
            page.goto(f"{base}/?token={token}")
            page.goto(base + "/tasks")
            page.wait_for_selector(f"tr[data-task='{task_id}'] a[href='{path}']")
            page.goto(base + path)
            page.click("div.jp-LauncherCard[data-category='Notebook']", timeout=120_000)
            cell = ".jp-Notebook .jp-Cell .cm-content"
            page.wait_for_selector(cell, timeout=60_000)
            # The kernel's status bar says Idle once its channels are open.
            page.wait_for_selector("text=| Idle", timeout=120_000)
            page.click(cell)
            page.keyboard.type("import os, socket; print('ran on', socket.gethostname(), "
                               "os.environ['DET_TASK_TYPE'], os.environ['DET_SLOT_IDS'])")
            out = None
            for _ in range(3):  # a run asked for as the kernel connects can be dropped
                page.click(f"{cell} >> nth=0")
                page.keyboard.press("Shift+Enter")
                try:
                    out = page.wait_for_selector(
                        ".jp-OutputArea-output:has-text('ran on')", timeout=30_000)
                    break
                except PlaywrightTimeout:
                    continue
            if out is None:
                shots.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(shots / "notebook-failed.png"))
                raise AssertionError(f"the cell printed nothing; console errors: {log[:10]}")
            words = out.inner_text().split()
            assert words[2] in hosts and words[3:] == ["NOTEBOOK", "[0]"], words
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / "notebook.png"))
            assert not errors, errors
        finally:
            browser.close()
    ended = h.wait_state(task_id, {"COMPLETED", "ERROR", "CANCELED"}, timeout=240)
    assert ended["experiment"]["state"] == "COMPLETED", ended
    assert "idle for" in h.run("notebook", "logs", str(task_id)).stdout
