"""The doctor's site probes: Slurm's and PBS's commands as data and their parsers, fed what
the two-node Slurm test cluster printed (captured 2026-11-29, Slurm 22.05.8) and what the PBS
double prints for ``qmgr -c 'list server'`` / ``'list queue'`` (qmgr.8B's layout)."""

from __future__ import annotations

from pathlib import Path

from hpcdet.schedulers.pbs_site import PbsSite, parse_queues
from hpcdet.schedulers.site_probe import Pool, probe_for
from hpcdet.schedulers.slurm_site import SlurmSite, gpus_in, parse_sinfo_pools

# `scontrol show config` on the test cluster, the lines the doctor reads.
CONFIG = """Configuration data as of 2026-11-29T12:23:37
AccountingStorageType   = accounting_storage/none
ClusterName             = hpcdet-test
JobAcctGatherType       = jobacct_gather/none
KillWait                = 5 sec
MaxArraySize            = 1001
MaxJobCount             = 10000
PreemptMode             = OFF
PreemptType             = preempt/none
SLURM_VERSION           = 22.05.8
"""
SINFO = """debug*|up|infinite|2|4|(null)|idle
batch|up|infinite|2|4|(null)|idle
restricted|up|infinite|2|4|(null)|idle
"""
_PART = ("PartitionName={name} AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL "
         "Default={default} QoS=N/A DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO "
         "GraceTime={grace} Hidden=NO MaxNodes=UNLIMITED MaxTime={max_time} MinNodes=0 LLN=NO "
         "MaxCPUsPerNode=UNLIMITED Nodes=node[1-2] PriorityJobFactor=1 PriorityTier=1 "
         "RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode={mode} "
         "State={state} TotalCPUs=8 TotalNodes=2 SelectTypeParameters=NONE "
         "JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED "
         "TRES=cpu=8,mem=8G,node=2,billing=8")


def part(name: str, default: str = "NO", grace: int = 0, max_time: str = "UNLIMITED",
         mode: str = "OFF", state: str = "UP") -> str:
    return _PART.format(name=name, default=default, grace=grace, max_time=max_time, mode=mode,
                        state=state)


PARTITIONS = "\n".join([part("debug", "YES"), part("batch"), part("restricted")]) + "\n"


def test_probes_are_found_by_backend_name_and_local_has_none() -> None:
    assert isinstance(probe_for("slurm"), SlurmSite)
    assert isinstance(probe_for("pbs"), PbsSite)
    assert probe_for("local") is None


def test_slurm_test_cluster_as_captured() -> None:
    site = SlurmSite()
    assert site.commands()["sinfo"] == ["sinfo", "--noheader", "-o", "%P|%a|%l|%D|%c|%G|%T"]
    facts = site.parse({"config": CONFIG, "sinfo": SINFO, "partitions": PARTITIONS})
    assert (facts.version, facts.history, facts.max_array_size, facts.max_jobs) == (
        "22.05.8", False, 1001, 10000)
    assert facts.history_how == "AccountingStorageType=accounting_storage/none: no sacct"
    assert (facts.preempt_type, facts.preempt_mode) == ("preempt/none", "OFF")
    assert facts.pools[0] == Pool("debug", True, "up, idle", 2, 4, 0, "UNLIMITED", 0, "OFF",
                                  default=True)
    assert [p.name for p in facts.pools] == ["debug", "batch", "restricted"]
    assert facts.extra["ClusterName"] == "hpcdet-test"


def test_slurm_accounting_preemption_gpus_and_a_partition_down() -> None:
    # The captured output with what slurm.conf(5) and sinfo(1) allow set otherwise: slurmdbd,
    # preemption by partition priority with requeue, and a GPU partition down (sinfo prints
    # one line per node state; "*" after a state: the node does not respond).
    config = (CONFIG.replace("accounting_storage/none", "accounting_storage/slurmdbd")
              .replace("preempt/none", "preempt/partition_prio")
              .replace("PreemptMode             = OFF", "PreemptMode             = REQUEUE"))
    sinfo = SINFO + "gpu|down|2-00:00:00|1|64|gpu:a100:4(S:0-1)|down*\n" \
                    "gpu|down|2-00:00:00|3|64|gpu:a100:4(S:0-1),shard:8|drained\n"
    partitions = PARTITIONS + part("gpu", grace=300, max_time="2-00:00:00", mode="REQUEUE",
                                   state="DOWN") + "\n"
    facts = SlurmSite().parse({"config": config, "sinfo": sinfo, "partitions": partitions})
    assert facts.history and facts.history_how == "sacct (accounting_storage/slurmdbd)"
    assert facts.preempt_mode == "REQUEUE"
    gpu = next(p for p in facts.pools if p.name == "gpu")
    assert gpu == Pool("gpu", False, "down, down*, drained", 4, 64, 4, "2-00:00:00", 300,
                       "REQUEUE")


def test_slurm_per_user_job_limits_from_associations_and_their_qos() -> None:
    # sacctmgr(1) --noheader --parsable2: fields split by "|", an empty one is no limit; one
    # line per association (cluster, account, user, partition), QOS as a comma list.
    site = SlurmSite()
    assert site.commands()["associations"][:5] == [
        "sacctmgr", "--noheader", "--parsable2", "show", "association"]
    assert site.commands()["associations"][-1] == "format=Account,QOS,MaxSubmitJobs"
    assocs = "physics|normal,long|\nml|gpu|200\n"
    qos = "normal||\nlong|50\ngpu|\n"
    facts = site.parse({"config": CONFIG, "associations": assocs, "qos": qos})
    assert (facts.max_user_jobs, facts.max_user_jobs_by) == (
        50, "MaxSubmitJobsPerUser of QOS long")
    facts = site.parse({"config": CONFIG, "associations": "ml|gpu|20\n", "qos": qos})
    assert (facts.max_user_jobs, facts.max_user_jobs_by) == (20, "MaxSubmitJobs of account ml")
    # No slurmdbd (the test cluster): sacctmgr fails, so neither output is there.
    assert SlurmSite().parse({"config": CONFIG}).max_user_jobs is None


def test_slurm_state_down_in_scontrol_alone_marks_the_partition_down() -> None:
    partitions = PARTITIONS.replace(part("batch"), part("batch", state="INACTIVE"))
    facts = SlurmSite().parse({"config": CONFIG, "sinfo": SINFO, "partitions": partitions})
    assert [p.up for p in facts.pools] == [True, False, True]


def test_slurm_says_nothing_when_nothing_answered() -> None:
    facts = SlurmSite().parse({})
    assert (facts.version, facts.history, facts.pools) == (None, None, ())


def test_gres_and_sinfo_lines_of_another_shape() -> None:
    assert gpus_in("gpu:a100:4(S:0-1),gpu:v100:2") == 6
    assert gpus_in("(null)") == 0
    assert parse_sinfo_pools("garbage\n|||\n") == {}


def test_slurm_probe_job_submission_and_launch() -> None:
    cmd = SlurmSite().submit_command(Path("/s/p.sh"), name="hpcdet-doctor-fs", nodes=2,
                                     pool="debug", output=Path("/s/p.out"), minutes=3)
    assert cmd == ["sbatch", "--parsable", "--job-name=hpcdet-doctor-fs", "--nodes=2",
                   "--ntasks-per-node=1", "--time=3", "--output=/s/p.out", "--partition=debug",
                   "/s/p.sh"]
    assert "--partition" not in " ".join(SlurmSite().submit_command(
        Path("/s/p.sh"), name="n", nodes=1, pool=None, output=Path("/o"), minutes=2))
    assert SlurmSite().on_each_node().startswith("srun ")


SERVER = """Server pbsdouble
    server_state = Active
    default_queue = workq
    max_array_size = 10000
    pbs_version = 23.06.06
    job_history_enable = True
"""
QUEUES = """Queue workq
    queue_type = Execution
    kill_delay = 2
    enabled = True
    started = True

Queue longq
    queue_type = Execution
    resources_max.walltime = 48:00:00
    enabled = True
    started = False
"""
NODES = ('{"nodes": {"pbs-a": {"resources_available": {"ncpus": 4, "ngpus": 2}},'
         ' "pbs-b": {"resources_available": {"ncpus": 4}}}}')


def test_pbs_server_queues_and_nodes() -> None:
    site = PbsSite()
    assert site.commands()["queues"] == ["qmgr", "-c", "list queue"]
    facts = site.parse({"server": SERVER, "queues": QUEUES, "nodes": NODES})
    assert (facts.version, facts.history, facts.max_array_size) == ("23.06.06", True, 10000)
    assert facts.pools == (
        Pool("workq", True, "enabled, started", 2, 4, 2, "infinite", 2, "", default=True),
        Pool("longq", False, "enabled, stopped", 2, 4, 2, "48:00:00", None, ""))


def test_pbs_without_history_and_without_an_answer() -> None:
    off = PbsSite().parse({"server": SERVER.replace("True", "False")})
    assert off.history is False and "no qstat -x" in off.history_how
    assert PbsSite().parse({}).history is None
    assert parse_queues("Queue q\n    enabled = True\nnot indented = x\n") == {
        "q": {"enabled": "True"}}


def test_pbs_probe_job_submission() -> None:
    cmd = PbsSite().submit_command(Path("/s/p.sh"), name="d", nodes=2, pool="workq",
                                   output=Path("/s/p.out"), minutes=75)
    assert cmd == ["qsub", "-N", "d", "-l", "select=2:ncpus=1:mpiprocs=1", "-l",
                   "place=scatter", "-l", "walltime=01:15:00", "-j", "oe", "-o", "/s/p.out",
                   "-q", "workq", "/s/p.sh"]
