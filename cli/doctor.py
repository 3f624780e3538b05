"""`hpcdet doctor`: a preflight of the cluster, each finding with what to change."""

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from hpcdet.cli.common import console, paths, table


def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="The findings as JSON, for scripts.")]
    = False,
    quick: Annotated[bool, typer.Option(
        "--quick", help="Ask the scheduler only: submit no probe jobs.")] = False,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=1, help="Seconds the probe jobs get, all together; what has not "
        "finished by then is canceled.")] = 120.0,
    partition: Annotated[Optional[str], typer.Option(
        "--partition", help="The partition (PBS: queue) to check and send the probe jobs to "
        "(default: the cluster file's default_pool, else the site's default).")] = None,
    storage: Annotated[Optional[Path], typer.Option(
        "--storage", help="The checkpoint storage to check (default: <state>/checkpoints).")]
    = None,
    preemption: Annotated[bool, typer.Option(
        "--preemption", help="Also run the preemption drill: a one-trial experiment (label "
        "hpcdet-doctor) through your daemon, sent the site's preemption signal after its "
        "first checkpoint; it must checkpoint, stop and resume.")] = False,
    drill_timeout: Annotated[float, typer.Option(
        "--drill-timeout", min=10, help="Seconds the preemption drill gets; its experiment "
        "is killed if it has not ended by then.")] = 180.0,
) -> None:
    """Check that this cluster can run hpcdet's experiments: the batch system, its partitions,
    limits and preemption, the container runtime, the shared filesystem and the network seen
    from compute nodes; with --preemption, that a trial checkpoints and resumes when the site
    preempts its job. Exit code 1 when a check fails."""
    from hpcdet.views.doctor import any_failed, doctor_findings

    p = paths()
    link = None
    if preemption:
        from hpcdet.link import connect

        link = connect(p)
    findings = doctor_findings(p, quick, timeout, partition,
                               storage.absolute() if storage else None, link, drill_timeout)
    if as_json:
        print(json.dumps({"ok": not any_failed(findings),
                          "findings": [f.as_json() for f in findings]}, indent=2))
    else:
        table(["Check", "Status", "Seen", "What to change"],
              [[f.check, f.status.value, f.seen, f.change] for f in findings],
              title="hpcdet doctor")
        bad = sum(f.status.value == "fail" for f in findings)
        console.print(f"{bad} check(s) failed" if bad else "no check failed")
    if any_failed(findings):
        raise typer.Exit(1)
