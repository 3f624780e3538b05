"""``determined.exec`` for trials run by hpcdet: the harness of trial classes."""
