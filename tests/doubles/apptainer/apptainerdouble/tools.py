"""The two names the double answers to: `apptainer` and `singularity`.

They differ only in their version line, the prefix of their environment variables and the
prompt.  Sources: apptainer.org user docs, "Environment and Metadata" (APPTAINERENV_ /
SINGULARITYENV_, APPTAINER_CONTAINER, APPTAINER_NAME, ...) and the "Appendix" list of
environment variables (APPTAINER_DOCKER_USERNAME, APPTAINER_DOCKER_PASSWORD); SingularityCE's
user docs use the SINGULARITY prefix for the same variables.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Tool:
    name: str
    package: str
    version: str
    prefix: str
    prompt: str
    legacy: str = ""  # an older prefix also read (apptainer reads SINGULARITY*), or ""

    @property
    def version_line(self) -> str:
        """What `<tool> --version` prints (cobra's version template: "<package> version X")."""
        return f"{self.package} version {self.version}"

    @property
    def env_prefix(self) -> str:
        """Host variables with this prefix are set, without it, inside the container."""
        return f"{self.prefix}ENV_"

    @property
    def legacy_env_prefix(self) -> str:
        return f"{self.legacy}ENV_" if self.legacy else ""

    def var(self, name: str) -> str:
        """A runtime or configuration variable, e.g. var("CONTAINER") -> APPTAINER_CONTAINER."""
        return f"{self.prefix}_{name}"


TOOLS: dict[str, Tool] = {
    "apptainer": Tool("apptainer", "apptainer", "1.3.4", "APPTAINER", "Apptainer> ",
                           "SINGULARITY"),
    "singularity": Tool("singularity", "singularity-ce", "3.11.4", "SINGULARITY",
                        "Singularity> "),
}
