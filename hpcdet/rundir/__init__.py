"""The run directory: where the daemon, the batch script, the harness and the trial meet.

``layout`` names every file of a run's directory and of an experiment's array directory;
``atomic`` writes and reads them so that no reader sees half a file (atomic replaces, whole
lines appended); ``events`` reads a run's event log and ``event_writer`` writes it, its metric
reports encoded and decoded by ``metric_codec`` alone; ``control`` is the daemon's control
file, ``filewatch`` how a trial notices it changed; and ``spec`` is what the daemon hands a
run (``job.json``) and what each node learns of itself. Standard library only: the trial side
imports them all.
"""
