"""`hpcdet cluster show`."""

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
