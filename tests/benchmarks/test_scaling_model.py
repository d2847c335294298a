"""The arithmetic under the scaling table (``benchmarks/scaling_model.py``).

The exponent and full-size extrapolation quoted in the docs come from :func:`fit_power`; per-epoch
bytes from :func:`epoch_total`; P4GCN's population axis from :func:`sample_rating_users`; its
per-organisation bytes from :func:`organisation_bytes`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.scaling import METHODS
from benchmarks.scaling_model import (
    FORMULAS,
    epoch_total,
    fit_power,
    organisation_bytes,
    sample_rating_users,
)
from fedgraphrec.data.types import Ratings, RatingSplit, SocialGraph
from fedgraphrec.runtime.ledger import LedgerRow


def test_fit_power_recovers_exponent_prefactor_and_extrapolates() -> None:
    xs = [3000.0, 7500.0, 15000.0]
    fit = fit_power(xs, [2.5 * x**1.7 for x in xs])
    assert fit is not None and fit.points == 3
    assert fit.exponent == pytest.approx(1.7) and fit.prefactor == pytest.approx(2.5)
    assert fit.at(30000.0) == pytest.approx(2.5 * 30000.0**1.7)


def test_fit_power_skips_non_positive_points_and_needs_two_distinct_xs() -> None:
    fit = fit_power([1.0, 2.0, 4.0, 8.0], [0.0, 4.0, 16.0, -1.0])  # only (2, 4) and (4, 16) count
    assert fit is not None and fit.points == 2 and fit.exponent == pytest.approx(2.0)
    assert fit_power([1.0, 2.0], [0.0, 5.0]) is None
    assert fit_power([3.0, 3.0], [1.0, 2.0]) is None
    with pytest.raises(ValueError, match="xs has 2 values, ys 1"):
        fit_power([1.0, 2.0], [1.0])


def test_epoch_total_is_mean_step_times_steps() -> None:
    assert epoch_total([10.0, 10.0], 41) == 410.0
    assert epoch_total([9.0, 11.0, 10.0], 7) == pytest.approx(70.0)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        epoch_total([], 3)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        epoch_total([1.0], 0)


def test_organisation_bytes_counts_each_end_once() -> None:
    rows = [
        LedgerRow("iter/2-forward", "social", "recommender", 1, 100),
        LedgerRow("iter/3-gradient", "recommender", "server", 1, 40),  # through the relay
        LedgerRow("iter/3-gradient", "server", "social", 1, 40),
        LedgerRow("setup/hello", "server", "server", 1, 7),  # neither organisation
    ]
    assert organisation_bytes(rows, ["recommender", "social"]) == {"recommender": 140, "social": 140}


def _ratings() -> Ratings:
    rng = np.random.default_rng(0)
    n_users, n_items = 40, 25
    drawn = zip(rng.integers(0, n_users, 300), rng.integers(0, n_items, 300), strict=True)
    pairs = {(int(u), int(i)) for u, i in drawn}
    arr = np.array(sorted(pairs))
    split = rng.random(len(arr))

    def part(m: np.ndarray) -> RatingSplit:
        return RatingSplit(arr[m, 0], arr[m, 1], 1.0 + (arr[m, 0] + arr[m, 1]) % 5)

    src, dst = rng.integers(0, n_users, 80), rng.integers(0, n_users, 80)
    return Ratings(
        "toy", n_users, n_items, part(split < 0.7), part(split >= 0.85), part((split >= 0.7) & (split < 0.85)),
        social=SocialGraph(n_users, src, dst, directed=True),
    )  # fmt: skip


def _triples(s: RatingSplit, users: np.ndarray, items: np.ndarray) -> set[tuple[int, int, float]]:
    return {
        (int(users[u]), int(items[i]), float(r)) for u, i, r in zip(s.users, s.items, s.ratings, strict=True)
    }


def test_sample_rating_users_keeps_every_rating_and_link_of_the_kept_users() -> None:
    data = _ratings()
    out = sample_rating_users(data, 0.5, seed=3)
    kept, items = out.user_ids, out.item_ids
    assert out.n_users == len(kept) <= 20 and out.n_items == len(items)
    ident_u, ident_i = np.arange(data.n_users), np.arange(data.n_items)
    for name in ("train", "valid", "test"):
        orig, new = getattr(data, name), getattr(out, name)
        want = {t for t in _triples(orig, ident_u, ident_i) if t[0] in set(kept) and t[1] in set(items)}
        assert _triples(new, kept, items) == want, name
    # every kept user trains, every kept item is trained on by a kept user
    assert set(out.train.users) == set(range(out.n_users)) and set(out.train.items) == set(range(out.n_items))
    assert set(data.train.items[np.isin(data.train.users, kept)]) == set(items)
    links = {(int(a), int(b)) for a, b in zip(data.social.src, data.social.dst, strict=True)}  # type: ignore[union-attr]
    new_links = {(int(kept[a]), int(kept[b])) for a, b in zip(out.social.src, out.social.dst, strict=True)}
    assert new_links == {(a, b) for a, b in links if a in set(kept) and b in set(kept)}
    assert out.social.n_users == out.n_users
    again = sample_rating_users(data, 0.5, seed=3)
    assert np.array_equal(again.user_ids, kept) and not np.array_equal(
        sample_rating_users(data, 0.5, 4).user_ids, kept
    )


def test_sample_rating_users_whole_and_bad_fractions() -> None:
    data = _ratings()
    assert sample_rating_users(data, 1.0) is data
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="fraction must be in"):
            sample_rating_users(data, bad)


def test_every_method_of_the_sweep_has_a_formula() -> None:
    assert set(METHODS) == set(FORMULAS)


def _row(method: str, users: int, fraction: float, b: float, per_step: list[float] | None = None) -> dict:
    cost = {"mean": b, "mean_active": 3 * b, "active_clients": 1}
    return {
        "method": method, "dataset": "toy", "fraction": fraction, "users": users, "full_users": 40_000,
        "items": users // 2, "interactions": 30 * users, "epoch_seconds": 1.0, "peak_rss_gib": 1.0,
        "bytes_per_client_per_epoch": cost, "bytes_per_step_total": per_step or [b, b], "steps_per_epoch": 1,
    }  # fmt: skip


def test_fits_extrapolate_from_the_samples_and_show_the_full_run_beside() -> None:
    from benchmarks.scaling_report import fits_of, spread

    rows = [_row("g", u, u / 40_000, 5.0 * u**2) for u in (4_000, 10_000, 20_000)]
    rows.append(_row("g", 40_000, 1.0, 123.0))  # a measured full-size point: not in the fit
    f = fits_of(rows)["g"]
    assert f["exponents"]["bytes"] == pytest.approx(2.0) and f["exponents"]["bytes_active"] == pytest.approx(
        2.0
    )
    assert f["extrapolated_full"]["bytes"] == pytest.approx(5.0 * 40_000**2)
    assert f["measured_full"]["bytes"] == 123.0 and len(f["points"]) == 3
    assert f["interactions_exponent"] == pytest.approx(1.0) and f["items_exponent"] == pytest.approx(
        1.0, abs=1e-6
    )
    assert spread([10.0, 12.0]) == pytest.approx(0.2) and spread([7.0]) == 0.0


@pytest.mark.parametrize(("loads", "quiet"), [((0.4, 2.1), True), ((0.4, 5.3), False)])
def test_the_report_calls_timings_results_only_when_no_other_job_loaded_the_machine(
    tmp_path: Path, loads: tuple[float, float], quiet: bool
) -> None:
    from benchmarks.scaling_report import report

    rows = [
        _row("g", u, u / 40_000, 5.0 * u) | {"load_avg_1min": load, "steps_timed": 2}
        for u, load in zip((4_000, 10_000), loads, strict=True)
    ]
    report(rows, tmp_path, "python benchmarks/scaling.py", None)
    text = (tmp_path / "scaling.md").read_text()
    assert ("on a quiet machine" in text) is quiet
    assert ("context, not results" in text) is not quiet
    assert f"load average 0.4–{loads[1]:.1f} on 2 cores" in text


def test_neighbour_counts_are_the_other_users_sharing_an_item() -> None:
    import scipy.sparse as sp

    from benchmarks.scaling_model import neighbour_counts

    # users 0 and 1 share item 0, users 1 and 2 share item 2 (twice over: items 2 and 3), user 3 alone
    train = sp.csr_matrix(np.array([[1, 0, 0, 0], [1, 0, 1, 1], [0, 0, 1, 1], [0, 1, 0, 0]]))
    assert neighbour_counts(train).tolist() == [1, 2, 1, 0]
