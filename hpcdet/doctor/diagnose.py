"""`hpcdet doctor`: every check in order, each a `Finding`."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hpcdet.config.cluster import ClusterConfig
from hpcdet.doctor import drill, node_checks, runtime_check, site_checks
from hpcdet.doctor.findings import Finding, Status, failed
from hpcdet.doctor.node_jobs import Outcome, ProbeJob, Prober, fs_script, net_script
from hpcdet.errors import SchedulerCommandError
from hpcdet.paths import StatePaths, fstype_of
from hpcdet.private import private_dir
from hpcdet.schedulers import detect_backend, make_scheduler
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.schedulers.site_probe import Pool, SiteFacts, SiteProbe, probe_for

DEFAULT_TIMEOUT = 120.0
NET_PROBE = Path(__file__).with_name("net_probe.py")
_NODE_CHECKS = ("state directory", "checkpoint storage", "runtime on nodes",
                "registry from nodes", "network")
# Where `docker://` images come from (hpcdet.images converts them with the runtime).
REGISTRY = ("registry-1.docker.io", 443)


@dataclass(frozen=True)
class Options:
    quick: bool = False  # no jobs
    timeout: float = DEFAULT_TIMEOUT  # for all the probe jobs together
    pool: str | None = None  # else the cluster config's default pool, else the site's
    storage: Path | None = None  # checkpoint storage; else <state>/checkpoints
    # The preemption drill (opt-in; it runs an experiment through the daemon, which only the
    # views reach): given what sends a job the site's preemption, the chosen pool and the
    # runner.
    drill: Callable[[Callable[[str], list[str]], str | None, CommandRunner], Finding] | None = None


def diagnose(cluster: ClusterConfig, paths: StatePaths, options: Options,
             runner: CommandRunner | None = None) -> list[Finding]:
    runner = runner or CommandRunner(timeout=30)
    backend = detect_backend() if cluster.backend == "auto" else cluster.backend
    runtime, runtime_path = runtime_check.runtime(
        cluster.container_runtime, "container_runtime" in cluster.sources, runner)
    on_login = [runtime, runtime_check.image_dirs(
        Path(cluster.image_cache) if cluster.image_cache else paths.images)]
    probe = probe_for(backend)
    if probe is None:
        return [Finding("backend", Status.OK, f"{backend}: trials run on this machine, no "
                        "batch system to check"), *on_login]
    facts, asked = _ask(probe, runner)
    wanted = options.pool or cluster.partition_for("")
    pool_finding, pool = site_checks.chosen_pool(facts, wanted)
    findings = [site_checks.backend(facts, asked), site_checks.history(facts),
                site_checks.pools(facts), pool_finding, site_checks.limits(facts),
                site_checks.preemption(facts, pool), *on_login]
    if options.quick:
        findings += [Finding(c, Status.SKIPPED, "--quick: no jobs submitted")
                     for c in _NODE_CHECKS]
    elif facts.version is None:
        findings += [Finding(c, Status.SKIPPED, "the scheduler did not answer")
                     for c in _NODE_CHECKS]
    else:
        findings += _on_nodes(cluster, paths, options, runner, probe, wanted, runtime_path)
    return [*findings, _drill(options, facts, probe, wanted, pool, runner, findings)]


# A trial cannot run, or cannot resume, where one of these failed.
_DRILL_NEEDS = ("partition", "queue", "state directory", "checkpoint storage")


def _drill(options: Options, facts: SiteFacts, probe: SiteProbe, pool: str | None,
           chosen: Pool | None, runner: CommandRunner, findings: list[Finding]) -> Finding:
    """``pool``: the one asked for (None: the site's default); ``chosen``: the one found."""
    if options.drill is None:
        return drill.not_asked()
    if options.quick:
        return Finding(drill.CHECK, Status.SKIPPED, "--quick: no jobs submitted")
    if facts.version is None:
        return Finding(drill.CHECK, Status.SKIPPED, "the scheduler did not answer")
    blocking = [f.check for f in findings if f.check in _DRILL_NEEDS and f.status is Status.FAIL]
    if blocking:
        return Finding(drill.CHECK, Status.SKIPPED, f"not run: the {' and '.join(blocking)} "
                       "check failed", "change what that check says, then run the drill")
    where = chosen.name if chosen else pool
    return options.drill(lambda job: probe.preemption_command(job, facts, where), pool, runner)


def _ask(probe: SiteProbe, runner: CommandRunner) -> tuple[SiteFacts, dict[str, str]]:
    outputs, asked = {}, {}
    for name, cmd in probe.commands().items():
        try:
            result = runner.run(cmd, check=False)
        except SchedulerCommandError as e:
            asked[name] = str(e)
            continue
        if result.exit_code == 0:
            outputs[name] = result.stdout
        else:
            said = (result.stderr.strip() or "no output").splitlines()[-1]
            if name not in probe.optional:
                asked[name] = f"`{' '.join(cmd)}` exited {result.exit_code}: {said}"
    return probe.parse(outputs), asked


def _on_nodes(cluster: ClusterConfig, paths: StatePaths, options: Options,
              runner: CommandRunner, probe: SiteProbe, pool: str | None,
              runtime_path: str) -> list[Finding]:
    token = uuid.uuid4().hex[:12]
    work = private_dir(paths.root / "doctor" / token)
    storage = options.storage or paths.default_checkpoints()
    private_dir(storage, None)
    state_result, storage_result = work / "fs-state", storage / f".hpcdet-doctor-{token}"
    shutil.copyfile(NET_PROBE, work / NET_PROBE.name)
    seconds = max(10, int(options.timeout))
    jobs = [
        ProbeJob("fs", fs_script({work: state_result, storage: storage_result},
                                 cluster.container_runtime, REGISTRY), 1,
                 (state_result, storage_result)),
        ProbeJob("net", net_script(probe.on_each_node(), cluster.python or "python3",
                                   work / NET_PROBE.name, work, seconds), 2,
                 (work / "net-server.json", work / "net-client.json")),
    ]
    scheduler = make_scheduler(probe.backend, {"jobs_dir": str(paths.local_jobs())})
    prober = Prober(scheduler, probe, runner, work, pool)
    outcomes = prober.run(jobs, options.timeout)
    fs, net = outcomes["fs"], outcomes["net"]
    findings = _fs_findings(fs, options, pool, paths, work, storage, state_result,
                            storage_result, cluster, runtime_path,
                            scheduler.advice_for(fs.refused))
    findings.append(node_checks.not_run("network", net, options.timeout, pool,
                                        scheduler.advice_for(net.refused))
                    or node_checks.network(work, net))
    storage_result.unlink(missing_ok=True)
    if not failed(findings):
        shutil.rmtree(work, ignore_errors=True)
    return findings


def _fs_findings(fs: Outcome, options: Options, pool: str | None, paths: StatePaths,
                 work: Path, storage: Path, state_result: Path, storage_result: Path,
                 cluster: ClusterConfig, runtime_path: str, advice: str) -> list[Finding]:
    # A job that ended is judged by each file it wrote: one directory may be shared and the
    # other not.
    failure = None if fs.ended else node_checks.not_run("state directory", fs,
                                                        options.timeout, pool, advice)
    if failure is not None:
        return [failure,
                Finding("checkpoint storage", Status.SKIPPED, "the probe job did not run"),
                Finding("runtime on nodes", Status.SKIPPED, "the probe job did not run"),
                Finding("registry from nodes", Status.SKIPPED, "the probe job did not run")]
    database = paths.database()
    return [
        node_checks.filesystem("state directory", work, state_result, fs,
                               fstype_of(work), database),
        node_checks.filesystem("checkpoint storage", storage, storage_result, fs,
                               fstype_of(storage), database),
        node_checks.node_runtime(state_result, cluster.container_runtime, runtime_path),
        node_checks.registry(state_result, REGISTRY),
    ]


__all__ = ["DEFAULT_TIMEOUT", "Options", "diagnose"]
