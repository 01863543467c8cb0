"""Benchmarks: ``python -m bench`` runs every module here that defines ``run(report)``."""
