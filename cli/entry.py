"""The `hpcdet` program: a command for a cluster goes there before the CLI of this machine is
built (typer and every command module: ~0.12 s of each remote command's start)."""

import sys


def main() -> None:
    from hpcdet.errors import HpcdetError
    from hpcdet.private import apply_umask

    argv = sys.argv[1:]
    try:
        from hpcdet.remote.forward import runs_on_laptop, split_cluster
        from hpcdet.remote.profiles import chosen

        name, rest = split_cluster(argv)
        cluster = None if runs_on_laptop(rest) else chosen(name)
        if cluster is not None:
            from hpcdet.cli.remote import run_on_cluster

            apply_umask(False)
            sys.exit(run_on_cluster(cluster, rest))
    except HpcdetError as e:
        from hpcdet.cli.common import visible

        print(f"Error: {visible(e, keep_lines=True)}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    from hpcdet.cli.main import main as local

    local()


if __name__ == "__main__":
    main()
