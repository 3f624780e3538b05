"""Log views read from the end (issue 37: the tail of a 142 MB node log read all of it, 1 GB
of memory per request): the same lines as a whole read, in bounded memory."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpcdet.paths import StatePaths
from hpcdet.views import logs
from hpcdet.views.logs import LogFilter, log_page, read_from, read_records, trial_log


def _write_trial(paths: StatePaths, seed: int) -> None:
    """Node logs as the harness writes them: each line stamped, each file in time order."""
    rng = random.Random(seed)
    for run in (1, 2):
        for node in (0, 1):
            d = paths.run(1, 1, run) / "logs"
            d.mkdir(parents=True, exist_ok=True)
            lines = []
            for i in range(rng.randrange(0, 300)):
                stamp = f"2026-01-01T00:{run:02d}:{i // 10:02d}.{i % 10}Z"
                rank = rng.choice(["", "[rank=0] ", "[rank=1] "])
                level = rng.choice(["", "INFO: ", "WARNING: ", "ERROR: "])
                body = "x" * rng.choice([0, 3, 40, 700]) + rng.choice(["", "\t", "é"])
                lines.append(f"{stamp} {rank}{level}{body}")
            tail = rng.choice(["", "2026-01-01T09:00:00Z partial"])
            (d / f"node-{node}.log").write_text("".join(f"{x}\n" for x in lines) + tail)


@pytest.mark.parametrize("seed", range(6))
def test_the_tail_read_backwards_is_the_tail_of_the_whole(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logs, "BLOCK", 97)  # many block boundaries, lines across them
    paths = StatePaths(tmp_path / "state")
    _write_trial(paths, seed)
    for which in (LogFilter(tail=0), LogFilter(tail=1), LogFilter(tail=25),
                  LogFilter(tail=10_000), LogFilter(tail=7, level="WARNING"),
                  LogFilter(tail=9, rank_ids=frozenset({1}))):
        whole = LogFilter(which.rank_ids, which.level, None, which.tail).apply(
            read_records(paths, 1, 1, {}))
        offsets: dict[Path, int] = {}
        assert trial_log(paths, 1, 1, which, offsets) == whole, which
        everything: dict[Path, int] = {}
        read_records(paths, 1, 1, everything)
        assert offsets == everything  # a follow reads on from the same place


def test_a_first_view_starts_near_the_end_and_follow_ups_are_bounded(tmp_path: Path) -> None:
    log = tmp_path / "run-1" / "logs" / "node-0.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"".join(b"2026 line %d\n" % i for i in range(10_000)))
    lines, offset, skipped = read_from(log, None, limit=1000)
    assert lines[-1].text == "2026 line 9999" and 0 < len(lines) < 100
    assert skipped == offset - sum(len(x.text) + 1 for x in lines) > 0
    assert log.read_bytes()[skipped - 1:skipped] == b"\n"  # whole lines only
    lines, offset, skipped = read_from(log, 0, limit=1000)
    assert skipped == 0 and offset <= 1000 and lines[0].text == "2026 line 0"
    assert log.read_bytes()[offset - 1:offset] == b"\n"


def test_the_ui_page_says_what_it_left_out(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    log = paths.run(1, 1, 1) / "logs" / "node-0.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"".join(b"2026-01-01T00:00:00Z %08d\n" % i for i in range(400_000)))
    records, cursor, omitted, skipped = log_page(paths, 1, 1, {}, 2000)
    assert records[-1].message == "00399999" and len(records) == 2000
    assert skipped > log.stat().st_size - logs.VIEW_BYTES - 40 and omitted > 0
    assert cursor == {"run-1/logs/node-0.log": log.stat().st_size}
    with open(log, "ab") as f:
        f.write(b"2026-01-01T00:00:01Z next\n")
    records, cursor, omitted, skipped = log_page(paths, 1, 1, cursor, 2000)
    assert [r.message for r in records] == ["next"] and (omitted, skipped) == (0, 0)


def test_memory_does_not_grow_with_the_log(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    log = paths.run(1, 1, 1) / "logs" / "node-0.log"
    log.parent.mkdir(parents=True)
    block = b"".join(b"2026-01-01T00:00:00Z INFO: %0120d\n" % i for i in range(8192))
    with open(log, "wb") as f:
        for _ in range(96 * 2**20 // len(block)):
            f.write(block)
    program = textwrap.dedent(f"""
        import resource
        from pathlib import Path
        from hpcdet.paths import StatePaths
        from hpcdet.views.logs import LogFilter, log_page, trial_log
        paths = StatePaths(Path({str(paths.root)!r}))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert len(trial_log(paths, 1, 1, LogFilter(tail=200))) == 200
        assert len(log_page(paths, 1, 1, {{}}, 2000)[0]) == 2000
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """)
    grew_kib = int(subprocess.run([sys.executable, "-c", program], capture_output=True,
                                  text=True, check=True, cwd=tmp_path).stdout)
    assert grew_kib < 40 * 1024, f"{grew_kib} KiB for the tail of a 96 MiB log"
