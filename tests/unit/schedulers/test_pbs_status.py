"""PBS Pro / OpenPBS output parsers, fed literal OpenPBS 23.06 output.

``qstat -F json`` on 23.06 indents with tabs and puts a tab after each key's colon; the
fixtures keep those tabs.
"""

from __future__ import annotations

import datetime

import pytest

from hpcdet.schedulers.base import JobStatus
from hpcdet.schedulers.pbs_ids import array_id, job_number, parse_qsub_output, subjob_id
from hpcdet.schedulers.pbs_status import (
    STATE_MAP,
    exit_code,
    final_state,
    parse_qmgr_server,
    parse_qstat_json,
    parse_qstat_text,
    reason_in_words,
)
from hpcdet.states import JobState


def local(hour: int, minute: int = 0, second: int = 0) -> float:
    """Epoch seconds of 24 Nov 2026 at that local time (qstat prints local times)."""
    return datetime.datetime(2026, 11, 24, hour, minute, second).timestamp()


RUN_DIR = "/shared/runs/exp-1/trials/2/run-3"

RUNNING = """{
	"timestamp":	1795514642,
	"pbs_version":	"23.06.06",
	"pbs_server":	"pbs-head",
	"Jobs":	{
		"12.pbs-head":	{
			"Job_Name":	"hpcdet-e1-t2-r3",
			"Job_Owner":	"alice@login1",
			"resources_used":	{
				"cpupercent":	95,
				"cput":	"00:07:31",
				"mem":	"1849532kb",
				"ncpus":	8,
				"vmem":	"5327740kb",
				"walltime":	"00:04:02"
			},
			"job_state":	"R",
			"queue":	"workq",
			"server":	"pbs-head",
			"Checkpoint":	"u",
			"ctime":	"Tue Nov 24 09:59:58 2026",
			"Error_Path":	"login1:/shared/runs/exp-1/trials/2/run-3/hpcdet-e1-t2-r3.e12",
			"exec_host":	"pbs-a/0*4+pbs-b/0*4",
			"exec_vnode":	"(pbs-a:ncpus=4)+(pbs-b:ncpus=4)",
			"Hold_Types":	"n",
			"Join_Path":	"oe",
			"Keep_Files":	"n",
			"Mail_Points":	"n",
			"mtime":	"Tue Nov 24 10:00:01 2026",
			"Output_Path":	"login1:/shared/runs/exp-1/trials/2/run-3/hpcdet-e1-t2-r3.o12",
			"Priority":	0,
			"qtime":	"Tue Nov 24 09:59:58 2026",
			"Rerunable":	"False",
			"Resource_List":	{
				"ncpus":	8,
				"nodect":	2,
				"place":	"scatter",
				"select":	"2:ncpus=4",
				"walltime":	"01:00:00"
			},
			"stime":	"Tue Nov 24 10:00:00 2026",
			"session_id":	48213,
			"jobdir":	"/home/alice",
			"substate":	42,
			"Variable_List":	{
				"PBS_O_HOME":	"/home/alice",
				"PBS_O_LANG":	"C.UTF-8",
				"PBS_O_LOGNAME":	"alice",
				"PBS_O_PATH":	"/usr/local/bin:/usr/bin:/bin:/opt/pbs/bin",
				"PBS_O_MAIL":	"/var/mail/alice",
				"PBS_O_SHELL":	"/bin/bash",
				"PBS_O_WORKDIR":	"/shared/runs/exp-1/trials/2/run-3",
				"PBS_O_SYSTEM":	"Linux",
				"PBS_O_QUEUE":	"workq",
				"PBS_O_HOST":	"login1"
			},
			"comment":	"Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4)+(pbs-b:ncpus=4)",
			"etime":	"Tue Nov 24 09:59:58 2026",
			"run_count":	1,
			"eligible_time":	"00:00:02",
			"Submit_arguments":	"/shared/runs/exp-1/trials/2/run-3/job.pbs",
			"project":	"_pbs_project_default",
			"Submit_Host":	"login1"
		}
	}
}
"""

RUNNING_STATUS = JobStatus(
    state=JobState.RUNNING,
    reason="Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4)+(pbs-b:ncpus=4)",
    native="R", exit_code=None, nodes="pbs-a+pbs-b", name="hpcdet-e1-t2-r3", priority=0,
    partition="workq", start=local(10), workdir=RUN_DIR, used_seconds=242, used_cpus=8,
)

# qsub -J 0-3 %4: subjob 0 done, 1 running, 2 waiting, 3 failed.
ARRAY = """{
	"timestamp":	1795515000,
	"pbs_version":	"23.06.06",
	"pbs_server":	"pbs-head",
	"Jobs":	{
		"20[].pbs-head":	{
			"Job_Name":	"hpcdet-e4-array0",
			"Job_Owner":	"alice@login1",
			"job_state":	"B",
			"queue":	"workq",
			"server":	"pbs-head",
			"Checkpoint":	"u",
			"ctime":	"Tue Nov 24 09:59:40 2026",
			"Hold_Types":	"n",
			"Join_Path":	"oe",
			"Priority":	0,
			"Rerunable":	"True",
			"Resource_List":	{
				"ncpus":	4,
				"nodect":	1,
				"place":	"pack",
				"select":	"1:ncpus=4",
				"walltime":	"00:30:00"
			},
			"stime":	"Tue Nov 24 09:59:41 2026",
			"substate":	70,
			"Variable_List":	{
				"PBS_O_HOME":	"/home/alice",
				"PBS_O_WORKDIR":	"/shared/runs/exp-4/array",
				"PBS_O_QUEUE":	"workq",
				"PBS_O_HOST":	"login1"
			},
			"comment":	"Job Array Began at Tue Nov 24 at 09:59",
			"etime":	"Tue Nov 24 09:59:40 2026",
			"Submit_arguments":	"-J 0-3%4 /shared/runs/exp-4/array/job.pbs",
			"array":	"True",
			"array_state_count":	"Queued:1 Running:1 Exiting:0 Expired:2 ",
			"array_indices_submitted":	"0-3",
			"array_indices_remaining":	"2",
			"max_run_subjobs":	4,
			"project":	"_pbs_project_default",
			"Submit_Host":	"login1"
		},
		"20[0].pbs-head":	{
			"Job_Name":	"hpcdet-e4-array0",
			"job_state":	"X",
			"queue":	"workq",
			"exec_host":	"pbs-a/0*4",
			"Priority":	0,
			"stime":	"Tue Nov 24 09:59:41 2026",
			"substate":	92,
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-4/array",
				"PBS_ARRAY_INDEX":	0,
				"PBS_ARRAY_ID":	"20[].pbs-head"
			},
			"comment":	"Job run at Tue Nov 24 at 09:59 on (pbs-a:ncpus=4) and finished",
			"Exit_status":	0,
			"array_id":	"20[].pbs-head",
			"array_index":	0
		},
		"20[1].pbs-head":	{
			"Job_Name":	"hpcdet-e4-array0",
			"job_state":	"R",
			"queue":	"workq",
			"exec_host":	"pbs-b/0*4",
			"Priority":	0,
			"stime":	"Tue Nov 24 10:00:07 2026",
			"substate":	42,
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-4/array",
				"PBS_ARRAY_INDEX":	1,
				"PBS_ARRAY_ID":	"20[].pbs-head"
			},
			"comment":	"Job run at Tue Nov 24 at 10:00 on (pbs-b:ncpus=4)",
			"array_id":	"20[].pbs-head",
			"array_index":	1
		},
		"20[2].pbs-head":	{
			"Job_Name":	"hpcdet-e4-array0",
			"job_state":	"Q",
			"queue":	"workq",
			"Priority":	0,
			"substate":	10,
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-4/array"
			},
			"comment":	"Not Running: Insufficient amount of resource: ncpus (R: 4 A: 0 T: 8)",
			"array_id":	"20[].pbs-head",
			"array_index":	2,
			"estimated":	{
				"exec_vnode":	"(pbs-a:ncpus=4)",
				"start_time":	"Tue Nov 24 10:29:41 2026"
			}
		},
		"20[3].pbs-head":	{
			"Job_Name":	"hpcdet-e4-array0",
			"job_state":	"X",
			"queue":	"workq",
			"exec_host":	"pbs-b/0*4",
			"Priority":	0,
			"stime":	"Tue Nov 24 09:59:41 2026",
			"substate":	93,
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-4/array"
			},
			"comment":	"Job run at Tue Nov 24 at 09:59 on (pbs-b:ncpus=4) and failed",
			"Exit_status":	1,
			"array_id":	"20[].pbs-head",
			"array_index":	3
		}
	}
}
"""

# qstat -x: finished with 0, deleted while running (qdel: SIGTERM, 256 + 15), killed at its
# walltime, and deleted before it ran (no Exit_status at all).
FINISHED = """{
	"timestamp":	1795518000,
	"pbs_version":	"23.06.06",
	"pbs_server":	"pbs-head",
	"Jobs":	{
		"13.pbs-head":	{
			"Job_Name":	"hpcdet-e1-t3-r1",
			"resources_used":	{
				"walltime":	"00:12:40"
			},
			"job_state":	"F",
			"queue":	"workq",
			"exec_host":	"pbs-a/1*4",
			"Priority":	0,
			"Resource_List":	{
				"walltime":	"01:00:00"
			},
			"stime":	"Tue Nov 24 10:00:00 2026",
			"obittime":	"Tue Nov 24 10:12:40 2026",
			"substate":	92,
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-1/trials/3/run-1"
			},
			"comment":	"Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4) and finished",
			"run_count":	1,
			"Exit_status":	0,
			"history_timestamp":	1795515160
		},
		"14.pbs-head":	{
			"Job_Name":	"hpcdet-e1-t4-r1",
			"resources_used":	{
				"walltime":	"00:20:03"
			},
			"job_state":	"F",
			"queue":	"workq",
			"exec_host":	"pbs-b/1*4",
			"Priority":	0,
			"Resource_List":	{
				"walltime":	"01:00:00"
			},
			"stime":	"Tue Nov 24 10:00:00 2026",
			"substate":	91,
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-1/trials/4/run-1"
			},
			"comment":	"Job run at Tue Nov 24 at 10:00 on (pbs-b:ncpus=4) and terminated",
			"run_count":	1,
			"Exit_status":	271,
			"history_timestamp":	1795515603
		},
		"15.pbs-head":	{
			"Job_Name":	"hpcdet-e1-t5-r1",
			"resources_used":	{
				"walltime":	"01:00:07"
			},
			"job_state":	"F",
			"queue":	"workq",
			"exec_host":	"pbs-a/2*4",
			"Priority":	0,
			"Resource_List":	{
				"walltime":	"01:00:00"
			},
			"stime":	"Tue Nov 24 10:00:00 2026",
			"substate":	93,
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-1/trials/5/run-1"
			},
			"comment":	"Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4) and failed",
			"run_count":	1,
			"Exit_status":	-29,
			"history_timestamp":	1795518007
		},
		"16.pbs-head":	{
			"Job_Name":	"hpcdet-e1-t6-r1",
			"job_state":	"F",
			"queue":	"workq",
			"Priority":	0,
			"substate":	91,
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-1/trials/6/run-1"
			},
			"comment":	"Not Running: Insufficient amount of resource: ncpus  and terminated",
			"history_timestamp":	1795514700
		}
	}
}
"""

# Held with qhold; queued forever (asks for more than the complex has); queued behind others.
# Job 19 lists "comment" twice: the last one counts.
WAITING = """{
	"timestamp":	1795514800,
	"pbs_version":	"23.06.06",
	"pbs_server":	"pbs-head",
	"Jobs":	{
		"17.pbs-head":	{
			"Job_Name":	"hpcdet-e2-t1-r1",
			"job_state":	"H",
			"queue":	"workq",
			"Hold_Types":	"u",
			"Priority":	-5,
			"substate":	20,
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-2/trials/1/run-1"
			},
			"comment":	"Job held by alice on Tue Nov 24 10:05:12 2026"
		},
		"18.pbs-head":	{
			"Job_Name":	"hpcdet-e2-t2-r1",
			"job_state":	"Q",
			"queue":	"gpu",
			"Hold_Types":	"n",
			"Priority":	0,
			"substate":	10,
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-2/trials/2/run-1"
			},
			"comment":	"Can Never Run: Insufficient amount of resource: ngpus (R: 8 A: 4 T: 4)"
		},
		"19.pbs-head":	{
			"Job_Name":	"hpcdet-e2-t3-r1",
			"job_state":	"Q",
			"queue":	"workq",
			"Hold_Types":	"n",
			"Priority":	10,
			"substate":	10,
			"comment":	"Not Running: Not enough free nodes available",
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-2/trials/3/run-1"
			},
			"comment":	"Not Running: Insufficient amount of resource: ncpus (R: 8 A: 4 T: 32)",
			"estimated":	{
				"exec_vnode":	"(pbs-a:ncpus=4)+(pbs-b:ncpus=4)",
				"start_time":	"Tue Nov 24 11:00:00 2026"
			}
		}
	}
}
"""

# openpbs #1255 / PR #2603: qsub -v SEED=005,RATIO=.5 prints those values as bare, invalid
# JSON numbers, so the whole document fails json.loads.
UNQUOTED_NUMBERS = """{
	"timestamp":	1795514642,
	"pbs_version":	"23.06.06",
	"pbs_server":	"pbs-head",
	"Jobs":	{
		"21.pbs-head":	{
			"Job_Name":	"hpcdet-e3-t1-r1",
			"job_state":	"R",
			"queue":	"workq",
			"exec_host":	"pbs-a/0*4",
			"Priority":	0,
			"stime":	"Tue Nov 24 10:00:00 2026",
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-3/trials/1/run-1",
				"SEED":	005,
				"RATIO":	.5,
				"PBS_O_HOST":	"login1"
			},
			"comment":	"Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4)"
		},
		"22.pbs-head":	{
			"Job_Name":	"hpcdet-e3-t2-r1",
			"job_state":	"Q",
			"queue":	"workq",
			"Priority":	0,
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-3/trials/2/run-1",
				"SEED":	007
			},
			"comment":	"Not Running: Insufficient amount of resource: ncpus (R: 4 A: 0 T: 8)"
		}
	}
}
"""

# PR #2675: with -u/-a/-n, 23.06 prints its table before the JSON; a merged stderr follows.
PLAINTEXT_AROUND = """
pbs-head:
                                                            Req'd  Req'd   Elap
Job ID          Username Queue    Jobname    SessID NDS TSK Memory Time  S Time
--------------- -------- -------- ---------- ------ --- --- ------ ----- - -----
12.pbs-head     alice    workq    hpcdet-e1-  48213   2   8    --  01:00 R 00:04
""" + RUNNING + "qstat: Unknown Job Id 99.pbs-head\n"

# PR #2049: Variable_List values came out with \, and \' escapes that JSON does not allow,
# and #2541: a raw newline and tab from a bash function passed with qsub -V.
BAD_ESCAPES = r"""{
	"timestamp":	1795514642,
	"pbs_version":	"23.06.06",
	"pbs_server":	"pbs-head",
	"Jobs":	{
		"23.pbs-head":	{
			"Job_Name":	"hpcdet-e5-t1-r1",
			"job_state":	"R",
			"queue":	"workq",
			"exec_host":	"pbs-c/0*2",
			"Priority":	0,
			"stime":	"Tue Nov 24 10:00:00 2026",
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-5/trials/1/run-1",
				"MYVAR":	"ab\,c",
				"QUOTED":	"\'x\'",
				"BASH_FUNC_hello%%":	"() {  echo hello
	}"
			},
			"comment":	"Job run at Tue Nov 24 at 10:00 on (pbs-c:ncpus=2)"
		}
	}
}
"""

# #2541 beyond repair: a qsub -V bash function whose quotes end its string early. Each job is
# then read from its own text; job 31 lists "comment" twice and the last one counts.
BROKEN = """{
	"timestamp":	1795514642,
	"pbs_version":	"23.06.06",
	"pbs_server":	"pbs-head",
	"Jobs":	{
		"30.pbs-head":	{
			"Job_Name":	"hpcdet-e6-t1-r1",
			"job_state":	"R",
			"queue":	"workq",
			"exec_host":	"pbs-c/0*2",
			"Priority":	0,
			"stime":	"Tue Nov 24 10:00:00 2026",
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-6/trials/1/run-1",
				"BASH_FUNC_ml%%":	"() {  eval "$($LMOD_DIR/ml_cmd "$@")", true
}",
				"PBS_O_HOST":	"login1"
			},
			"comment":	"Job run at Tue Nov 24 at 10:00 on (pbs-c:ncpus=2)"
		},
		"31.pbs-head":	{
			"Job_Name":	"hpcdet-e6-t2-r1",
			"job_state":	"F",
			"queue":	"workq",
			"exec_host":	"pbs-a/3*2",
			"Priority":	0,
			"stime":	"Tue Nov 24 10:00:00 2026",
			"substate":	93,
			"comment":	"Not Running: Not enough free nodes available",
			"Variable_List":	{
				"PBS_O_WORKDIR":	"/shared/runs/exp-6/trials/2/run-1"
			},
			"comment":	"Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=2) and failed",
			"Exit_status":	2
		}
	}
}
"""

# Plain qstat -f -x: long values go on over lines that start with a tab.
TEXT = """Job Id: 12.pbs-head
    Job_Name = hpcdet-e1-t2-r3
    Job_Owner = alice@login1
    resources_used.cpupercent = 95
    resources_used.cput = 00:07:31
    resources_used.mem = 1849532kb
    resources_used.ncpus = 8
    resources_used.vmem = 5327740kb
    resources_used.walltime = 00:04:02
    job_state = R
    queue = workq
    server = pbs-head
    Checkpoint = u
    ctime = Tue Nov 24 09:59:58 2026
    Error_Path = login1:/shared/runs/exp-1/trials/2/run-3/hpcdet-e1-t2-r3.e12
    exec_host = pbs-a/0*4+pbs-b/0*4
    exec_vnode = (pbs-a:ncpus=4)+(pbs-b:ncpus=4)
    Hold_Types = n
    Join_Path = oe
    Keep_Files = n
    Mail_Points = n
    mtime = Tue Nov 24 10:00:01 2026
    Output_Path = login1:/shared/runs/exp-1/trials/2/run-3/hpcdet-e1-t2-r3.o12
    Priority = 0
    qtime = Tue Nov 24 09:59:58 2026
    Rerunable = False
    Resource_List.ncpus = 8
    Resource_List.nodect = 2
    Resource_List.place = scatter
    Resource_List.select = 2:ncpus=4
    Resource_List.walltime = 01:00:00
    stime = Tue Nov 24 10:00:00 2026
    session_id = 48213
    jobdir = /home/alice
    substate = 42
    Variable_List = PBS_O_HOME=/home/alice,PBS_O_LANG=C.UTF-8,
	PBS_O_LOGNAME=alice,PBS_O_PATH=/usr/local/bin:/usr/bin:/bin:/opt/pbs/bin,
	PBS_O_MAIL=/var/mail/alice,PBS_O_SHELL=/bin/bash,
	PBS_O_WORKDIR=/shared/runs/exp-1/trials/2/run-3,PBS_O_SYSTEM=Linux,
	PBS_O_QUEUE=workq,PBS_O_HOST=login1,HPCDET_TAGS=a\\,b
    comment = Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4)+(pbs-b:ncpus=4)
    etime = Tue Nov 24 09:59:58 2026
    run_count = 1
    eligible_time = 00:00:02
    Submit_arguments = /shared/runs/exp-1/trials/2/run-3/job.pbs
    project = _pbs_project_default
    Submit_Host = login1

Job Id: 14.pbs-head
    Job_Name = hpcdet-e1-t4-r1
    resources_used.walltime = 00:20:03
    job_state = F
    queue = workq
    exec_host = pbs-b/1*4
    Priority = 0
    Resource_List.walltime = 01:00:00
    stime = Tue Nov 24 10:00:00 2026
    substate = 91
    Variable_List = PBS_O_WORKDIR=/shared/runs/exp-1/trials/4/run-1
    comment = Job run at Tue Nov 24 at 10:00 on (pbs-b:ncpus=4) and terminated
    run_count = 1
    Exit_status = 271

"""


def test_running_job() -> None:
    assert parse_qstat_json(RUNNING) == {"12.pbs-head": RUNNING_STATUS}


def test_array_parent_and_subjobs() -> None:
    jobs = parse_qstat_json(ARRAY)
    assert list(jobs) == ["20[].pbs-head", "20[0].pbs-head", "20[1].pbs-head",
                          "20[2].pbs-head", "20[3].pbs-head"]
    common = {"name": "hpcdet-e4-array0", "priority": 0, "partition": "workq",
              "workdir": "/shared/runs/exp-4/array"}
    assert jobs["20[].pbs-head"] == JobStatus(
        state=JobState.RUNNING, reason="Job Array Began at Tue Nov 24 at 09:59", native="B",
        start=local(9, 59, 41), used_cpus=4, **common)
    assert jobs["20[0].pbs-head"] == JobStatus(
        state=JobState.COMPLETED,
        reason="Job run at Tue Nov 24 at 09:59 on (pbs-a:ncpus=4) and finished", native="X",
        exit_code=0, nodes="pbs-a", start=local(9, 59, 41), **common)
    assert jobs["20[1].pbs-head"] == JobStatus(
        state=JobState.RUNNING, reason="Job run at Tue Nov 24 at 10:00 on (pbs-b:ncpus=4)",
        native="R", nodes="pbs-b", start=local(10, 0, 7), **common)
    assert jobs["20[2].pbs-head"] == JobStatus(
        state=JobState.PENDING,
        reason="waiting for nodes or CPUs/GPUs to become free"
               " (Insufficient amount of resource: ncpus (R: 4 A: 0 T: 8))",
        native="Q", start=local(10, 29, 41), **common)
    assert jobs["20[3].pbs-head"] == JobStatus(
        state=JobState.FAILED,
        reason="Job run at Tue Nov 24 at 09:59 on (pbs-b:ncpus=4) and failed", native="X",
        exit_code=1, nodes="pbs-b", start=local(9, 59, 41), **common)


def test_finished_jobs() -> None:
    jobs = parse_qstat_json(FINISHED)
    assert jobs["13.pbs-head"] == JobStatus(
        state=JobState.COMPLETED,
        reason="Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4) and finished", native="F",
        exit_code=0, nodes="pbs-a", name="hpcdet-e1-t3-r1", priority=0, partition="workq",
        start=local(10), workdir="/shared/runs/exp-1/trials/3/run-1", used_seconds=760)
    assert jobs["14.pbs-head"] == JobStatus(
        state=JobState.CANCELED,
        reason="deleted (Job run at Tue Nov 24 at 10:00 on (pbs-b:ncpus=4))", native="F",
        exit_code=143, nodes="pbs-b", name="hpcdet-e1-t4-r1", priority=0, partition="workq",
        start=local(10), workdir="/shared/runs/exp-1/trials/4/run-1", used_seconds=1203)
    assert jobs["15.pbs-head"] == JobStatus(
        state=JobState.TIMEOUT,
        reason="Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4) and failed; exit status -29"
               " (JOB_EXEC_KILL_WALLTIME: killed: it exceeded its walltime)",
        native="F", exit_code=None, nodes="pbs-a", name="hpcdet-e1-t5-r1", priority=0,
        partition="workq", start=local(10), workdir="/shared/runs/exp-1/trials/5/run-1",
        used_seconds=3607)
    assert jobs["16.pbs-head"] == JobStatus(
        state=JobState.CANCELED,
        reason="deleted (waiting for nodes or CPUs/GPUs to become free"
               " (Insufficient amount of resource: ncpus))",
        native="F", exit_code=None, name="hpcdet-e1-t6-r1", priority=0, partition="workq",
        workdir="/shared/runs/exp-1/trials/6/run-1")


def test_held_and_queued_jobs() -> None:
    jobs = parse_qstat_json(WAITING)
    assert jobs["17.pbs-head"] == JobStatus(
        state=JobState.PENDING,
        reason="held by alice since Tue Nov 24 10:05:12 2026 (release it with qrls)",
        native="H", name="hpcdet-e2-t1-r1", priority=-5, partition="workq",
        workdir="/shared/runs/exp-2/trials/1/run-1")
    assert jobs["18.pbs-head"] == JobStatus(
        state=JobState.PENDING,
        reason="can never start: Insufficient amount of resource: ngpus (R: 8 A: 4 T: 4)",
        native="Q", name="hpcdet-e2-t2-r1", priority=0, partition="gpu",
        workdir="/shared/runs/exp-2/trials/2/run-1", never_runs=True)
    assert jobs["19.pbs-head"] == JobStatus(
        state=JobState.PENDING,
        reason="waiting for nodes or CPUs/GPUs to become free"
               " (Insufficient amount of resource: ncpus (R: 8 A: 4 T: 32))",
        native="Q", name="hpcdet-e2-t3-r1", priority=10, partition="workq", start=local(11),
        workdir="/shared/runs/exp-2/trials/3/run-1")


def test_unquoted_numbers_do_not_lose_any_job() -> None:
    jobs = parse_qstat_json(UNQUOTED_NUMBERS)
    assert jobs == {
        "21.pbs-head": JobStatus(
            state=JobState.RUNNING, reason="Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4)",
            native="R", nodes="pbs-a", name="hpcdet-e3-t1-r1", priority=0, partition="workq",
            start=local(10), workdir="/shared/runs/exp-3/trials/1/run-1"),
        "22.pbs-head": JobStatus(
            state=JobState.PENDING,
            reason="waiting for nodes or CPUs/GPUs to become free"
                   " (Insufficient amount of resource: ncpus (R: 4 A: 0 T: 8))",
            native="Q", name="hpcdet-e3-t2-r1", priority=0, partition="workq",
            workdir="/shared/runs/exp-3/trials/2/run-1"),
    }


def test_plaintext_around_the_json() -> None:
    assert parse_qstat_json(PLAINTEXT_AROUND) == {"12.pbs-head": RUNNING_STATUS}


def test_invalid_escapes_and_raw_newlines() -> None:
    assert parse_qstat_json(BAD_ESCAPES) == {"23.pbs-head": JobStatus(
        state=JobState.RUNNING, reason="Job run at Tue Nov 24 at 10:00 on (pbs-c:ncpus=2)",
        native="R", nodes="pbs-c", name="hpcdet-e5-t1-r1", priority=0, partition="workq",
        start=local(10), workdir="/shared/runs/exp-5/trials/1/run-1")}


def test_unrepairable_json_is_read_job_by_job() -> None:
    jobs = parse_qstat_json(BROKEN)
    assert jobs == {
        "30.pbs-head": JobStatus(
            state=JobState.RUNNING, reason="Job run at Tue Nov 24 at 10:00 on (pbs-c:ncpus=2)",
            native="R", nodes="pbs-c", name="hpcdet-e6-t1-r1", priority=0, partition="workq",
            start=local(10), workdir="/shared/runs/exp-6/trials/1/run-1"),
        "31.pbs-head": JobStatus(
            state=JobState.FAILED,
            reason="Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=2) and failed", native="F",
            exit_code=2, nodes="pbs-a", name="hpcdet-e6-t2-r1", priority=0, partition="workq",
            start=local(10), workdir="/shared/runs/exp-6/trials/2/run-1"),
    }


def test_a_job_without_a_readable_state_is_unknown() -> None:
    text = BROKEN.replace('"job_state":\t"R"', '"job_state":\tR"')
    assert parse_qstat_json(text)["30.pbs-head"].state == JobState.UNKNOWN
    assert parse_qstat_json(text)["31.pbs-head"].state == JobState.FAILED


@pytest.mark.parametrize("fixture", [RUNNING, ARRAY, BROKEN, TEXT])
def test_cut_off_output_raises_nothing_but_value_error(fixture: str) -> None:
    for end in range(0, len(fixture), 23):
        for parse in (parse_qstat_json, parse_qstat_text):
            try:
                parse(fixture[:end])
            except ValueError:
                pass


def test_no_jobs_and_unreadable_output() -> None:
    assert parse_qstat_json("") == {}
    assert parse_qstat_json(
        '{\n\t"timestamp":\t1795514642,\n\t"pbs_version":\t"23.06.06",\n'
        '\t"pbs_server":\t"pbs-head"\n}\n') == {}
    with pytest.raises(ValueError, match="qstat: cannot connect to server pbs-head"):
        parse_qstat_json("qstat: cannot connect to server pbs-head (errno=111)\n")
    with pytest.raises(ValueError) as raised:
        parse_qstat_json("x" * 500)
    assert "x" * 200 in str(raised.value) and "x" * 201 not in str(raised.value)


def test_plain_text_fallback() -> None:
    jobs = parse_qstat_text(TEXT)
    assert jobs["12.pbs-head"] == RUNNING_STATUS
    assert jobs["14.pbs-head"] == JobStatus(
        state=JobState.CANCELED,
        reason="deleted (Job run at Tue Nov 24 at 10:00 on (pbs-b:ncpus=4))", native="F",
        exit_code=143, nodes="pbs-b", name="hpcdet-e1-t4-r1", priority=0, partition="workq",
        start=local(10), workdir="/shared/runs/exp-1/trials/4/run-1", used_seconds=1203)
    assert parse_qstat_text("") == {}
    with pytest.raises(ValueError, match="qstat: Unknown Job Id"):
        parse_qstat_text("qstat: Unknown Job Id 99.pbs-head\n")


def test_state_map_covers_every_state_letter() -> None:
    assert sorted(STATE_MAP) == list("BEFHMQRSTUWX")
    assert STATE_MAP["F"] is None and STATE_MAP["X"] is None
    assert {k for k, v in STATE_MAP.items() if v == JobState.RUNNING} == set("BERSU")


@pytest.mark.parametrize(("exit_status", "comment", "substate", "expected"), [
    (0, "Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4) and finished", 92,
     JobState.COMPLETED),
    (-29, "", 93, JobState.TIMEOUT),
    (-27, "", 93, JobState.FAILED),
    (-11, "", 93, JobState.NODE_FAIL),
    (-20, "", 93, JobState.NODE_FAIL),
    (-3, "", 93, JobState.NODE_FAIL),
    (-12, "", 93, JobState.PREEMPTED),
    (-1, "", 93, JobState.FAILED),
    (-99, "", 93, JobState.FAILED),
    (271, "Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4) and terminated", None,
     JobState.CANCELED),
    (271, "Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4) and failed", 91,
     JobState.CANCELED),
    (271, "Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4) and failed", 93,
     JobState.FAILED),
    (143, "Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4) and terminated", 91,
     JobState.CANCELED),
    (1, "Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4) and failed", 93, JobState.FAILED),
    (None, "Not Running: Insufficient amount of resource: ncpus  and terminated", None,
     JobState.CANCELED),
    (None, "", None, JobState.FAILED),
])
def test_final_state(exit_status: int | None, comment: str, substate: int | None,
                     expected: JobState) -> None:
    assert final_state(exit_status, comment, substate=substate) == expected


def test_a_signal_at_the_walltime_is_a_timeout_on_older_servers() -> None:
    assert final_state(271, "", over_walltime=True) == JobState.TIMEOUT
    assert final_state(271, "x and terminated", over_walltime=True) == JobState.CANCELED
    assert final_state(1, "", over_walltime=True) == JobState.FAILED
    text = FINISHED.replace('"Exit_status":\t-29', '"Exit_status":\t271')
    assert parse_qstat_json(text)["15.pbs-head"].state == JobState.TIMEOUT


@pytest.mark.parametrize(("exit_status", "expected"), [
    (0, 0), (1, 1), (143, 143), (271, 143), (265, 137), (-29, None), (None, None), (256, None),
])
def test_exit_code(exit_status: int | None, expected: int | None) -> None:
    assert exit_code(exit_status) == expected


@pytest.mark.parametrize(("comment", "words"), [
    ("", ""),
    ("Can Never Run: Job exceeds queue and/or server resource limits",
     "can never start: Job exceeds queue and/or server resource limits"),
    ("Not Running: Insufficient amount of resource: ncpus ",
     "waiting for nodes or CPUs/GPUs to become free (Insufficient amount of resource: ncpus)"),
    ("Not Running: Node is in an ineligible state: offline",
     "waiting: the nodes it needs are down or offline"
     " (Node is in an ineligible state: offline)"),
    ("Not Running: User has reached queue workq running job limit.",
     "waiting: a limit is reached (User has reached queue workq running job limit.)"),
    ("Not Running: Something new", "waiting: Something new"),
    ("Job held by bob on Tue Nov 24 10:05:12 2026",
     "held by bob since Tue Nov 24 10:05:12 2026 (release it with qrls)"),
    ("job held, too many failed attempts to run",
     "held: PBS failed to start it too many times (an administrator must release it)"),
    ("  Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4)  ",
     "Job run at Tue Nov 24 at 10:00 on (pbs-a:ncpus=4)"),
])
def test_reason_in_words(comment: str, words: str) -> None:
    assert reason_in_words(comment) == words


def test_held_without_a_comment_says_which_hold() -> None:
    text = WAITING.replace('"Job held by alice on Tue Nov 24 10:05:12 2026"', '""')
    assert parse_qstat_json(text)["17.pbs-head"].reason == "held by you (release it with qrls)"


def test_job_ids() -> None:
    assert job_number("12[3].pbs-head") == "12"
    assert job_number("12.pbs-head") == "12"
    assert array_id("12[3].pbs-head") == "12[].pbs-head"
    assert array_id("12[].pbs-head") == "12[].pbs-head"
    assert array_id("12.pbs-head") == "12.pbs-head"
    assert subjob_id("12[].pbs-head", 3) == "12[3].pbs-head"
    with pytest.raises(ValueError):
        job_number("pbs-head")
    with pytest.raises(ValueError):
        subjob_id("12[].pbs-head", -1)


def test_qsub_output() -> None:
    assert parse_qsub_output("12.pbs-head\n") == "12.pbs-head"
    assert parse_qsub_output("20[].pbs-head\n") == "20[].pbs-head"
    with pytest.raises(ValueError, match='"qsub: Unknown queue"'):
        parse_qsub_output("qsub: Unknown queue\n")
    with pytest.raises(ValueError):
        parse_qsub_output("")


QMGR = """Server pbs-head
	server_state = Active
	server_host = pbs-head
	scheduling = True
	total_jobs = 3
	state_count = Transit:0 Queued:1 Held:0 Waiting:0 Running:2 Exiting:0 Begun:0
	default_queue = workq
	log_events = 511
	mail_from = adm
	query_other_jobs = True
	resources_default.ncpus = 1
	default_chunk.ncpus = 1
	resources_assigned.ncpus = 8
	resources_assigned.nodect = 2
	scheduler_iteration = 600
	flatuid = True
	resv_enable = True
	node_fail_requeue = 310
	max_array_size = 10000
	pbs_license_min = 0
	pbs_license_max = 2147483647
	pbs_license_linger_time = 31536000
	license_count = Avail_Global:10000000 Avail_Local:10000000 Used:0 High_Use:0
	pbs_version = 23.06.06
	eligible_time_enable = False
	job_history_enable = True
	max_concurrent_provision = 5
	max_job_sequence_id = 9999999
"""


def test_qmgr_server() -> None:
    server = parse_qmgr_server(QMGR)
    assert server["name"] == "pbs-head"
    assert server["default_queue"] == "workq"
    assert server["job_history_enable"] == "True"
    assert server["max_array_size"] == "10000"
    assert server["resources_default.ncpus"] == "1"
    assert server["state_count"] == (
        "Transit:0 Queued:1 Held:0 Waiting:0 Running:2 Exiting:0 Begun:0")
    assert len(server) == 28


# #2677: several max_queued restrictions print as duplicate keys.
