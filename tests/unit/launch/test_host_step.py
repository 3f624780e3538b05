"""A step started on the host for a launcher inside an image, and its ranks' way back in."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

from hpcdet.containers import Bind, ContainerSpec, Image
from hpcdet.launch.host_step import EXIT, HostSteps, ask_host, rank_command, rank_prefix


def test_the_harness_runs_the_launchers_step_and_passes_signals_on(tmp_path: Path) -> None:
    step_dir = tmp_path / "launch" / "mpi-0"
    step_dir.mkdir(parents=True)
    lines: list[str] = []
    steps = HostSteps(tmp_path, 0, {"PATH": "/usr/bin:/bin", "FROM_HARNESS": "h"},
                      lines.append, poll=0.05).start()
    try:
        code = ask_host(step_dir, 0, ["sh", "-c", 'echo "$FROM_HARNESS $FROM_LAUNCHER"; exit 3'],
                        {"FROM_LAUNCHER": "l"}, poll=0.05)
        assert (code, lines) == (3, ["h l"])
        # A request of another node's launcher is that node's harness's to serve.
        elsewhere = tmp_path / "launch" / "mpi-2"
        elsewhere.mkdir()
        (elsewhere / "host-step.json").write_text('{"node_rank": 1, "argv": ["true"], "env": {}}')
        # A request half written, then one of the wrong shape: neither ends the service.
        half = tmp_path / "launch" / "mpi-3"
        half.mkdir()
        (half / "host-step.json").write_text('{"node_rank": 0, "ar')
        odd = tmp_path / "launch" / "mpi-4"
        odd.mkdir()
        (odd / "host-step.json").write_text('{"node_rank": 0, "argv": "true", "env": {}}')
        deadline = time.monotonic() + 30
        while not (odd / "host-step.exit").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads((odd / "host-step.exit").read_text()) == {"exit_code": 127}
        assert not (half / "host-step.exit").exists()
        other = tmp_path / "launch" / "mpi-1"
        other.mkdir()
        def term_later() -> None:
            # Once the step says its trap is set: on a loaded machine a fixed delay could
            # send the signal before, and the shell would die of it instead.
            deadline = time.monotonic() + 60
            while "trap set" not in lines and time.monotonic() < deadline:
                time.sleep(0.05)
            (other / "host-step.signal").write_text(f"{int(signal.SIGTERM)}\n")

        threading.Thread(target=term_later, daemon=True).start()
        code = ask_host(other, 0, ["sh", "-c", 'trap "echo got TERM; exit 7" TERM; '
                                   'echo trap set; sleep 30 & wait'], {}, poll=0.05)
        assert code == 7 and "got TERM" in lines
        assert (other / EXIT).exists() and not (elsewhere / EXIT).exists()
    finally:
        steps.stop()


def test_a_rank_enters_its_nodes_image_with_the_steps_variables() -> None:
    spec = ContainerSpec("apptainer", Image("x", "/img/x.sif"),
                         binds=(Bind("/node-tmp/work", "/hpcdet/work"),),
                         executable="/opt/bin/apptainer")
    record = {"spec": spec.to_dict(), "env": {"HPCDET_CLUSTER_INFO": "/run/nodes/1.json"}}
    step_env = {"PMI_RANK": "3", "SLURM_PROCID": "3", "APPTAINERENV_SLURM_PROCID": "0",
                "HOME": "/root"}
    argv, env = rank_command(record, step_env, ["python3", "-m", "x"])
    assert argv[:2] == ["/opt/bin/apptainer", "exec"] and argv[-3:] == ["python3", "-m", "x"]
    assert "--home" in argv and "/node-tmp/work:/hpcdet/work" in argv  # the node's work dir
    assert env["APPTAINERENV_SLURM_PROCID"] == "3" and env["APPTAINERENV_PMI_RANK"] == "3"
    assert env["APPTAINERENV_HPCDET_CLUSTER_INFO"] == "/run/nodes/1.json"
    assert "APPTAINERENV_HOME" not in env
    assert rank_prefix("/run", "SLURM_NODEID", ["py", "-I", "-m", "m"]) == [
        "py", "-I", "-m", "m", "/run", "--node-var", "SLURM_NODEID", "--"]
