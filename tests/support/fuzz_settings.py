"""Hypothesis settings shared by the suite's property tests: bounded and reproducible."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def reproducible(max_examples: int, *also_allowed: HealthCheck) -> settings:
    """``max_examples`` examples from a fixed seed (``derandomize``), no deadline and no example
    database, so every run and every machine tries the same ones (``--hypothesis-seed=random``
    explores further). Slow and large examples are allowed (real export bodies are both), and
    the health checks in ``also_allowed``."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, *also_allowed],
    )
