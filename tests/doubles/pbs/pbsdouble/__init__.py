"""pbsdouble: a test DOUBLE of an OpenPBS 23.06 server, made of real executables.

This is not PBS.  It is a small stand-in so that hpcdet's PBS backend can be tested end to end
on a machine where no PBS server can be installed.  The executables in ``bin/`` (qsub, qstat,
qdel, qalter, qorder, qmove, qhold, qrls, qsig, qmgr, pbsnodes, pbsdsh) each call one ``*_main``
function of this package, re-exported here.  There is no long-lived server: the queue lives in
``$PBS_DOUBLE_HOME/state.json`` guarded by ``fcntl.flock`` on ``$PBS_DOUBLE_HOME/state.lock``;
every command does its own work and then a scheduling pass under that lock, and every job's
detached runner process does one more pass when its job ends.

Behaviour follows the OpenPBS man pages (doc/man1/*.1B, doc/man8/*.8B of openpbs/openpbs) and,
where the pages are silent, the OpenPBS sources (src/cmds/*.c, src/include/*.h).  Each behaviour
in the modules cites its source in a comment.  Deliberate deviations are listed in README.md.

Only the standard library is used (Python 3.9+ syntax, tested on 3.11).
"""

from .control import (
    qalter_main,
    qdel_main,
    qhold_main,
    qmove_main,
    qorder_main,
    qrls_main,
    qsig_main,
)
from .dsh import pbsdsh_main
from .query import pbsnodes_main, qmgr_main, qstat_main
from .runner import runner_main
from .submit import qsub_main

__all__ = [
    "pbsdsh_main",
    "pbsnodes_main",
    "qalter_main",
    "qdel_main",
    "qhold_main",
    "qmgr_main",
    "qmove_main",
    "qorder_main",
    "qrls_main",
    "qsig_main",
    "qstat_main",
    "qsub_main",
    "runner_main",
]
