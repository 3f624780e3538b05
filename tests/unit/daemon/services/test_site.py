"""Site: partitions, limits and accounting from sinfo and scontrol; trials that can never fit."""

from __future__ import annotations

from pathlib import Path

from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.schedulers.base import Placement, SiteLimits
from tests.unit.daemon.services.support import CONFIG, World


def _cfg(**resources: object) -> ExperimentConfig:
    return ExperimentConfig.from_dict({**CONFIG, "resources": resources})


def test_read_learns_partitions_limits_and_accounting(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.runner.sinfo = "debug*|2|4|(null)\ngpu|1|8|gpu:2\n"
    w.runner.config = ("MaxArraySize = 501\nMaxJobCount = 10000\n"
                       "AccountingStorageType = accounting_storage/slurmdbd\n")
    site = w.site()
    site.read()
    assert sorted(site.partitions) == ["debug", "gpu"]
    assert w.scheduler.limits == SiteLimits(max_array_size=501, max_jobs=10000, accounting=True)


def test_without_accounting_and_when_sinfo_fails(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.runner.refuse.add("sinfo")
    site = w.site()
    site.read()
    assert site.partitions == {}
    assert w.scheduler.limits == SiteLimits(max_array_size=1001, accounting=False)
    assert site.fit_problem(_cfg(slots_per_trial=64)) is None  # nothing known: nothing refused


def test_the_partition_of_an_experiment(tmp_path: Path) -> None:
    w = World(tmp_path, ClusterConfig(backend="slurm", partitions={"big": "gpu"}))
    w.runner.sinfo = "debug*|2|4|(null)\ngpu|1|8|gpu:2\n"
    site = w.site()
    site.read()
    assert site.partition_name(_cfg()) == "debug"  # the default partition
    assert site.partition_name(_cfg(resource_pool="big")) == "gpu"
    assert site.placement(_cfg(resource_pool="big")).gpus
    assert not site.placement(_cfg()).gpus


def test_a_trial_that_can_never_fit_is_named(tmp_path: Path) -> None:
    w = World(tmp_path)
    site = w.site()
    site.read()  # debug: 2 nodes, 4 CPUs each
    assert site.fit_problem(_cfg(slots_per_trial=2)) is None
    assert site.fit_problem(_cfg(slots_per_trial=8)) is None  # spread: 2 nodes x 4
    assert site.placement(_cfg(slots_per_trial=8)) == Placement(2, 4)
    problem = site.fit_problem(_cfg(slots_per_trial=12))
    assert problem is not None and "debug" in problem


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_site_is_read_again_hourly_and_for_a_partition_not_known(tmp_path: Path) -> None:
    """A daemon started before a partition was added lays its trials out on it as it is, not
    blind (issue 42: a 6-slot trial went as 1 node x 6 CPUs to 4-CPU nodes, and sbatch
    refused it)."""
    from hpcdet.daemon.site import READ_EVERY, UNKNOWN_EVERY, Site

    w = World(tmp_path)
    clock = _Clock()
    site = Site(w.scheduler, w.runner, w.cluster, clock)
    site.read()
    late = _cfg(slots_per_trial=6, resource_pool="late")
    w.runner.sinfo += "late|2|4|(null)\n"  # added while the daemon runs
    assert site.placement(late) == Placement(2, 3)
    assert "late" in site.partitions
    # A name still unknown is asked for at most once a minute.
    reads = len(w.runner.commands("sinfo"))
    assert site.partition(_cfg(resource_pool="nowhere")) is None
    assert site.partition(_cfg(resource_pool="nowhere")) is None
    assert len(w.runner.commands("sinfo")) == reads + 1
    clock.now += UNKNOWN_EVERY
    site.partition(_cfg(resource_pool="nowhere"))
    assert len(w.runner.commands("sinfo")) == reads + 2
    # Read again hourly, not at every tick.
    site.refresh()
    assert len(w.runner.commands("sinfo")) == reads + 2
    clock.now += READ_EVERY
    site.refresh()
    assert len(w.runner.commands("sinfo")) == reads + 3


def test_a_job_refused_for_a_node_configuration_reads_the_site_and_goes_again(
        tmp_path: Path) -> None:
    from hpcdet.daemon.site import Site

    w = World(tmp_path)
    site = Site(w.scheduler, w.runner, w.cluster)
    site.read()
    assert w.scheduler.refusal_means_site_changed(
        "sbatch: error: Batch job submission failed: Requested node configuration is not "
        "available")
    assert not w.scheduler.refusal_means_site_changed("sbatch: error: invalid account")
    reads = len(w.runner.commands("sinfo"))
    site.stale()
    assert len(w.runner.commands("sinfo")) == reads + 1
