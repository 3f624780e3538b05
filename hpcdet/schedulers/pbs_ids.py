"""PBS job ids (``12.server``, arrays ``12[].server``, subjobs ``12[3].server``) and qsub's
answer, read and built by pure functions."""

from __future__ import annotations

import re

_ID_PARTS = re.compile(r"(\d+)(\[\d*\])?((?:\.\S*)?)")


def _id_parts(job_id: str) -> re.Match[str]:
    match = _ID_PARTS.fullmatch(job_id.strip())
    if match is None:
        raise ValueError(f"not a PBS job id: {job_id!r}")
    return match


def job_number(job_id: str) -> str:
    """``12[3].server`` -> ``12``.

    Raises:
        ValueError: not a PBS job id.
    """
    return _id_parts(job_id).group(1)


def array_id(job_id: str) -> str:
    """The array a subjob belongs to: ``12[3].server`` -> ``12[].server``; other ids unchanged.

    Raises:
        ValueError: not a PBS job id.
    """
    parts = _id_parts(job_id)
    return f"{parts.group(1)}[]{parts.group(3)}" if parts.group(2) else job_id.strip()


def subjob_id(array_job_id: str, index: int) -> str:
    """Subjob ``index`` of an array: ``12[].server``, 3 -> ``12[3].server``.

    Raises:
        ValueError: not a PBS job id, or a negative index.
    """
    if index < 0:
        raise ValueError(f"a subjob index is 0 or more, got {index}")
    parts = _id_parts(array_job_id)
    return f"{parts.group(1)}[{index}]{parts.group(3)}"


def parse_qsub_output(stdout: str) -> str:
    """The job id qsub prints (its last line): ``12.server`` or, with -J, ``12[].server``.

    Raises:
        ValueError: the last line is not a job id; the message quotes the output.
    """
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if lines and _ID_PARTS.fullmatch(lines[-1]):
        return lines[-1]
    raise ValueError(f'could not make sense of qsub output "{stdout.strip()}"')
