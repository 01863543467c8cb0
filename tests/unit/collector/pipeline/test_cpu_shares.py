"""Per-project CPU shares: a project over its share is refused only while another is active."""

from __future__ import annotations

import math
import re

import pytest

from latencylens_collector.pipeline.cpu_shares import ACTIVE_S, WINDOW_S, CpuShares
from latencylens_collector.pipeline.queue import QueueFull


def _shares(share: float = 0.5) -> tuple[CpuShares, list[float]]:
    now = [100.0]
    return CpuShares(share, monotonic=lambda: now[0]), now


def test_alone_a_project_may_use_everything() -> None:
    shares, now = _shares()
    for _ in range(50):
        shares.charge("flood", 1.0)  # a whole CPU-second, fifty times over
        now[0] += 1.0
    assert shares.rate("flood") > 0.5
    shares.check("flood")  # nobody else: not refused


def test_over_its_share_beside_another_project_it_is_refused_until_back_under() -> None:
    shares, now = _shares()
    shares.charge("quiet", 0.01)
    # 4 CPU-seconds now: a rate of 4 / WINDOW_S = 0.8 CPU-s per second, over the 0.5 share.
    shares.charge("flood", 4.0)
    assert shares.rate("flood") == pytest.approx(4.0 / WINDOW_S)
    with pytest.raises(QueueFull, match=re.escape("project 'flood' is using 0.80 CPU-seconds per second")):
        shares.check("flood")
    shares.check("quiet")  # the other project, under its share, still gets in
    # The rate decays by e^(-t / WINDOW_S): under 0.5 after WINDOW_S · ln(0.8 / 0.5) ≈ 2.35 s.
    now[0] += WINDOW_S * math.log(0.8 / 0.5) + 0.01
    shares.check("flood")


def test_a_project_quiet_for_longer_than_active_s_no_longer_holds_the_other_back() -> None:
    shares, now = _shares()
    shares.charge("quiet", 0.01)
    now[0] += ACTIVE_S + 0.1
    shares.charge("flood", 10.0)
    shares.check("flood")  # quiet has not been charged within ACTIVE_S: flood is alone


def test_a_share_of_zero_turns_the_limit_off() -> None:
    shares, _ = _shares(0.0)
    shares.charge("quiet", 0.01)
    shares.charge("flood", 100.0)
    shares.check("flood")


def test_only_the_heaviest_project_is_refused() -> None:
    """Both over the share: the lighter one (0.6 CPU-s/s) still gets in, the heavier (0.8) not."""
    shares, _ = _shares()
    shares.charge("steady", 3.0)  # 3 / WINDOW_S = 0.6
    shares.charge("flood", 4.0)  # 4 / WINDOW_S = 0.8
    shares.check("steady")
    with pytest.raises(QueueFull, match="more than any other project sending"):
        shares.check("flood")


def test_exports_in_flight_count_at_the_projects_mean_cost() -> None:
    """A burst arriving at once is held to what its share can pay for, before any of it is charged.

    One export of ``flood`` cost 0.45 CPU-s: a rate of 0.45 / WINDOW_S = 0.09 CPU-s/s and a mean
    of 0.45 CPU-s per export. Each export in flight then adds 0.45 / WINDOW_S = 0.09 to its load:
    with k in flight the load is 0.09 + 0.09·k, at most the 0.5 share up to k = 4 (0.45), over it
    at k = 5 (0.54): five are let in, the sixth is refused."""
    shares, _ = _shares()
    shares.charge("quiet", 0.01)
    shares.admit("flood")
    shares.charge("flood", 0.45)
    shares.done("flood")
    for _ in range(5):
        shares.admit("flood")
    with pytest.raises(QueueFull, match=re.escape("project 'flood' is using 0.54 CPU-seconds per second")):
        shares.admit("flood")
    # One answered: the mean is now 0.09 / (2 / WINDOW_S) = 0.225 CPU-s per export over two
    # answered exports, and four in flight add 4 · 0.225 / WINDOW_S = 0.18: a load of 0.27.
    shares.done("flood")
    shares.admit("flood")
