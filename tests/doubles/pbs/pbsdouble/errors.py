"""Batch-request errors and their exit codes, as the OpenPBS commands print them."""

from __future__ import annotations

import sys

# ---------------------------------------------------------------------------------------------
# Errors.  Numbers: src/include/pbs_error.h.  A command exits with pbs_errno, which the OS
# truncates to 8 bits (e.g. qstat on an unknown id exits 15001 & 0xff = 153; src/cmds/qstat.c,
# src/cmds/qalter.c main(): "any_failed = pbs_errno; ... exit(any_failed)").
# Texts: the server's messages as the commands print them ("<cmd>: <text> <job id>",
# src/lib/Libcmds/prt_job_err.c).
# ---------------------------------------------------------------------------------------------
PBSE_UNKJOBID = 15001
PBSE_IVALREQ = 15004
PBSE_PERM = 15007
PBSE_UNKSIG = 15013
PBSE_BADATVAL = 15014
PBSE_MODATRRUN = 15015
PBSE_BADSTATE = 15016
PBSE_UNKQUE = 15018
PBSE_BADUSER = 15023
PBSE_UNKRESC = 15035
PBSE_UNKNODE = 15062
PBSE_MAXARRAYSIZE = 15107
PBSE_HISTJOBID = 15139

MESSAGES = {
    PBSE_UNKJOBID: "Unknown Job Id",
    PBSE_IVALREQ: "Invalid request",
    PBSE_PERM: "Unauthorized Request ",
    PBSE_UNKSIG: "Unknown/illegal signal name",
    PBSE_BADATVAL: "Illegal attribute or resource value",
    PBSE_MODATRRUN: "Cannot modify attribute while job running ",
    PBSE_BADSTATE: "Request invalid for state of job",
    PBSE_UNKQUE: "Unknown queue",
    PBSE_BADUSER: "Bad UID for job execution",
    PBSE_UNKRESC: "Unknown resource",
    # src/lib/Liblog/pbs_messages.c msg_unknode, with its trailing blank.
    PBSE_UNKNODE: "Unknown node ",
    PBSE_MAXARRAYSIZE: "Array job exceeds server or queue size limit",
    PBSE_HISTJOBID: "Job has finished",
}


class PbsError(Exception):
    """A batch-request error, printed as '<cmd>: <text> <job id>'."""

    def __init__(self, code: int, text: str | None = None) -> None:
        super().__init__(text or MESSAGES.get(code, f"Error ({code})"))
        self.code = code
        self.text = text or MESSAGES.get(code, f"Error ({code})")


class UsageError(Exception):
    """Bad command line: the caller prints the message (if any), the usage, and exits 2."""


def exit_code(code: int) -> int:
    return code & 0xFF


def eprint(*parts: object) -> None:
    print(*parts, file=sys.stderr)
