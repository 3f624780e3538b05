"""The `determined` shim: hpcdet/shim on PYTHONPATH makes Determined's names resolve to hpcdet."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.unit.core.core_fakes import SHIM_DIR


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HPCDET_CLUSTER_INFO"}
    env["PYTHONPATH"] = str(SHIM_DIR)
    return subprocess.run(
        [sys.executable, *args, *([code] if code else [])],
        env=env, capture_output=True, text=True, timeout=60,
    )


def test_import_determined_gives_hpcdet() -> None:
    code = textwrap.dedent(
        """
        import determined as det
        import determined.core
        import hpcdet.core
        assert det.core.init is hpcdet.core.init
        assert det.core.DistributedContext is hpcdet.core.DistributedContext
        assert det.core.PreemptMode.WorkersAskChief.value == "WORKERS_ASK_CHIEF"
        assert det.get_cluster_info is hpcdet.core.get_cluster_info
        assert det.get_cluster_info() is None
        assert det.LOG_FORMAT == "%(levelname)s: [%(process)s] %(name)s: %(message)s"
        assert det.InvalidHP is hpcdet.core.InvalidHP
        assert det.ClusterInfo is hpcdet.core.ClusterInfo
        assert det.TrialInfo is hpcdet.core.TrialInfo
        assert det.errors.CheckpointNotFound is hpcdet.core.CheckpointNotFound
        assert set(hpcdet.core.__all__) <= set(dir(det.core))
        print("ok")
        """
    )
    proc = _python(code, "-c")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok\n", "")


def test_python_m_determined_launch_wrap_rank() -> None:
    proc = _python("", "-m", "determined.launch.wrap_rank", "3", "--", "echo", "hi")
    assert (proc.returncode, proc.stdout) == (0, "[rank=3] hi\n")
