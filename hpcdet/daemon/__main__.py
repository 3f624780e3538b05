"""``python -m hpcdet.daemon``: run the daemon in the foreground (the CLI detaches it)."""

from __future__ import annotations

import logging
import signal
import sys

from hpcdet.config.cluster import load_cluster_config
from hpcdet.daemon.loop import Daemon
from hpcdet.errors import HpcdetError
from hpcdet.paths import StatePaths, state_dir
from hpcdet.private import apply_umask
from hpcdet.protocol.lease import LeaseHeld
from hpcdet.protocol.process import acquire_lock


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    paths = StatePaths(state_dir())
    try:
        cluster = load_cluster_config()
        apply_umask(cluster.share_with_group)
        paths.prepare(cluster.share_with_group)
        lock = acquire_lock(paths)
        if lock is None:
            print(f"a daemon already serves {paths.root}", file=sys.stderr)
            return 0
        daemon = Daemon(paths, cluster)
    except LeaseHeld as e:
        print(str(e), file=sys.stderr)
        return 0
    except HpcdetError as e:
        print(str(e), file=sys.stderr)
        return 1

    def _stop(signum: int, _frame: object) -> None:
        daemon.stopping = True

    def _over_cpu(signum: int, _frame: object) -> None:
        # The soft RLIMIT_CPU (`ulimit -t`, which sites set on login nodes): SIGXCPU every
        # CPU second from there, SIGKILL at the hard limit. Stopping now frees the lease at
        # once for the daemon that supervision (or the next command) starts.
        if not daemon.stopping:
            logging.getLogger("hpcdet.daemon").warning(
                "the CPU time limit (ulimit -t) is reached: stopping cleanly; `hpcdet daemon "
                "supervise` or the next hpcdet command starts another daemon")
        daemon.stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGXCPU, _over_cpu)
    daemon.write_status()
    daemon.serve()
    lock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
