from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from hpcdet.schedulers.base import (
    ArraySpec,
    JobRequest,
    JobState,
    Partition,
    Placement,
    SiteLimits,
    fit_problem,
    place,
)
from hpcdet.schedulers.slurm import SlurmScheduler, parse_config_limits, walltime

GOLDEN = Path(__file__).parents[2] / "golden"


def _request(**kw: object) -> JobRequest:
    base: dict[str, object] = {
        "name": "hpcdet-e1-t2-r3", "run_dir": Path("/shared/runs/exp-1/trials/2/run-3"),
        "python": "/opt/py/bin/python3", "num_nodes": 2, "slots_per_node": 4, "partition": "debug",
        "walltime_seconds": 3600, "preempt_grace_seconds": 120,
        "extra_args": ["--mem=4G"], "environment": {"FOO": "$(touch /tmp/owned)"},
    }
    base.update(kw)
    return JobRequest(**base)  # type: ignore[arg-type]


def test_script_matches_golden_file() -> None:
    text = SlurmScheduler().render_script(_request())
    golden = GOLDEN / "slurm_basic.sbatch"
    if os.environ.get("HPCDET_REGEN_GOLDEN"):
        golden.write_text(text)
    expected = golden.read_text()
    assert text == expected, (
        "the rendered script changed; if that is intended, regenerate with "
        "HPCDET_REGEN_GOLDEN=1 pytest tests/unit/schedulers/test_slurm.py"
    )


def test_array_script_matches_golden_file() -> None:
    req = _request(run_dir=Path("/shared/runs/exp-4/array"), name="hpcdet-e4-array0",
                   array=ArraySpec(count=50, offset=100, throttle=4))
    text = SlurmScheduler().render_script(req)
    golden = GOLDEN / "slurm_array.sbatch"
    if os.environ.get("HPCDET_REGEN_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text(), "regenerate with HPCDET_REGEN_GOLDEN=1 if intended"
    assert "#SBATCH --array=0-49%4" in text
    assert "SLOT=/shared/runs/exp-4/array/slot-$(( SLURM_ARRAY_TASK_ID + 100 ))" in text


def test_user_values_are_quoted() -> None:
    text = SlurmScheduler().render_script(
        _request(run_dir=Path("/tmp/a b/$(touch x)"), environment={"X": "`id`'\""})
    )
    assert "RUN_DIR='/tmp/a b/$(touch x)'" in text
    assert "export X='`id`'\"'\"'\"'" in text


def test_gpu_slots_use_gpus_per_node() -> None:
    text = SlurmScheduler().render_script(_request(gpus=True, gpu_type="a100"))
    assert "#SBATCH --gpus-per-node=a100:4" in text
    assert "--cpus-per-task" not in text


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(60, "0-00:01:00"), (61, "0-00:02:00"), (3600, "0-01:00:00"), (90000, "1-01:00:00")],
)
def test_walltime(seconds: int, expected: str) -> None:
    assert walltime(seconds) == expected


def test_parse_job_id() -> None:
    s = SlurmScheduler()
    assert s.parse_job_id("1234\n") == "1234"
    assert s.parse_job_id("1234;cluster\n") == "1234"
    with pytest.raises(ValueError, match="could not make sense"):
        s.parse_job_id("sbatch: error: nope")


def test_parse_status_maps_states_and_reasons() -> None:
    out = (
        "12|PENDING|Priority|(null)|1000|0|debug|N/A|/s/runs/exp-1/trials/1/run-1|hpcdet-e1-t1-r1\n"
        "13|RUNNING|None|node[1-2]|900|100|batch|2026-11-22T18:04:00|/home/a|b|hpcdet-e2-t3-r1\n"
        "14|TIMEOUT|TimeLimit|node1|0|0|debug|2026-11-22T18:00:00|/tmp|x\n"
        "15_3|CANCELLED|None|node2|0|0|debug|N/A|/tmp|y\n"
        "16|WEIRD_NEW|None||0|0|debug|N/A|/tmp|z\n"
        "17|PENDING|Priority|(null)|1000|0|debug|N/A|line of an older format\n"
    )
    st = SlurmScheduler().parse_status(out)
    assert st["12"].state is JobState.PENDING
    assert st["12"].reason == "waiting for higher-priority jobs to start first"
    assert st["12"].name == "hpcdet-e1-t1-r1"
    assert (st["13"].priority, st["13"].nice, st["13"].partition) == (900, 100, "batch")
    assert st["13"].state is JobState.RUNNING and st["13"].nodes == "node[1-2]"
    assert st["12"].workdir == "/s/runs/exp-1/trials/1/run-1"
    # The directory may hold "|"; hpcdet's job names never do.
    assert (st["13"].workdir, st["13"].name) == ("/home/a|b", "hpcdet-e2-t3-r1")
    assert "17" not in st
    assert st["12"].start is None
    assert st["13"].start == datetime.datetime(2026, 11, 22, 18, 4).timestamp()
    assert st["14"].state is JobState.TIMEOUT and st["14"].state.is_final
    assert st["15_3"].state is JobState.CANCELED
    assert st["16"].state is JobState.UNKNOWN and not st["16"].state.is_final


def test_status_command_is_one_call_for_any_number_of_jobs() -> None:
    cmd = SlurmScheduler().status_command([str(i) for i in range(5000)])
    assert cmd[:2] == ["squeue", "--me"]
    assert not any(arg.isdigit() for arg in cmd)


def test_parse_config_limits() -> None:
    text = "MaxArraySize            = 1001\nMaxJobCount             = 10000\nOther = 1\n"
    assert parse_config_limits(text) == {"MaxArraySize": "1001", "MaxJobCount": "10000"}


def test_accounting_is_asked_only_when_it_exists() -> None:
    assert SlurmScheduler().final_status_command(["5"]) is None
    slurm = SlurmScheduler()
    slurm.limits = slurm.parse_limits("AccountingStorageType = accounting_storage/slurmdbd\n")
    cmd = slurm.final_status_command(["7", "5"])
    assert cmd == ["sacct", "-X", "-P", "-n", "-j", "5,7", "-o",
                   "JobID,State,ExitCode,ElapsedRaw,AllocTRES"]


def test_parse_sacct() -> None:
    out = "5|COMPLETED|0:0\n7|CANCELLED by 1000|0:15\n8|TIMEOUT|0:0\n9|FAILED|2:0\n"
    st = SlurmScheduler().parse_final_status(out)
    assert (st["5"].state, st["5"].exit_code) == (JobState.COMPLETED, 0)
    assert (st["7"].state, st["7"].exit_code) == (JobState.CANCELED, 143)
    assert st["8"].state is JobState.TIMEOUT
    assert st["9"].exit_code == 2
    assert st["5"].used_seconds is None  # asked without ElapsedRaw and AllocTRES


def test_parse_sacct_usage() -> None:
    # sacct(1): ElapsedRaw is the job's elapsed seconds; AllocTRES the trackable resources
    # allocated to it, typed GPUs beside their untyped total.
    out = ("5|COMPLETED|0:0|125|billing=4,cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=16G,node=1\n"
           "6|COMPLETED|0:0|60|billing=2,cpu=2,mem=2G,node=1\n"
           "7|FAILED|1:0|30|cpu=8,gres/gpu:a100=1,gres/gpu:v100=2,node=2\n"
           "8|CANCELLED by 1000|0:15|0|\n")
    st = SlurmScheduler().parse_final_status(out)
    assert (st["5"].used_seconds, st["5"].used_gpus, st["5"].used_cpus) == (125, 2, 4)
    assert (st["6"].used_seconds, st["6"].used_gpus, st["6"].used_cpus) == (60, 0, 2)
    assert (st["7"].used_gpus, st["7"].used_cpus) == (3, 8)
    assert (st["8"].used_seconds, st["8"].used_gpus, st["8"].used_cpus) == (0, None, None)


def test_parse_partitions_adds_up_node_groups() -> None:
    out = "debug*|1|4|(null)\ndebug*|1|4|(null)\ngpu|2|32|gpu:a100:4(S:0-1)\nbig|3|64+|(null)\n"
    parts = {p.name: p for p in SlurmScheduler().parse_partitions(out)}
    assert parts["debug"] == Partition("debug", 2, 4, 0, True)
    assert parts["gpu"] == Partition("gpu", 2, 32, 4, False)
    assert parts["big"].cpus_per_node == 64


def test_fit_problem_names_the_partition_limits() -> None:
    debug = Partition("debug", 2, 4)
    assert fit_problem(2, 4, debug) is None
    msg = fit_problem(4, 4, debug)
    assert msg is not None and "4 node(s) x 4 CPU slot(s)" in msg and "2 node(s) with 4 CPU" in msg
    gpu = Partition("gpu", 2, 32, 4)
    assert fit_problem(1, 8, gpu) is not None and "GPU" in (fit_problem(1, 8, gpu) or "")
    assert fit_problem(2, 4, gpu) is None


def test_site_limits_from_scontrol_show_config() -> None:
    text = ("MaxArraySize            = 1001\nMaxJobCount             = 10000\n"
            "AccountingStorageType   = accounting_storage/none\n")
    assert SlurmScheduler().parse_limits(text) == SiteLimits(1001, 10000, accounting=False)
    assert SlurmScheduler().parse_limits("") == SiteLimits()


def test_array_ids() -> None:
    slurm = SlurmScheduler()
    assert slurm.array_task_id("300", 4) == "300_4"
    assert [slurm.array_of(j) for j in ("300_4", "300", "x")] == ["300", "300", "x"]
    assert slurm.job_number("300_4") == 300


def test_placement_spreads_slots_over_the_fewest_nodes_that_hold_them_equally() -> None:
    cpus = Partition("debug", nodes=2, cpus_per_node=4)
    gpus = Partition("gpu", nodes=4, cpus_per_node=64, gpus_per_node=4)
    assert place(8, None, cpus) == Placement(2, 4)  # the tutorial's stage 4, no slurm: section
    assert place(6, None, cpus) == Placement(2, 3)
    assert place(4, None, cpus) == Placement(1, 4)
    assert place(8, None, None) == Placement(1, 8)  # nothing known: the scheduler says
    assert place(12, None, gpus) == Placement(3, 4, gpus=True)
    assert place(8, 2, cpus) == Placement(4, 2)  # slots_per_node forces the split
    assert place(7, None, cpus) == Placement(1, 7)  # no equal split on 2 nodes
    problem = fit_problem(1, 7, cpus) or ""
    assert "1 node(s) x 7 CPU slot(s)" in problem and "slots_per_node" in problem
