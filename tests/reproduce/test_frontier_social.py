"""The vertical/decentralized frontier collects run files and audits into one table and plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedgraphrec.reproduce.frontier_social import collect, frontier_social


def _files(tmp: Path) -> tuple[Path, Path, Path, Path]:
    p4, dg = tmp / "p4", tmp / "dg"
    p4.mkdir()
    dg.mkdir()
    for seed, rmse in enumerate([1.0, 1.2]):
        run = {"method": "p4gcn", "social": "real", "test_rmse": rmse, "curve": [0, 0], "cipher_GB": 4.0,
               "epsilon_spent": 9.0}  # fmt: skip
        (p4 / f"toy_p4gcn_s{seed}.json").write_text(json.dumps(run))
        local = {"method": "lightgcn", "test_rmse": 1.3}
        (p4 / f"toy_lightgcn_s{seed}.json").write_text(json.dumps(local))
        for variant in ("dgrec", "dmf"):
            d = {"variant": variant, "metrics": {"recall@20": 0.1, "ndcg@20": 0.05}, "ledger_bytes": 600,
                 "epochs": 2, "accounting_per_sharing": {"paper_rdp_ln_per_coordinate": 1.26}}  # fmt: skip
            (dg / f"toy_{variant}_r1.0_s{seed}.json").write_text(json.dumps(d))
    arm = {"forward": {"mean_auc": 0.0}}
    pa = {"arms": [{"eps": None, "attacks": {"forward": {"mean_auc": 0.9}}},
                   {"eps": 1.0, "attacks": arm}, {"eps": 10.0, "attacks": {"forward": {"mean_auc": 0.51}}}]}  # fmt: skip
    da = {"arms": {"plain": {"mean_auc": 0.99}, "one_bit": {"mean_auc": 0.5}}}
    (tmp / "pa.json").write_text(json.dumps(pa))
    (tmp / "da.json").write_text(json.dumps(da))
    return p4, dg, tmp / "pa.json", tmp / "da.json"


def test_rows_take_utility_epsilon_bytes_and_the_matching_audit_arm(tmp_path: Path) -> None:
    p4, dg, pa, da = _files(tmp_path)
    rows = {r["method"]: r for r in collect("toy", p4, dg, pa, da)}
    p = rows["P4GCN"]
    assert p["rmse"] == pytest.approx(1.1) and p["seeds"] == 2
    assert p["bytes_per_epoch"] == pytest.approx(2e9)  # 4 GB over 2 epochs
    assert p["leakage_auc"] == 0.51  # the ε = 10 arm is closest to the 9 spent
    assert rows["DGREC"]["leakage_auc"] == 0.5 and rows["DMF"]["leakage_auc"] == 0.99
    assert rows["DGREC"]["bytes_per_epoch"] == 300 and rows["DGREC"]["epsilon"] == 1.26
    assert rows["LightGCN (local, ratings only)"]["leakage_auc"] is None


def test_the_report_is_written_and_empty_folders_are_refused(tmp_path: Path) -> None:
    p4, dg, pa, da = _files(tmp_path)
    out = tmp_path / "out"
    md = frontier_social("toy", p4, dg, out, pa, da)
    assert "| vertical (ratings) | P4GCN | 2 |" in md == (out / "frontier.md").read_text()
    assert (out / "frontier.png").stat().st_size > 0
    with pytest.raises(FileNotFoundError, match="no other run files"):
        frontier_social("other", p4, dg, out)
