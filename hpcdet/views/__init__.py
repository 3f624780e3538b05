"""Answers to the questions the CLI asks, as typed data: experiments, trials and their metrics,
checkpoints ranked, the job queue. The CLI only formats them; a web UI and an SDK call the
same functions. Read-only: a view takes a read-only ``Queries`` (the experiments' views also
``Reads``, the CLI's read path without the ORM) and never prints.
"""
