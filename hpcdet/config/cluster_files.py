"""Where the cluster config files are (``hpcdet.config.cluster`` reads them), and a look into
them that parses nothing: every CLI command sets its umask from ``share_with_group`` first,
and the files of most users never name it."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

DEFAULT_SITE_PATH = Path("/etc/hpcdet/cluster.yaml")
SITE_ENV = "HPCDET_SITE_CONFIG"
USER_ENV = "HPCDET_CLUSTER_CONFIG"
# A larger file is left to the cluster config, which refuses it (hpcdet.config.source).
_MAX_BYTES = 1 << 20


def default_user_path(env: Mapping[str, str]) -> Path:
    config_home = env.get("XDG_CONFIG_HOME") or str(home(env) / ".config")
    return Path(config_home) / "hpcdet" / "cluster.yaml"


def home(env: Mapping[str, str]) -> Path:
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def may_share_with_group(env: Mapping[str, str] = os.environ) -> bool:
    """False when no cluster file can set share_with_group: each is missing, or a regular
    file whose text neither names the key nor holds a backslash (a YAML escape could spell
    it); True when only loading the cluster config can tell."""
    site, user = env.get(SITE_ENV), env.get(USER_ENV)
    for path in (Path(site) if site else DEFAULT_SITE_PATH,
                 Path(user) if user else default_user_path(env)):
        try:
            if not stat.S_ISREG(path.stat().st_mode):
                return True  # a FIFO must not be read here: the cluster config refuses it
            with path.open("rb") as file:
                data = file.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            continue
        except OSError:
            return True
        if len(data) > _MAX_BYTES or b"share_with_group" in data or b"\\" in data:
            return True
    return False
