"""The PBS backend's parsers on real OpenPBS 23.06.06 output (``pbs_samples/``, verbatim).

Where the samples record a value only in words (shared/reference/openpbs-23.06/README.md:
the states and exit statuses of jobs that failed, were killed or deleted), a real sample's job
gets those values and nothing else changes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hpcdet.schedulers.pbs import PbsScheduler
from hpcdet.states import JobState

SAMPLES = Path(__file__).parent / "pbs_samples"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def transcript(name: str) -> dict[str, tuple[str, int]]:
    """A transcript's commands: what each printed (stdout and stderr as they came) and its
    exit status; a command run twice keeps its last output."""
    found = re.finditer(r"^\$ ([^\n]*)\n(.*?)\[rc=(\d+)\]", sample(name), re.MULTILINE | re.DOTALL)
    return {m.group(1): (m.group(2), int(m.group(3))) for m in found}


def documents(name: str) -> list[str]:
    """The JSON documents of a file that holds several, one after the other."""
    return [d if d.startswith("{") else "{" + d
            for d in re.split(r"(?<=\n\})\n\{", sample(name))]


def changed(text: str, job_id: str, **attrs: Any) -> str:
    """A real document with one job's attributes set (None: removed), as the README says
    the real server printed them."""
    doc = json.loads(text)
    job = doc["Jobs"][job_id]
    for key, value in attrs.items():
        if value is None:
            job.pop(key, None)
        else:
            job[key] = value
    return json.dumps(doc, indent=4)


def backend(user: str = "pbsuser") -> PbsScheduler:
    scheduler = PbsScheduler()
    scheduler.user = user
    return scheduler


# -- the per-tick query ------------------------------------------------------------------------

def test_the_status_query_lists_every_job_without_u_and_keeps_the_users() -> None:
    # `-u` with `-F json` gives 23.06's text table (README item 1): never pass it.
    scheduler = backend()
    assert scheduler.status_command(["3[0].pbshead"]) == ["qstat", "-f", "-F", "json", "-t"]
    mine = scheduler.parse_status(sample("qstat-f-json-t.json"))
    assert list(mine) == ["0.pbshead", "3[].pbshead", "3[0].pbshead", "3[1].pbshead",
                          "3[2].pbshead", "3[3].pbshead"]
    assert backend("someoneelse").parse_status(sample("qstat-f-json-t.json")) == {}


def test_another_users_jobs_in_the_answer_are_left_out() -> None:
    text = changed(sample("qstat-f-json.json"), "0.pbshead", Job_Owner="other@pbshead")
    assert list(backend().parse_status(text)) == ["3[].pbshead"]


def test_the_text_table_and_an_empty_skeleton_are_an_error_not_no_jobs() -> None:
    # `qstat -f -F json -t -u pbsuser` on 23.06.06: exit 0, the -a table, JSON without Jobs.
    with pytest.raises(ValueError, match="text table.*#2676"):
        backend().parse_status(sample("qstat-f-json-t-u.json"))


def test_the_live_answer_in_words() -> None:
    found = backend().parse_status(sample("qstat-f-json-t.json"))
    assert found["0.pbshead"].state == JobState.RUNNING  # E: exiting
    parent, running, queued = found["3[].pbshead"], found["3[0].pbshead"], found["3[1].pbshead"]
    assert (parent.state, parent.native) == (JobState.RUNNING, "B")
    assert (running.state, running.nodes, running.name) == (JobState.RUNNING, "pbshead", "arr")
    # A queued subjob has no array_id / array_index: its id says which array it is of.
    assert "array_id" not in json.loads(sample("qstat-f-json-t.json"))["Jobs"]["3[1].pbshead"]
    assert queued.state == JobState.PENDING and queued.partition == "workq"
    assert backend().array_of("3[1].pbshead") == "3[].pbshead"
    assert queued.workdir == "/home/pbsuser/work" and queued.nice == 0
    assert queued.position is None  # qorder moves jobs and arrays, not subjobs


def test_a_two_node_job_lists_both_hosts() -> None:
    running = backend().parse_status(sample("mpi2-running.json"))["17.pbshead"]
    assert (running.state, running.nodes) == (JobState.RUNNING, "pbshead+pbsn2")
    done = backend().parse_final_status(sample("mpi2-x.json"))["17.pbshead"]
    assert (done.state, done.exit_code) == (JobState.COMPLETED, 0)


# -- ids, exit statuses of qstat, no Jobs key --------------------------------------------------

def test_no_jobs_key_is_no_jobs() -> None:
    ops = transcript("ops-qdel-qalter-qorder-qmove-qhold.log")
    unknown, rc = ops["qstat -f -F json 999.pbshead"]
    assert rc == 153 and unknown.startswith("qstat: Unknown Job Id 999.pbshead\n")
    stdout = unknown.partition("\n")[2]
    scheduler = backend()
    assert scheduler.answered(rc, "qstat: Unknown Job Id 999.pbshead\n")
    assert scheduler.parse_final_status(stdout) == {}
    assert scheduler.parse_final_status(unknown) == {}  # stderr merged in: still no jobs


def test_a_finished_id_without_x_is_not_an_answer_and_history_is_asked_with_x() -> None:
    ops = transcript("ops-qdel-qalter-qorder-qmove-qhold.log")
    said, rc = ops["qstat -f 6.pbshead"]
    scheduler = backend()
    assert rc == 35 and not scheduler.answered(rc, said)
    assert "-x" in (scheduler.final_status_command(["6.pbshead"]) or [])


def test_the_found_ids_are_read_when_another_is_unknown() -> None:
    # `qstat -x -f -F json 0.pbshead 999.pbshead`: the found job's JSON, rc 153 (README).
    scheduler = backend()
    assert scheduler.answered(153, "qstat: Unknown Job Id 999.pbshead\n")
    assert list(scheduler.parse_final_status(sample("arr-sub-x.json"))) == ["3[1].pbshead"]


def test_job_4_deleted_while_running_still_shows_r_with_the_deletion_in_its_comment() -> None:
    ops = transcript("ops-qdel-qalter-qorder-qmove-qhold.log")
    out, rc = ops["qstat -f -F json"]
    job = backend().parse_status(out)["4.pbshead"]
    assert rc == 0 and job.state == JobState.RUNNING and job.priority == 100
    assert job.reason.startswith("deleted (held by pbsuser"), job.reason
    assert "terminated by" not in job.reason


# -- types -------------------------------------------------------------------------------------

def test_a_numeric_job_name_and_variable_values() -> None:
    docs = documents("vars.json")
    assert len(docs) == 5 and '"Job_Name":123,' in docs[0]
    assert backend().parse_final_status(docs[0])["12.pbshead"].name == "123"
    assert [s.name for d in docs[1:] for s in backend().parse_final_status(d).values()] == [
        "n2", "n5", "n6", "n7"]


def test_mixed_types_are_read() -> None:
    parent = backend().parse_final_status(sample("arr-parent-x.json"))["3[].pbshead"]
    attrs = json.loads(sample("arr-parent-x.json"))["Jobs"]["3[].pbshead"]
    assert attrs["array"] == "True" and attrs["Exit_status"] == 0
    assert (parent.state, parent.exit_code, parent.native) == (JobState.COMPLETED, 0, "F")
    assert parent.start is not None  # stime, a local ctime string
    sub = json.loads(sample("arr-sub-x.json"))["Jobs"]["3[1].pbshead"]
    assert sub["array_index"] == 1 and sub["resources_used"]["mem"].endswith("kb")


# -- states and exit statuses ------------------------------------------------------------------

SUB = ("arr-x-t.json", "3[1].pbshead")
RUNNING_JOB = ("mpi2-x.json", "17.pbshead")


def _final(source: tuple[str, str], **attrs: Any) -> Any:
    name, job_id = source
    return backend().parse_final_status(changed(sample(name), job_id, **attrs))[job_id]


def test_a_finished_subjob_while_its_array_runs_is_x() -> None:
    s = _final(SUB, job_state="X")
    assert (s.state, s.native, s.exit_code) == (JobState.COMPLETED, "X", 0)


@pytest.mark.parametrize(("attrs", "state", "code"), [
    ({"substate": 93, "Exit_status": 3}, JobState.FAILED, 3),  # qsub -- bash -c 'exit 3'
    ({"substate": 93, "Exit_status": 265}, JobState.FAILED, 137),  # kill -9: 256 + 9
    ({"substate": 91, "Exit_status": 271}, JobState.CANCELED, 143),  # qdel: 256 + 15
    ({"substate": 93, "Exit_status": -29}, JobState.TIMEOUT, None),  # over its walltime
    ({"substate": 91, "Exit_status": None}, JobState.CANCELED, None),  # deleted while queued
], ids=["exit-3", "kill-9", "qdel", "walltime", "deleted-queued"])
def test_how_a_job_ended(attrs: dict[str, Any], state: JobState, code: int | None) -> None:
    s = _final(RUNNING_JOB, **attrs)
    assert (s.state, s.exit_code) == (state, code)


def test_a_deleted_job_whose_script_trapped_sigterm_and_exited_0_was_canceled() -> None:
    s = _final(RUNNING_JOB, substate=91, Exit_status=0, comment=(
        "Job held by pbsuser on Sat Nov 28 05:54:14 2026 and terminated by pbsuser@pbshead"))
    assert s.state == JobState.CANCELED and s.reason.startswith("deleted")


def test_an_array_whose_last_subjob_succeeded_but_another_failed_failed() -> None:
    # Parent Exit_status 0 (the last subjob's), substate 93, "... and failed".
    s = _final(("arr-parent-x.json", "3[].pbshead"), substate=93,
               comment="Job Array Began at Sat Nov 28 at 05:53 and failed")
    assert s.state == JobState.FAILED
    canceled = _final(("arr-parent-x.json", "3[].pbshead"), substate=91, Exit_status=1,
                      comment="Job Array Began at Sat Nov 28 at 05:53 and terminated")
    assert canceled.state == JobState.CANCELED



def test_qdel_of_ended_jobs_leaves_nothing_to_cancel_but_other_refusals_count() -> None:
    ops = transcript("ops-qdel-qalter-qorder-qmove-qhold.log")
    scheduler = backend()
    for cmd in ("qdel 6.pbshead", "qdel 999.pbshead"):
        said, rc = ops[cmd]
        assert scheduler.nothing_to_cancel(rc, said), cmd
    assert not scheduler.nothing_to_cancel(
        35, "qdel: Job has finished 6.pbshead\nqdel: Request invalid for state of job 7.s\n")
    assert not scheduler.nothing_to_cancel(168, "qdel: Request invalid for state of job 7.s\n")


def test_a_job_that_can_never_run_says_so() -> None:
    # 23.06.06 accepts `qsub -l select=2:ncpus=1 -l place=scatter` on one node (exit 0) and
    # leaves it in Q with this comment.
    text = changed(sample("qstat-f-json.json"), "0.pbshead", job_state="Q", substate=10,
                   comment="Can Never Run: Not enough total nodes available")
    found = backend().parse_status(text)
    assert found["0.pbshead"].never_runs and found["0.pbshead"].state == JobState.PENDING
    assert found["0.pbshead"].reason == "can never start: Not enough total nodes available"
    assert not found["3[].pbshead"].never_runs
