"""The PBS backend: rendered scripts against golden files, and the commands it builds."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hpcdet.config import ExperimentConfig
from hpcdet.errors import ConfigError
from hpcdet.schedulers import make_scheduler, scheduler_class
from hpcdet.schedulers.base import ArraySpec, JobRequest, SiteLimits
from hpcdet.schedulers.pbs import PbsScheduler, priority_of, walltime
from hpcdet.states import JobState

GOLDEN = Path(__file__).parents[2] / "golden"


def _request(**kw: object) -> JobRequest:
    base: dict[str, object] = {
        "name": "hpcdet-e1-t2-r3", "run_dir": Path("/shared/runs/exp-1/trials/2/run-3"),
        "python": "/opt/py/bin/python3", "num_nodes": 1, "slots_per_node": 1,
        "partition": "workq", "walltime_seconds": 3600, "preempt_grace_seconds": 120,
    }
    base.update(kw)
    return JobRequest(**base)  # type: ignore[arg-type]


CASES = {
    "pbs_one_slot.pbs": _request(),
    "pbs_two_nodes_gpus.pbs": _request(num_nodes=2, slots_per_node=4, gpus=True, account="lab",
                                       nice=5000),
    "pbs_array.pbs": _request(run_dir=Path("/shared/runs/exp-4/array"), name="hpcdet-e4-array0",
                              array=ArraySpec(count=10, offset=20, throttle=3),
                              walltime_seconds=None),
    "pbs_extra_args.pbs": _request(extra_args=["-l mem=16gb", "-W group_list=lab"],
                                   environment={"FOO": "$(touch /tmp/owned)"}),
}


@pytest.mark.parametrize("golden", sorted(CASES))
def test_script_matches_golden_file(golden: str) -> None:
    text = PbsScheduler().render_script(CASES[golden])
    path = GOLDEN / golden
    if os.environ.get("HPCDET_REGEN_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), (
        "the rendered script changed; if that is intended, regenerate with "
        "HPCDET_REGEN_GOLDEN=1 pytest tests/unit/schedulers/test_pbs.py"
    )
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_what_the_scripts_ask_for() -> None:
    one = PbsScheduler().render_script(CASES["pbs_one_slot.pbs"])
    assert "#PBS -l select=1:ncpus=1:mpiprocs=1\n" in one
    assert "#PBS -l walltime=01:00:00\n" in one and "#PBS -r n\n" in one
    assert "-V" not in one.split("set -u")[0]
    assert "HPCDET_DEADLINE=$(( $(date +%s) + 3480 ))" in one
    two = PbsScheduler().render_script(CASES["pbs_two_nodes_gpus.pbs"])
    assert "#PBS -l select=2:ncpus=4:ngpus=4:mpiprocs=1\n#PBS -l place=scatter\n" in two
    assert "#PBS -A lab\n" in two and "#PBS -p -1024\n" in two
    assert "on_every_node " in two and 'pbsdsh -n "$index"' in two
    array = PbsScheduler().render_script(CASES["pbs_array.pbs"])
    assert "#PBS -J 0-9%3\n" in array and "-r n" not in array
    assert "slot-$(( PBS_ARRAY_INDEX + 20 ))" in array
    single = PbsScheduler().render_script(_request(array=ArraySpec(count=1)))
    assert "#PBS -J 0-1:2\n" in single


def test_a_pbsbatch_args_option_hpcdet_owns_is_refused_with_what_to_set() -> None:
    raw = {"entrypoint": "python3 train.py", "searcher": {"name": "single", "metric": "loss",
           "max_length": 1}, "pbs": {"pbsbatch_args": ["-l mem=4gb", "-J 0-9"]}}
    with pytest.raises(ConfigError) as err:
        ExperimentConfig.from_dict(raw)
    said = str(err.value)
    assert "pbs.pbsbatch_args[1]" in said and "-J" in said
    assert "searcher.max_concurrent_trials" in said
    raw["pbs"] = {"pbsbatch_args": ["-l walltime=1:00:00"]}
    with pytest.raises(ConfigError, match="use pbs.walltime"):
        ExperimentConfig.from_dict(raw)


def test_commands() -> None:
    pbs = PbsScheduler()
    assert pbs.submit_command(Path("/r/job.pbs")) == ["qsub", "/r/job.pbs"]
    assert pbs.parse_job_id("12.pbsdouble\n") == "12.pbsdouble"
    assert pbs.parse_job_id("13[].pbsdouble\n") == "13[].pbsdouble"
    with pytest.raises(ValueError, match="qsub output"):
        pbs.parse_job_id("qsub: Unknown queue\n")
    assert pbs.status_command([]) == ["qstat", "-f", "-F", "json", "-t"]
    assert pbs.final_status_command([]) is None
    assert pbs.final_status_command(["9.s", "8.s"]) == [
        "qstat", "-f", "-F", "json", "-x", "-t", "8.s", "9.s"]
    assert pbs.cancel_command(["9.s", "13[].s"]) == ["qdel", "13[].s", "9.s"]
    assert pbs.hold_command(["9.s"]) == ["qhold", "-h", "u", "9.s"]
    assert pbs.release_command(["9.s"]) == ["qrls", "-h", "u", "9.s"]
    assert pbs.move_command(["9.s"], "gpuq") == ["qmove", "gpuq", "9.s"]
    assert pbs.array_task_id("13[].s", 4) == "13[4].s"
    assert [pbs.array_of(j) for j in ("13[4].s", "13[].s", "9.s")] == ["13[].s"] * 2 + ["9.s"]
    assert pbs.job_number("13[4].s") == 13
    assert pbs.answered(153, "qstat: Unknown Job Id 8.s\n") and not pbs.answered(1, "")


def test_priority_and_walltime_and_limits() -> None:
    assert [priority_of(n) for n in (0, 100, -5000, 5000)] == [0, -100, 1023, -1024]
    assert walltime(3600 * 30 + 61) == "30:01:01"
    text = ("Server pbsdouble\n\tserver_state = Active\n\tmax_array_size = 10000\n"
            "\tjob_history_enable = True\n")
    assert PbsScheduler().parse_limits(text) == SiteLimits(10000, None, accounting=True)


def test_the_registry_names_pbs() -> None:
    assert scheduler_class("pbs") is PbsScheduler
    assert make_scheduler("pbs", {}).name == "pbs"
    with pytest.raises(ConfigError, match="valid: auto, slurm, pbs, local"):
        make_scheduler("lsf", {})


PBSNODES = """{
    "timestamp":1795539250,
    "pbs_version":"23.06.06",
    "pbs_server":"pbsdouble",
    "nodes":{
        "pbs-a":{"Mom":"pbs-a", "ntype":"PBS", "state":"job-busy", "pcpus":4,
            "jobs":["3.pbsdouble/0"],
            "resources_available":{"arch":"linux", "host":"pbs-a", "ncpus":4, "vnode":"pbs-a"},
            "resources_assigned":{"ncpus":1}},
        "pbs-b":{"Mom":"pbs-b", "ntype":"PBS", "state":"free", "pcpus":8,
            "resources_available":{"arch":"linux", "host":"pbs-b", "ncpus":8, "ngpus":2,
                                   "vnode":"pbs-b"},
            "resources_assigned":{}},
        "gpu-1":{"Mom":"gpu-1", "ntype":"PBS", "state":"free", "pcpus":64, "queue":"gpuq",
            "resources_available":{"host":"gpu-1", "ncpus":64, "ngpus":8, "vnode":"gpu-1"}}
    }
}"""


def test_pbsnodes_is_the_node_set_any_queue_may_use() -> None:
    pbs = PbsScheduler()
    assert pbs.nodes_command() == ["pbsnodes", "-a", "-F", "json"]
    nodes = pbs.parse_nodes(PBSNODES)
    assert nodes is not None
    assert (nodes.nodes, nodes.cpus_per_node, nodes.gpus_per_node) == (2, 8, 2)
    assert pbs.parse_nodes('{"timestamp": 1, "nodes": {}}') is None
    with pytest.raises(ValueError, match="pbsnodes"):
        pbs.parse_nodes("pbsnodes: Server has no node list")


def test_a_server_without_json_is_asked_in_plain_qstat_f() -> None:
    pbs = PbsScheduler()
    assert "-F" in pbs.status_command([])
    assert not pbs.answered(2, "qstat: invalid option -- 'F'\nusage: qstat ...\n")
    assert "-F" not in pbs.status_command([]) and "-F" not in (
        pbs.final_status_command(["5.s"]) or [])
    text = ("Job Id: 5.s\n    Job_Name = hpcdet-e1-t1-r1\n    job_state = R\n"
            "    queue = workq\n    Priority = -30\n")
    status = pbs.parse_status(text)["5.s"]
    assert (status.state, status.name, status.priority, status.nice) == (
        JobState.RUNNING, "hpcdet-e1-t1-r1", -30, 30)
    pbs.user = "pbsuser"
    owned = text + "    Job_Owner = other@pbs01\nJob Id: 6.s\n    Job_Owner = pbsuser@pbs01\n"
    assert list(pbs.parse_status(owned)) == ["6.s"]  # qstat lists every user's jobs


@pytest.mark.parametrize(("output", "transient"), [
    ("qsub: would exceed queue workq's per-user limit of jobs in 'Q' state", True),
    ("qsub: Maximum number of jobs already in queue workq", True),
    ("qsub: cannot connect to server pbs01 (errno=111)", True),
    ("qsub: Unknown queue", False),
    ("qsub: Job exceeds queue resource limits", False),
])
def test_a_refusal_for_now_is_told_from_one_for_good(output: str, transient: bool) -> None:
    assert PbsScheduler().refusal_is_transient(output) is transient


def test_environment_values_qsub_v_would_refuse_go_in_the_script() -> None:
    # 23.06.06's `qsub -v` refuses values with ' or " (tests/unit/schedulers/pbs_samples/
    # qsub-v-quoting.log): the script exports them itself.
    value = "it's \"quoted\", $(not run)"
    script = PbsScheduler().render_script(_request(environment={"Q": value}))
    assert not any(line.startswith("#PBS -v") or line.startswith("#PBS -V")
                   for line in script.splitlines())
    export = next(line for line in script.splitlines() if line.startswith("export Q="))
    out = subprocess.run(["bash", "-c", f'{export}\nprintf %s "$Q"'], capture_output=True,
                         text=True, check=True).stdout
    assert out == value
