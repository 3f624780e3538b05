"""Where things live: the shared state directory (run tree) and the daemon's local database.

The run tree is the source of truth and lives on the shared filesystem::

    <state>/daemon.json                       where the daemon runs (host, pid, database path)
    <state>/requests/<id>.json                CLI -> daemon requests (work from any login node)
    <state>/requests/<id>.reply.json          daemon -> CLI replies
    <state>/runs/exp-<E>/experiment.json      the validated config and creation record
    <state>/runs/exp-<E>/journal.jsonl        the daemon's decisions (append-only)
    <state>/runs/exp-<E>/context/             snapshot of the context directory taken at create
    <state>/runs/exp-<E>/array/               the experiment's job arrays
    <state>/runs/exp-<E>/trials/<T>/run-<R>/  one directory per submission of the trial
    <state>/runs/bell/                        trials -> daemon: "look at my run now"
    <state>/registry/journal.jsonl            the model registry's decisions (append-only)
    <state>/trialside/<digest>/               hpcdet's trial side, read-only, per version
    <state>/images/                           registry images converted for the trials
    <state>/readers/hpcdet.db                 the database, copied for readers on other hosts
    <state>/lease/<N>                         the daemon's lease (``hpcdet.protocol.lease``)
    <state>/supervise/                        what `hpcdet daemon supervise` runs, its logs

The run directory's and the array directory's files: ``hpcdet.rundir.layout``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from hpcdet.private import check_holder, close_file, private_dir
from hpcdet.rundir.layout import BELL_DIR

# The daemon's own files in its local directory (``StatePaths.local_dir``), and its local
# backend's jobs directory there: never readable by a group, even in a shared state directory.
DATABASE = "hpcdet.db"
LOCAL_FILES = (DATABASE, f"{DATABASE}-wal", f"{DATABASE}-shm", f"{DATABASE}-journal",
               "daemon.lock", "daemon.log", "status.json")
LOCAL_JOBS = "local-jobs"

# Filesystems on which SQLite's locking (and WAL's shared memory) cannot be trusted.
NETWORK_FSTYPES = frozenset(
    {
        "nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "smbfs", "beegfs", "ceph", "cephfs",
        "glusterfs", "fuse.glusterfs", "fuse.sshfs", "panfs", "afs", "9p", "fuse.ceph", "wekafs",
    }
)


def state_dir() -> Path:
    """The shared state directory: ``$HPCDET_HOME``, else ``~/.hpcdet``."""
    env = os.environ.get("HPCDET_HOME")
    return Path(env).expanduser().absolute() if env else Path.home() / ".hpcdet"


def fstype_of(path: Path, mountinfo: str | None = None) -> str:
    """The filesystem type holding ``path``, from /proc/self/mountinfo (longest mount prefix).

    ``HPCDET_FSTYPE`` overrides the answer (tests fake a network filesystem with it).
    """
    forced = os.environ.get("HPCDET_FSTYPE")
    if forced:
        return forced
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return "unknown"
    target = str(path.resolve())
    best, best_type = "", "unknown"
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount_point = fields[4].replace("\\040", " ")
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, best_type = mount_point, right.split()[0]
    return best_type


def is_network_fs(fstype: str) -> bool:
    return fstype in NETWORK_FSTYPES or fstype.startswith("nfs")


# The daemon's loop asks for every live run's directory on every tick: a Path built each time
# cost more than the look into it.
@lru_cache(maxsize=1 << 14)
def _run_dir(root: Path, exp_id: int, trial_id: int, run_id: int) -> Path:
    return Path(f"{root}/runs/exp-{exp_id}/trials/{trial_id}/run-{run_id}")


@dataclass(frozen=True)
class StatePaths:
    """All fixed paths under one state directory."""

    root: Path

    @property
    def daemon_record(self) -> Path:
        return self.root / "daemon.json"

    @property
    def requests(self) -> Path:
        return self.root / "requests"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def bell(self) -> Path:
        """Where runs ring for the daemon's attention (``hpcdet.rundir.layout.bell``)."""
        return self.runs / BELL_DIR

    def experiment(self, exp_id: int) -> Path:
        return self.runs / f"exp-{exp_id}"

    def experiment_record(self, exp_id: int) -> Path:
        """The validated config and creation record, written once at create."""
        return self.experiment(exp_id) / "experiment.json"

    def context(self, exp_id: int) -> Path:
        return self.experiment(exp_id) / "context"

    def journal(self, exp_id: int) -> Path:
        return self.experiment(exp_id) / "journal.jsonl"

    @property
    def registry(self) -> Path:
        """The model registry's journal (``registry/journal.jsonl``), the daemon's alone."""
        return self.root / "registry"

    def registry_journal(self) -> Path:
        return self.registry / "journal.jsonl"

    @property
    def notify(self) -> Path:
        """The webhooks (``webhooks.json``) and the posts waiting to go (``outbox.json``),
        the daemon's alone (``hpcdet.notify``)."""
        return self.root / "notify"

    def trial(self, exp_id: int, trial_id: int) -> Path:
        return self.experiment(exp_id) / "trials" / str(trial_id)

    def run(self, exp_id: int, trial_id: int, run_id: int) -> Path:
        return _run_dir(self.root, exp_id, trial_id, run_id)

    def default_checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def trialside(self) -> Path:
        """Read-only trees of hpcdet's trial side, one per version (``hpcdet.trialside``)."""
        return self.root / "trialside"

    @property
    def uploads(self) -> Path:
        """What laptops upload for `hpcdet -c NAME experiment create` (``hpcdet.uploads``)."""
        return self.root / "uploads"

    @property
    def images(self) -> Path:
        """Where registry images are converted when the cluster config names no image_cache."""
        return self.root / "images"

    def local_dir(self) -> Path:
        """Local-disk directory for the database and lock, chosen per state directory.

        On a local filesystem it is the state directory itself. On a network filesystem it is
        ``$HPCDET_LOCAL_DIR`` or ``/var/tmp/hpcdet-<uid>/<hash of state dir>``: SQLite must not
        live on NFS/Lustre/GPFS, and /var/tmp survives reboots on most distributions. Not
        ``$XDG_RUNTIME_DIR``: logind removes it when the user's last session ends, while the
        daemon (and the lock that keeps it the only one) outlives the session, and a CLI run
        without the variable (cron, some ssh setups) would pick another lock.
        """
        if not is_network_fs(fstype_of(self.root if self.root.exists() else self.root.parent)):
            return self.root
        base = os.environ.get("HPCDET_LOCAL_DIR") or _default_local_base()
        import hashlib  # only here, off the start of every CLI command

        digest = hashlib.sha1(str(self.root).encode()).hexdigest()[:12]
        return Path(base) / digest

    def prepare_local(self) -> Path:
        """The local directory, made private (see ``hpcdet.private.private_dir``).

        The default base in /var/tmp has a name any user can guess and create first, so it is
        checked too. A base the user chose (``$HPCDET_LOCAL_DIR``: their scratch, or /tmp) is
        theirs to keep as it is; only hpcdet's directory inside it must be private.
        """
        local = self.local_dir()
        if local == self.root:
            private_dir(local, None)  # its mode is prepare's: it may be shared
        else:
            if str(local.parent) == _default_local_base() or not local.parent.exists():
                private_dir(local.parent)
            else:
                check_holder(local.parent)
            private_dir(local)
        self._close_local(local)
        return local

    def _close_local(self, local: Path) -> None:
        """What lives in the local directory made the user's alone, also when it is the state
        directory shared with a group: an older hpcdet left it 0640/0750 there, and a group
        member holding a lock on any of it could block the daemon (issue 37)."""
        for name in LOCAL_FILES:
            close_file(local / name)
        jobs = local / LOCAL_JOBS
        if jobs.is_dir():
            private_dir(jobs)  # the jobs' records in it are out of reach with it
            close_file(jobs / "counter")

    def prepare(self, share_with_group: bool | str = False) -> None:
        """Every directory of this state made (or checked) private; the state directory and
        the run tree are opened to a group when the cluster config shares with one."""
        private_dir(self.root, share_with_group)
        private_dir(self.requests)
        private_dir(self.runs, share_with_group)
        private_dir(self.bell, share_with_group)
        self.prepare_local()

    def database(self) -> Path:
        return self.local_dir() / DATABASE

    def database_copy(self) -> Path:
        """Where the daemon copies its database for readers on other hosts, which cannot reach
        its local disk (``hpcdet.views.access``)."""
        return self.root / "readers" / DATABASE

    def lock(self) -> Path:
        return self.local_dir() / "daemon.lock"

    def local_jobs(self) -> Path:
        """The local backend's jobs (``hpcdet.schedulers.local_exec``)."""
        return self.local_dir() / LOCAL_JOBS


def _default_local_base() -> str:
    return f"/var/tmp/hpcdet-{os.getuid()}"


def hostname() -> str:
    # socket.gethostname()'s answer (the kernel's node name) without importing socket, which
    # cost every CLI command ~2 ms.
    return os.uname().nodename
