"""The run directory: where the daemon, the batch script, the harness and the trial meet.

``layout`` names every file of a run's directory and of an experiment's array directory,
``exchange`` is how they write and read them (atomic replaces one way, an append-only event
log the other), and ``spec`` is what the daemon hands a run (``job.json``) and what each node
learns of itself. Standard library only: the trial side imports all three.
"""
