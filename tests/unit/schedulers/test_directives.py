"""A value that got past config loading never renders onto a directive line (issue 9, item 3)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hpcdet.errors import ConfigError
from hpcdet.schedulers.base import ArraySpec, JobRequest
from hpcdet.schedulers.local import LocalScheduler
from hpcdet.schedulers.slurm import SlurmScheduler

INJECTED = "x\ntouch /tmp/owned\n#"


def request(**kw: object) -> JobRequest:
    base = JobRequest(
        name="hpcdet-e1-t2-r3", run_dir=Path("/shared/runs/exp-1/trials/2/run-3"),
        python="/opt/py/bin/python3", num_nodes=2, slots_per_node=4, partition="debug",
        walltime_seconds=3600, extra_args=["--mem=4G", "--constraint=a100"],
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def sbatch_options(script: str) -> list[str]:
    """The #SBATCH lines sbatch reads: it stops at the first line that is neither a comment
    nor blank."""
    options = []
    for line in script.splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if line.startswith("#SBATCH"):
            options.append(line)
    return options


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("partition", INJECTED, "partition (from slurm.partition, resources.resource_pool"),
        ("partition", "gpu;touch /tmp/owned", "contains ';'"),
        ("account", INJECTED, "account (from slurm.account or the cluster file's account)"),
        ("qos", "$(touch /tmp/owned)", "qos (from slurm.qos"),
        ("gpu_type", "a100 --wrap=id", "gpu_type (from slurm.gpu_type"),
        ("gpu_type", INJECTED, "a newline"),
        ("name", INJECTED, "the job name"),
        ("run_dir", Path("/shared/a\nb"), "the run directory '/shared/a\\nb' contains a newline"),
        ("extra_args", ["--mem=4G", "--comment=" + INJECTED], "a slurm.sbatch_args entry"),
        ("extra_args", ["--comment=a\rb"], "a carriage return"),
        ("environment", {"A;touch /tmp/owned": "1"}, "an environment_variables name"),
        ("walltime_seconds", "60\ntouch", "walltime_seconds must be an integer"),
        ("array", ArraySpec(count="2\ntouch"), "array.count must be an integer"),  # type: ignore[arg-type]
    ],
)
def test_a_hostile_value_raises_and_never_renders(field: str, value: object, said: str) -> None:
    with pytest.raises(ConfigError) as info:
        SlurmScheduler().render_script(request(**{field: value}))
    assert said in str(info.value), str(info.value)
    assert "nothing was submitted" in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [("name", INJECTED), ("run_dir", Path("/tmp/a\rb")), ("environment", {"$(id)": "1"})],
)
def test_the_local_backend_refuses_the_same(field: str, value: object) -> None:
    with pytest.raises(ConfigError):
        LocalScheduler({"jobs_dir": "/tmp/jobs"}).render_script(request(**{field: value}))


def test_the_local_backend_ignores_directive_only_fields() -> None:
    # It writes no directives; values that Slurm would refuse do not stop a local run.
    LocalScheduler({"jobs_dir": "/tmp/jobs"}).render_script(request(partition="a b"))


def test_a_site_template_cannot_put_a_newline_on_a_directive_line(tmp_path: Path) -> None:
    # The filter itself refuses: a site's own template that passes a value the request check
    # does not cover (here the python path) still cannot break a directive line.
    (tmp_path / "slurm.sbatch.j2").write_text(
        "#!/bin/bash\n#SBATCH --comment={{ python | directive }}\n")
    scheduler = SlurmScheduler({"template_dir": str(tmp_path)})
    assert scheduler.render_script(request(python="/a b/py")) == (
        "#!/bin/bash\n#SBATCH --comment='/a b/py'\n")
    with pytest.raises(ConfigError, match="contains a carriage return"):
        scheduler.render_script(request(name="hpcdet-e1", python="/a\r/py", run_dir=Path("/r")))


def test_signal_and_every_later_directive_survive_hostile_but_allowed_values() -> None:
    # Quotes, spaces, '#', '$' and ';' are allowed in paths and sbatch option values: each
    # stays one quoted word on its own line, so sbatch still reads every directive after it.
    job = request(
        run_dir=Path("/shared/it's a #dir/$(touch x);`id`"), gpus=True, gpu_type="a100",
        account="proj", qos="low", nice=10,
        extra_args=["--mem=4G", "--comment=a'b\"c;$(touch x)#d", "--constraint=a100&ib"],
    )
    with pytest.raises(ConfigError):  # rendered, it ended sbatch's reading before --signal
        SlurmScheduler().render_script(dataclasses.replace(job, gpu_type="a100\nsrun id"))
    for array in (None, ArraySpec(count=4, offset=2, throttle=2)):
        script = SlurmScheduler().render_script(dataclasses.replace(job, array=array))
        options = sbatch_options(script)
        assert options[-4:] == [
            "#SBATCH --signal=B:USR2@120",
            "#SBATCH --mem=4G",
            "#SBATCH '--comment=a'\"'\"'b\"c;$(touch x)#d'",
            "#SBATCH '--constraint=a100&ib'",
        ]
        assert "#SBATCH --gpus-per-node=a100:4" in options
        assert "#SBATCH --partition=debug" in options and "#SBATCH --nice=10" in options
        assert len(options) == script.count("#SBATCH")
