"""`hpcdet doctor` on the PBS double (tests/doubles/pbs: no PBS server can be installed here):
a server of two hosts, and one of a single host where the two-node probe job can never run
and must be canceled at the timeout. The double's "hosts" are processes of this machine, so
the network check honestly warns that both ends ran on one host."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.support import Hpcdet

DOUBLE = Path(__file__).parents[1] / "doubles" / "pbs"


def _doctor(tmp_path: Path, hosts: list[str], *args: str
            ) -> tuple[int, dict[str, dict[str, Any]], dict[str, str]]:
    home = tmp_path / "pbs-server"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({
        "hosts": [{"name": name, "ncpus": 4} for name in hosts],
        "acl_roots": ["root"],  # CI runs as root; a real server's acl_roots must list it
        "job_history_enable": len(hosts) > 1,
    }))
    env = {"PATH": f"{DOUBLE / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PBS_DOUBLE_HOME": str(home)}
    h = Hpcdet(tmp_path / "user", "pbs", extra_env=env)
    p = h.run("doctor", "--json", *args, check=False, timeout=120)
    if "--preemption" in args:
        h.stop()  # the drill's experiment started the user's daemon
    found = json.loads(p.stdout)
    return p.returncode, {f["check"]: f for f in found["findings"]}, {**os.environ, **env}


def test_doctor_on_two_pbs_hosts(tmp_path: Path) -> None:
    code, found, _ = _doctor(tmp_path, ["pbs-a", "pbs-b"], "--timeout", "30")
    assert code == 0, found
    status = {check: f["status"] for check, f in found.items()}
    assert status.pop("network") == "warn"
    assert "both ends ran on one host" in found["network"]["seen"]
    assert status.pop("registry from nodes") == "warn"  # no registry is reachable here
    assert status.pop("preemption drill") == "skipped"
    assert set(status.values()) == {"ok"}, found
    assert found["backend"]["seen"] == "pbs 23.06.06, server pbsdouble"
    assert found["job history"]["seen"] == "qstat -x (job_history_enable = True)"
    assert found["queue"]["seen"].startswith("workq (default): enabled, started; 2 nodes x 4")


def test_a_job_that_can_never_start_times_out_and_is_canceled(tmp_path: Path) -> None:
    code, found, env = _doctor(tmp_path, ["pbs-a"], "--timeout", "3")
    assert code == 1
    assert found["job history"]["status"] == "warn"
    assert "job_history_enable" in found["job history"]["change"]
    assert found["state directory"]["status"] == "ok"  # the one-node job ran
    net = found["network"]
    assert net["status"] == "fail"
    assert "did not finish within 3 s" in net["seen"] and net["seen"].endswith("; canceled")
    assert "--timeout" in net["change"]
    left = subprocess.run([str(DOUBLE / "bin" / "qstat")], env=env, capture_output=True,
                          text=True, check=True).stdout
    assert "hpcdet-doct" not in left


def test_the_preemption_drill_on_pbs_checkpoints_on_sigterm(tmp_path: Path) -> None:
    """`qsig -s TERM`, what a PBS preemption or qdel sends: the double, as the MoM does,
    signals every process of the job, the trial's own included. The trial takes it as a
    request to checkpoint (hpcdet.core._preempt), and no shell is left between the harness
    and the trial to die of it (bash execs the entrypoint); before, the run ended with 143."""
    code, found, _ = _doctor(tmp_path, ["pbs-a", "pbs-b"], "--preemption", "--timeout", "20",
                             "--drill-timeout", "60")
    drill = found["preemption drill"]
    assert code == 0 and drill["status"] == "ok", drill
    assert re.search(r"at step 5, `qsig -s TERM (\d+)\.pbsdouble`: job \1\.pbsdouble "
                     r"checkpointed and stopped \(preempted\), job \d+\.pbsdouble resumed "
                     r"from step \d+ and completed", drill["seen"]), drill
