"""Checkpoints of 1 GiB: the Core API's ``store_path``, ``restore_path``, ``upload`` and
``download`` against ``dd`` of the same bytes on the same filesystem.

Usage: ``python -m bench.checkpoint_io [MIB] [REPEATS]`` (default 1024 4).

The Core API is initialised "on the cluster" as the harness would (bench.report_metrics'
run directory), with the checkpoint storage in a directory of the current filesystem. Each
repeat times:
- ``store_path``: the trial writes MIB MiB into the yielded directory in 1 MiB blocks and
  fsyncs it; hpcdet then lists it, writes metadata.json and reports it;
- ``restore_path``: the checkpoint ``store_path`` wrote, out of the page cache, opened where
  it lies and every byte read by the trial, against ``dd`` reading it to /dev/null and the
  trial's read loop on the file without ``restore_path`` (all out of the page cache:
  ``posix_fadvise`` drops a file's clean pages without privileges), READS rounds a repeat;
- ``upload``: a MIB MiB file already written elsewhere, copied into a new checkpoint;
- ``download``: a checkpoint copied out to a new directory;
against ``dd if=/dev/zero bs=1M count=MIB conv=fsync`` to the same filesystem (written) and
``dd`` of that file to another (copied). hpcdet's copies are not fsynced (the page cache may
still hold them when they are reported), so they can beat the fsynced ``dd``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.figures import Figure, median, table
from bench.report_metrics import on_the_cluster
from hpcdet import core

BLOCK = b"\0" * (1 << 20)
READS = 3  # rounds of the three uncached reads a repeat: a read costs a second, a store ten


def _write(path: Path, mib: int) -> None:
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(BLOCK)
        f.flush()
        os.fsync(f.fileno())


def _read(path: Path) -> None:
    buffer = bytearray(len(BLOCK))
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buffer):
            pass


def _restore(ctx: core.Context, storage_id: str) -> None:
    """Open the checkpoint where it lies and read every byte of it, as a trial."""
    with ctx.checkpoint.restore_path(storage_id) as restored:
        _read(restored / "weights.bin")


READERS = ("restore", "dd read", "read")


def _uncached_read(reader: str, ctx: core.Context, storage_id: str, path: Path) -> float:
    """Seconds for one of READERS to read every byte of the checkpoint at ``path``."""
    if reader == "restore":
        return _timed(lambda: _restore(ctx, storage_id))
    if reader == "dd read":
        return _dd([f"if={path / 'weights.bin'}", "of=/dev/null"], fsync=False)
    return _timed(lambda: _read(path / "weights.bin"))


def _uncache(path: Path) -> None:
    """Drop the file's pages from the page cache (they are clean: it was fsynced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _dd(args: list[str], fsync: bool = True) -> float:
    return _timed(lambda: subprocess.run(
        ["dd", *args, "bs=1M", *(["conv=fsync"] if fsync else []), "status=none"], check=True))


def measure(mib: int, repeats: int) -> list[Figure]:
    times: dict[str, list[float]] = {k: [] for k in ("store", "restore", "read", "upload",
                                                     "download", "dd", "dd read", "dd copy")}
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-", dir=Path.cwd()) as tmp:
        root = Path(tmp)
        with on_the_cluster(root), core.init() as ctx:
            for i in range(repeats):
                start = time.perf_counter()
                with ctx.checkpoint.store_path({"steps_completed": i + 1}) as (path, stored):
                    _write(path / "weights.bin", mib)
                times["store"].append(time.perf_counter() - start)

                for r in range(READS):
                    # Each first in turn: what a cache below the page cache (the disk's, a
                    # virtual machine's host's) keeps of one read favours the next.
                    shift = (i * READS + r) % len(READERS)
                    for name in READERS[shift:] + READERS[:shift]:
                        _uncache(path / "weights.bin")
                        times[name].append(_uncached_read(name, ctx, stored, path))

                source = root / "local"
                source.mkdir(exist_ok=True)
                _write(source / "weights.bin", mib)
                start = time.perf_counter()
                ctx.checkpoint.upload(source, {"steps_completed": i + 1})
                times["upload"].append(time.perf_counter() - start)

                start = time.perf_counter()
                ctx.checkpoint.download(stored, root / f"out-{i}")
                times["download"].append(time.perf_counter() - start)

                times["dd"].append(_dd(["if=/dev/zero", f"of={root / 'dd.bin'}",
                                        f"count={mib}"]))
                times["dd copy"].append(_dd([f"if={root / 'dd.bin'}",
                                             f"of={root / 'dd-copy.bin'}"]))
                for p in (root / "dd.bin", root / "dd-copy.bin", source / "weights.bin"):
                    p.unlink()
    m = {k: median(v) for k, v in times.items()}
    rate = {k: mib / v for k, v in m.items()}
    size = f"{mib:,} MiB"
    reads = len(times["restore"])

    def paired(baseline: str) -> float:
        """Each round's restore rate over its baseline's: a round shares its moment."""
        return median([b / r for r, b in zip(times["restore"], times[baseline])])

    return [
        Figure("checkpoint_io", f"store_path of {size} (trial writes, hpcdet reports)",
               rate["store"], "MiB/s", "dd of the same bytes, fsynced", rate["dd"], "≥ 90%",
               rate["store"] >= 0.9 * rate["dd"]),
        Figure("checkpoint_io", f"restore_path of {size}, every byte read by the trial "
               f"(not cached), median of {reads} reads", rate["restore"], "MiB/s", "dd of the "
               "same file to /dev/null (not cached)", rate["dd read"]),
        Figure("checkpoint_io", f"the same, each restore over the dd read beside it: median "
               f"of {reads} rounds' ratios", paired("dd read"), "x dd's", target="≥ 90%",
               met=paired("dd read") >= 0.9,
               note="0.89-1.04x as a ratio of medians over the full runs of 2026-11-27, of 3-4 "
               "reads each. restore_path of shared_fs yields the directory where it lies and "
               "reads nothing itself (core/_checkpoint.py): what differs from dd is the "
               "trial's read loop, as the next row measures"),
        Figure("checkpoint_io", f"the same, each restore over the trial's read loop on the "
               f"file alone beside it (hpcdet's own cost): median of {reads} rounds' ratios",
               paired("read"), "x the loop's"),
        Figure("checkpoint_io", f"upload of {size} (not fsynced)", rate["upload"], "MiB/s",
               "dd copy of a file, fsynced", rate["dd copy"], "≥ 90%",
               rate["upload"] >= 0.9 * rate["dd copy"]),
        Figure("checkpoint_io", f"download of {size} (not fsynced)", rate["download"],
               "MiB/s", "dd copy of a file, fsynced", rate["dd copy"], "≥ 90%",
               rate["download"] >= 0.9 * rate["dd copy"]),
    ]


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    print(table(measure(*(args + [1024, 4][len(args):]))))
