"""Hyperparameter search: pure functions of trial records."""
