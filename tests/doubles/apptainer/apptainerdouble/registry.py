"""docker:// references and the double's registry: a directory of JSON files.

The registry is the directory named by HPCDET_APPTAINER_DOUBLE_REGISTRY.  An image exists when
`<registry>/<name>.json` exists, where <name> is the reference without "docker://" and with "/",
":" and "@" replaced by "_" (docker://library/python:3.11 -> library_python_3.11.json).  A
reference without a tag means ":latest", as in Docker.  Docker Hub names are looked up under
both spellings, with and without "library/" (and without an explicit docker.io host), so
docker://python:3.11, docker://library/python:3.11 and docker://docker.io/library/python:3.11
all find library_python_3.11.json or python_3.11.json, whichever exists (in that order).

The JSON holds {"env": {...}, "labels": {...}, "auth": {"username": u, "password": p},
"content": ["/abs/host/path", ...]}, every key optional.  With "auth", a pull succeeds only when
<PREFIX>_DOCKER_USERNAME and <PREFIX>_DOCKER_PASSWORD hold those values: the credential
variables of the apptainer.org docs ("Appendix: Apptainer's environment variables"; "Support for
Docker and OCI Containers", section "Authentication via environment variables").  "content" is
the double's own modelling of an image's files, not anything a registry has: host paths that
`exec` shows read-only at the same paths inside the container, as part of the image (fsview.py).

Failure texts follow what apptainer 1.x prints for a denied or unknown Docker Hub repository
("While making image from oci registry: error fetching image to cache: failed to get checksum
for docker://x/y:1: reading manifest 1 in docker.io/x/y: requested access to the resource is
denied"); the wrong-password text is the containers/image library's ("unable to retrieve auth
token: invalid username/password: unauthorized: incorrect username or password").
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path

from .messages import Fatal
from .tools import Tool

SCHEME = "docker://"
REGISTRY_VAR = "HPCDET_APPTAINER_DOUBLE_REGISTRY"
HUB_HOSTS = ("docker.io", "index.docker.io", "registry-1.docker.io")


@dataclasses.dataclass(frozen=True)
class DockerRef:
    uri: str
    host: str
    repository: str
    tag: str
    digest: bool

    @property
    def on_hub(self) -> bool:
        return self.host in HUB_HOSTS

    @property
    def default_sif_name(self) -> str:
        """`apptainer pull docker://library/python:3.11` writes python_3.11.sif."""
        tag = self.tag.replace(":", "_") if self.digest else self.tag
        return f"{self.repository.rsplit('/', 1)[-1]}_{tag}.sif"


@dataclasses.dataclass(frozen=True)
class Image:
    env: dict[str, str]
    labels: dict[str, str]
    auth: dict[str, str] | None
    content: tuple[str, ...] = ()


def parse_uri(uri: str) -> DockerRef:
    if not uri.startswith(SCHEME):
        raise Fatal(f"hpcdet's apptainer double only pulls docker:// images, not {uri!r}")
    rest = uri[len(SCHEME):].lstrip("/")
    name, digest = (rest.split("@", 1) + [""])[:2]
    tag = digest
    if not digest:
        head, _, last = name.rpartition("/")
        last, _, tag = last.partition(":")
        name = f"{head}/{last}" if head else last
    first, _, remainder = name.partition("/")
    if remainder and ("." in first or ":" in first or first == "localhost"):
        host, repository = first, remainder
    else:
        host, repository = "docker.io", name
    if host in HUB_HOSTS and "/" not in repository:
        repository = f"library/{repository}"
    if not repository:
        raise Fatal(f"unable to parse reference {uri}")
    return DockerRef(uri, host, repository, tag or "latest", bool(digest))


def lookup(ref: DockerRef, environ: Mapping[str, str]) -> Image:
    directory = environ.get(REGISTRY_VAR)
    if not directory:
        raise Fatal(f"hpcdet's apptainer double: {REGISTRY_VAR} is not set")
    for name in _file_names(ref):
        path = Path(directory) / name
        if path.is_file():
            return _load(path)
    raise Fatal(_fetch_failure(ref, "requested access to the resource is denied"))


def check_credentials(tool: Tool, ref: DockerRef, image: Image,
                      environ: Mapping[str, str]) -> None:
    if image.auth is None:
        return
    user = environ.get(tool.var("DOCKER_USERNAME"))
    password = environ.get(tool.var("DOCKER_PASSWORD"))
    if user is None and password is None:
        raise Fatal(_fetch_failure(ref, "requested access to the resource is denied"))
    if user != image.auth.get("username") or password != image.auth.get("password"):
        raise Fatal(_fetch_failure(
            ref, "unable to retrieve auth token: invalid username/password: unauthorized: "
                 "incorrect username or password", manifest=False))


def _file_names(ref: DockerRef) -> list[str]:
    separator = "@" if ref.digest else ":"
    given = ref.uri[len(SCHEME):].lstrip("/")
    if not ref.digest and ":" not in given.rsplit("/", 1)[-1]:
        given = f"{given}:latest"
    names = [given]
    if ref.on_hub:
        names.append(f"{ref.repository}{separator}{ref.tag}")
        if ref.repository.startswith("library/"):
            names.append(f"{ref.repository[len('library/'):]}{separator}{ref.tag}")
    out: list[str] = []
    for name in names:
        file_name = name.replace("/", "_").replace(":", "_").replace("@", "_") + ".json"
        if file_name not in out:
            out.append(file_name)
    return out


def _load(path: Path) -> Image:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise Fatal(f"hpcdet's apptainer double: unreadable registry entry {path}: {e}") from None
    auth = data.get("auth")
    content = data.get("content") or []
    if not isinstance(content, list) or not all(
            isinstance(p, str) and p.startswith("/") for p in content):
        raise Fatal(f"hpcdet's apptainer double: unreadable registry entry {path}: "
                    '"content" must be a list of absolute paths')
    return Image(
        env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
        labels={str(k): str(v) for k, v in (data.get("labels") or {}).items()},
        auth={str(k): str(v) for k, v in auth.items()} if isinstance(auth, dict) else None,
        content=tuple(os.path.normpath(p) for p in content))


def _fetch_failure(ref: DockerRef, reason: str, manifest: bool = True) -> str:
    where = f"reading manifest {ref.tag} in {ref.host}/{ref.repository}: " if manifest else ""
    return ("While making image from oci registry: error fetching image to cache: "
            f"failed to get checksum for {ref.uri}: {where}{reason}")

