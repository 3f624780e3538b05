"""`hpcdet cluster`: the cluster profiles of a laptop (add, use, remove, list, trust), and
`show`, which tells the chosen cluster's settings."""

import json
from typing import Annotated, Optional

import typer

from hpcdet.cli.common import console, paths, table

app = typer.Typer(no_args_is_help=True)


@app.command()
def show() -> None:
    """The effective cluster settings and what the scheduler reports."""
    from hpcdet.config.cluster import load_cluster_config
    from hpcdet.views.cluster import cluster_view, site_scheduler

    table(["Setting", "Value", "From"], load_cluster_config().describe(),
          title="hpcdet cluster settings")
    view = cluster_view(site_scheduler(paths()))
    console.print(f"backend in use: {view.backend}")
    if view.runtime is not None:
        console.print(f"container runtime: {view.runtime.describe()}", markup=False,
                      highlight=False)
    if view.problem:
        console.print(f"the scheduler did not answer: {view.problem}", markup=False)
        raise typer.Exit(1)
    if view.reported:
        table(["What", "The scheduler reports"], view.reported, title=view.backend)


@app.command()
def add(
    name: Annotated[str, typer.Argument(help="The cluster's name on this laptop.")],
    ssh: Annotated[str, typer.Option(
        "--ssh", help="The login node: a host, user@host, or a ~/.ssh/config alias.")],
    hpcdet: Annotated[Optional[str], typer.Option(
        "--hpcdet", help="The hpcdet command on the login node (default: hpcdet on its PATH).")]
    = None,
    default: Annotated[bool, typer.Option(
        "--default", help="Make it the default cluster (the first one added is).")] = False,
) -> None:
    """Add (or change) a cluster that `-c NAME` runs commands on, over SSH."""
    from hpcdet.remote import profiles

    result = profiles.add(name, ssh, hpcdet, default)
    what = " (the default)" if result.default == name else ""
    console.print(f"cluster {name}: ssh {ssh}{what}; try `hpcdet -c {name} cluster show`",
                  markup=False)


@app.command()
def use(name: Annotated[str, typer.Argument(help="A cluster added with `cluster add`.")]
        ) -> None:
    """Make a cluster the default: commands without -c run there."""
    from hpcdet.remote import profiles

    profiles.use(name)
    console.print(f"default cluster: {name} (`-c local` or HPCDET_CLUSTER=local: this machine)",
                  markup=False)


@app.command()
def remove(name: Annotated[str, typer.Argument(help="A cluster added with `cluster add`.")]
           ) -> None:
    """Forget a cluster (nothing on the cluster is touched)."""
    from hpcdet.remote import profiles

    result = profiles.remove(name)
    console.print(f"removed {name}" + ("" if result.default else "; no default cluster now"),
                  markup=False)


@app.command("list")
def list_() -> None:
    """The clusters: reachable, hpcdet's version there, daemon up, live jobs, the default."""
    from hpcdet.remote import profiles
    from hpcdet.remote.status import probe

    known = profiles.load()
    if not known.clusters:
        console.print("no clusters; add one with `hpcdet cluster add NAME --ssh HOST`")
        return
    rows = []
    for c in known.clusters.values():
        seen = probe(c)
        rows.append([c.name + (" *" if c.name == known.default else ""), c.ssh,
                     seen.reachable, seen.version, seen.daemon, seen.live_jobs])
    table(["Cluster", "SSH", "Reachable", "hpcdet", "Daemon", "Live jobs"], rows,
          title="* the default cluster")


@app.command()
def trust(name: Annotated[str, typer.Argument(help="A cluster added with `cluster add`.")]
          ) -> None:
    """Accept the host keys the cluster's login node (and its bastions) show now, after
    checking their fingerprints with the cluster's administrators."""
    from hpcdet.remote import profiles
    from hpcdet.remote.hostkeys import trust as trust_host

    cluster = profiles.load().get(name)
    for line in trust_host(cluster.ssh):
        console.print(line, markup=False)


@app.command(hidden=True)
def probe() -> None:
    """For `cluster list` on a laptop: this node's hpcdet version, daemon and live jobs."""
    from hpcdet import __version__
    from hpcdet.protocol import process

    current = process.info(paths())
    live = (current.status or {}).get("live_jobs", []) if current.alive else []
    print(json.dumps({"version": __version__, "daemon": bool(current.alive),
                      "live_jobs": len(live)}))
