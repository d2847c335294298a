"""The P4GCN table runner on a tiny synthetic rating set: every method trains and reports metrics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedgraphrec.data.types import Ratings, RatingSplit, SocialGraph
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.reproduce import p4gcn_table
from fedgraphrec.reproduce.p4gcn_summary import summarize
from fedgraphrec.training.rating import run_method


def _ratings() -> Ratings:
    rng = np.random.default_rng(0)
    n_u, n_i = 15, 12
    u = np.repeat(np.arange(n_u), 6)
    i = rng.integers(0, n_i, size=len(u))
    r = rng.integers(1, 6, size=len(u)).astype(float)
    test = np.arange(len(u)) % 6 == 0
    valid = np.arange(len(u)) % 6 == 1
    tr = ~(test | valid)

    def split(m: np.ndarray) -> RatingSplit:
        return RatingSplit(u[m], i[m], r[m])

    src = rng.integers(0, n_u, size=20)
    dst = rng.integers(0, n_u, size=20)
    return Ratings(
        "toy", n_u, n_i, split(tr), split(test), valid=split(valid), social=SocialGraph(n_u, src, dst)
    )


@pytest.mark.parametrize("method", ["neumf", "sesorec", "fesog-", "p4gcn", "p4gcn-gcn*"])
def test_every_method_runs(method: str) -> None:
    args = P4GCNSettings(
        dim=8, layers=2, lr=1e-2, batch=16, epochs=2, patience=2, beta=1.0, social_lr=1.0,
        social_reg=1e-2, clip=0.1, eps=5.0,
    )  # fmt: skip
    res = run_method(method, _ratings(), 0, args)
    assert 0 < res["test_rmse"] < 5 and 0 < res["test_mae"] <= res["test_rmse"] + 1e-12
    if method == "p4gcn":
        assert 0 < res["epsilon_spent"] <= 5.0 + 1e-9
        privacy = res["privacy"]
        assert privacy["dp_guarantee"] is True and privacy["delta"] == 1e-4 and "GDP" in privacy["accountant"]
    if method == "p4gcn-gcn*":
        assert res["privacy"]["dp_guarantee"] is False and res["privacy"]["epsilon_spent"] is None


def test_the_paper_calibration_is_labelled_not_a_guarantee() -> None:
    args = P4GCNSettings(
        dim=8, layers=2, lr=1e-2, batch=16, epochs=1, patience=2, beta=1.0, social_lr=1.0,
        social_reg=1e-2, clip=0.1, eps=5.0, sensitivity="paper-local",
    )  # fmt: skip
    privacy = run_method("p4gcn", _ratings(), 0, args)["privacy"]
    assert privacy["sensitivity"] == "paper-local" and privacy["dp_guarantee"] is False
    assert "no DP guarantee" in privacy["note"]


def test_packed_ckks_backend_matches_plain() -> None:
    pytest.importorskip("tenseal")
    res = {}
    for backend in ("plain", "ckks-packed"):
        args = P4GCNSettings(
            dim=8, layers=2, lr=1e-2, batch=16, epochs=1, patience=2, beta=1.0, social_lr=1.0,
            social_reg=1e-2, clip=0.1, eps=5.0, backend=backend, reproducible=True,
        )  # fmt: skip
        res[backend] = run_method("p4gcn", _ratings(), 0, args)
    assert res["ckks-packed"]["backend"] == "ckks-packed"
    for key in ("val_rmse", "test_rmse", "test_mae"):
        assert res["ckks-packed"][key] == pytest.approx(res["plain"][key], abs=1e-6)


def test_summary_table(tmp_path: Path) -> None:
    for seed, v in [(0, 0.8), (1, 0.9)]:
        rec = {"dataset": "filmtrust", "method": "p4gcn", "test_rmse": v, "test_mae": v / 2, "epoch": 3}
        (tmp_path / f"filmtrust_p4gcn_s{seed}.json").write_text(json.dumps(rec))
    md = summarize(tmp_path)
    assert "| filmtrust | p4gcn | 2 | 0.8500 ± 0.0500 |" in md and "0.7929" in md


def test_shuffled_social_keeps_the_graph_shape_but_not_who_is_linked() -> None:
    from fedgraphrec.data.synthetic import synthetic_ratings
    from fedgraphrec.training.p4gcn_learner import shuffled_social

    data = synthetic_ratings(n_users=60, n_items=40, seed=0)
    assert data.social is not None
    ctrl = shuffled_social(data, seed=1)
    assert ctrl.social is not None and ctrl.social.n_links == data.social.n_links
    a, b = data.social.adjacency(), ctrl.social.adjacency()
    assert sorted(np.diff(a.indptr)) == sorted(np.diff(b.indptr))  # same degree sequence
    assert (a != b).nnz > 0  # different people


def test_the_paper_budget_comes_from_the_reproduction_data_not_the_library() -> None:
    from fedgraphrec.reproduce.p4gcn_paper import paper_eps

    assert P4GCNSettings().eps == 10.0  # the library's documented default, whatever the dataset
    assert paper_eps("filmtrust") == 15.0 and paper_eps("epinions") == 3.0 and paper_eps("toy") == 10.0
    assert p4gcn_table.settings_from_flags([], dataset="filmtrust").eps == 15.0
    assert p4gcn_table.settings_from_flags(["--eps", "3"], dataset="filmtrust").eps == 3.0
