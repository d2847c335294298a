"""`fedgraphrec reproduce` for the figures: registry, claim measures, runner calls, reuse, a tiny run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fedgraphrec.evaluation.reference import REFERENCES
from fedgraphrec.protocols.dgrec.settings import VARIANTS
from fedgraphrec.protocols.p4gcn.settings import METHODS, P4GCNSettings
from fedgraphrec.protocols.registry import REGISTRY as PROTOCOLS
from fedgraphrec.reproduce import claims as figure_claims
from fedgraphrec.reproduce import p4gcn_table, paper_figures
from fedgraphrec.reproduce.claims import Figure, Series
from fedgraphrec.reproduce.figures import reproduce_figure, train_overrides
from fedgraphrec.reproduce.paper_figures import FIGURES
from fedgraphrec.reproduce.tables import Budget
from fedgraphrec.training.loading import load_config

ENTRIES = {
    "lpgcn-f10", "lpgcn-f11", "fedgrec-t3", "fedgrec-t4", "fedgrec-f2-gowalla", "fedgrec-f3",
    "p4gcn-f4", "p4gcn-f5", "dgrec-t3", "dgrec-f2", "dgrec-f3",
}  # fmt: skip


def test_registry_lists_every_entry_with_well_formed_budgets() -> None:
    assert set(FIGURES) >= ENTRIES
    for f in FIGURES.values():
        assert {"cpu", "full"} <= set(f.budgets), f.name
        labels = {s.label: s for s in f.series}
        assert len(labels) == len(f.series), f.name
        for label, x in f.paper:  # every printed number belongs to a point we run
            assert x in labels[label].xs, (f.name, label, x)
        for s in f.series:
            if f.kind == "p4gcn":
                assert s.method in METHODS
            elif f.kind == "dgrec":
                assert s.method in (*VARIANTS, *REFERENCES)
                for b in f.budgets.values():  # the DGREC runner reads flag/value pairs
                    assert len((*b.overrides, *s.args)) % 2 == 0
            else:
                assert s.method.partition(":")[0] in PROTOCOLS
                for b in f.budgets.values():  # every trainer point's configuration is valid
                    for x in s.xs or (None,):
                        protocol, over = train_overrides(f, s, x, b.seeds[0], b)
                        load_config(None, over, protocol=protocol)


def test_claim_measures() -> None:
    res = {
        "a": {1.0: {"m": 0.3}, 2.0: {"m": 0.2}, 3.0: {"m": 0.25}},
        "b": {1.0: {"m": 0.4}, 2.0: {"m": 0.1}, 3.0: {"m": 0.3}},
        "ref": {math.nan: {"m": 0.22}},
    }
    assert figure_claims.trend("a", rising=False)(res, "m") == 0.5
    assert figure_claims.beats("a", "b", lower=True)(res, "m") == pytest.approx(2 / 3)
    assert figure_claims.beats("a", "ref", lower=True, xs=(2.0, 3.0))(res, "m") == 0.5
    assert figure_claims.best_x_among("a", True, (2.0, 3.0))(res, "m") == 1.0
    assert figure_claims.best_x_among("b", False, (2.0, 3.0))(res, "m") == 0.0
    assert figure_claims.overlap("a", "a")(res, "m") == 1.0
    assert figure_claims.overlap("a", "b")(res, "m") == 0.0
    assert math.isnan(figure_claims.trend("missing", rising=True)(res, "m"))
    curves = {
        f"S={s}": {0.0: {"m": 0.0}, 20.0: {"m": s / 1000}, 40.0: {"m": 0.5 - s / 10000}} for s in (100, 400)
    }
    curves.update({f"tau={t}": {40.0: {"m": t / 100}} for t in (1, 2, 10, 20)})
    assert paper_figures._first_rises((100, 400))(curves, "m") == 1.0  # first evaluated round, not round 0
    assert figure_claims.finals(("S=100", "S=400"), lower=False)(curves, "m") == 1.0  # last round
    assert paper_figures._tau_claim()(curves, "m") == 1.0


def _fake_p4gcn(calls: list[P4GCNSettings]):
    def run_table(
        dataset: str, methods: list[str], seeds: list[int], settings: P4GCNSettings, out: Path
    ) -> None:
        (method,), (seed,) = methods, seeds
        calls.append(settings)
        eps = settings.eps or 30.0
        rmse = 0.8 + 0.1 / eps + (0.0 if settings.fusion else 0.01)  # falls with ε; fusion helps
        if method == "lightgcn":
            rmse = 0.85
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        run = {"test_rmse": rmse, "test_mae": rmse - 0.2}
        (out / f"filmtrust_{method.replace('*', '_ideal')}_s{seed}.json").write_text(json.dumps(run))

    return run_table


def test_p4gcn_f4_sweeps_eps_and_fusion_and_judges_claims(tmp_path: Path, monkeypatch) -> None:
    calls: list[P4GCNSettings] = []
    monkeypatch.setattr(p4gcn_table, "run_table", _fake_p4gcn(calls))
    report = reproduce_figure("p4gcn-f4", tmp_path)
    assert len(calls) == (6 + 6 + 1 + 1) * 3  # two ε sweeps, two references, three seeds
    assert sum(not c.fusion for c in calls) == 18
    assert any(c.eps == 20 for c in calls)
    cells = {r["row"]: r["cells"]["claim"] for r in report["rows"]}
    assert cells["error falls as ε grows (share of steps, fusion) (rmse)"]["ours"] == 1.0
    assert cells["w/o fusion worse than fusion at the same ε (share of ε) (rmse)"]["verdict"] == "matches"
    assert cells["w/o fusion hurts the local model at ε = 10 (rmse)"]["ours"] == 0.0
    assert (tmp_path / "figure.png").stat().st_size > 0 and (tmp_path / "reproduce.md").exists()
    calls.clear()
    reproduce_figure("p4gcn-f4", tmp_path)  # every run file is there: nothing runs again
    assert calls == []


def test_dgrec_reuse_reads_flat_run_files_and_says_chance(tmp_path: Path) -> None:
    """t3 from committed run files (3 seeds): verdicts, the chance claim, each ablation's difference ± σ.

    Known answer: DGREC 0.030 / 0.031 / 0.032 and every other row 0.007 / 0.008 / 0.009 over seeds
    0–2, so each ablation is 0.023 below DGREC; each row's sample variance is 0.001², so
    σ = sqrt(2 · 0.001² / 3).
    """
    assert FIGURES["dgrec-t3"].budgets["cpu"].seeds == (0, 1, 2)
    runs = tmp_path / "runs"
    runs.mkdir()
    for seed in (0, 1, 2):
        for variant in (*VARIANTS, *REFERENCES):
            recall = (0.030 if variant == "dgrec" else 0.007) + 0.001 * seed
            rec = {"metrics": {"recall@20": recall, "ndcg@20": 0.003}}
            (runs / f"ciao-10core_{variant}_r1.0_s{seed}.json").write_text(json.dumps(rec))
    report = reproduce_figure("dgrec-t3", tmp_path / "out", reuse=[runs])
    by_row = {r["row"]: r["cells"] for r in report["rows"]}
    dgrec = by_row["DGREC @ public ratio = 1"]["recall@20"]
    assert dgrec["ours"] == pytest.approx(0.031) and dgrec["paper"] == 0.1991
    assert dgrec["verdict"] == "deviates"
    assert by_row["runs above twice chance (share) (recall@20)"]["claim"]["ours"] == pytest.approx(1 / 7)
    pairs = {(p["a"], p["b"], p["metric"]): p for p in report["pairwise"]}
    ablation = pairs[("w/non-pearson", "DGREC", "recall@20")]
    sigma = (2 * 0.001**2 / 3) ** 0.5
    assert ablation["diff"] == pytest.approx(-0.023) and ablation["sigma"] == pytest.approx(sigma)
    assert ablation["seeds"] == [3, 3] and ablation["reading"] == "below"
    md = (tmp_path / "out" / "reproduce.md").read_text()
    assert "| w/non-pearson | DGREC | recall@20 | -2.30 | 0.08 | -28.2 | 3 / 3 | below |" in md
    with pytest.raises(FileNotFoundError, match="DGREC"):
        reproduce_figure("dgrec-f2", tmp_path / "out2", reuse=[runs])  # no ratio-0.2 run there


def test_pairwise_differences_carry_sign_and_standard_error() -> None:
    """Known answer: two rows over three seeds; σ = sqrt(s_a²/3 + s_b²/3)."""
    from fedgraphrec.reproduce.pairwise import pairwise

    a = [{"recall@20": v} for v in (0.030, 0.031, 0.032)]
    b = [{"recall@20": v} for v in (0.007, 0.008, 0.009)]
    (row,) = pairwise({"A": a, "B": b}, [("A", "B"), ("A", "missing")])
    assert row["diff"] == pytest.approx(0.023) and row["sigma"] == pytest.approx(math.sqrt(2e-6 / 3))
    assert row["reading"] == "above" and row["z"] == pytest.approx(0.023 / math.sqrt(2e-6 / 3))
    (close,) = pairwise({"A": a, "C": [{"recall@20": v} for v in (0.031, 0.030, 0.033)]}, [("A", "C")])
    assert close["reading"] == "within noise"


def test_curve_reuse_of_metrics_files(tmp_path: Path) -> None:
    lines = [{"epoch": 0, "loss": None, "test": {"ndcg@5": 0.1, "recall@5": 0.05}}]
    lines += [
        {
            "epoch": e,
            "loss": 1 / e,
            "verify_max_deviation": 1e-7 * e,
            "test": {"ndcg@5": 0.1 * e, "recall@5": 0.05 * e},
        }
        for e in (1, 2)
    ]
    a, b = tmp_path / "central.jsonl", tmp_path / "lpgcn.jsonl"
    a.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    lines[-1]["test"]["ndcg@5"] = 0.3  # LP-GCN differs in the last epoch's NDCG
    b.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    report = reproduce_figure("lpgcn-f10", tmp_path / "out", reuse=[a, b])
    cells = {r["row"]: r["cells"]["claim"]["ours"] for r in report["rows"]}
    assert cells["curves overlap (share of epochs equal within 5e-5) (loss)"] == 1.0
    assert cells["curves overlap (share of epochs equal within 5e-5) (ndcg@5)"] == pytest.approx(2 / 3)
    assert cells["last epoch equal within 5e-5 (1 = identical) (recall@5)"] == 1.0
    assert cells["last epoch equal within 5e-5 (1 = identical) (ndcg@5)"] == 0.0
    assert (
        cells[
            "parameters equal: --verify's largest relative deviation ≤ 1e-5 (float32) (verify_max_deviation)"
        ]
        == 1.0
    )
    assert "curves overlap (share of epochs equal within 5e-5) (verify_max_deviation)" not in cells


def test_tiny_trainer_figure_runs_curves_and_sweeps(tmp_path: Path, monkeypatch) -> None:
    tiny = Figure(
        name="tiny",
        title="tiny",
        source="test",
        dataset="synthetic",
        data_note="synthetic",
        kind="train",
        xlabel="layers",
        arg="n_layers",
        metrics=("recall@5",),
        series=(
            Series("LightGCN", "central"),
            Series("GNN4FR", "gnn4fr"),
            Series("swept", "central", (1.0, 2.0)),
        ),
        budgets={
            "cpu": Budget(("epochs=2", "dim=8", "batch_size=256", "ks=[5]", "metric=recall@5"), (0,), "")
        },
        claims=(figure_claims.Claim("lossless", figure_claims.overlap("GNN4FR", "LightGCN", 1e-6)),),
    )
    monkeypatch.setitem(FIGURES, "tiny", tiny)
    report = reproduce_figure("tiny", tmp_path)
    assert report["rows"][0]["cells"]["claim"]["ours"] == 1.0  # GNN4FR's curve is LightGCN's
    assert set(report["points"]["swept"]) == {"1", "2"}
    assert (tmp_path / "runs" / "swept" / "n_layers2-s0" / "summary.json").exists()
    assert (tmp_path / "figure.png").stat().st_size > 0
    # another figure over the same runs (FedGRec T4 over T3's): read, not trained again
    from fedgraphrec.training import trainer as train

    monkeypatch.setattr(train.Trainer, "fit", lambda self: pytest.fail("trained again"))
    again = reproduce_figure("tiny", tmp_path / "again", reuse=[tmp_path / "runs"])
    assert again["points"]["swept"] == report["points"]["swept"]
    with pytest.raises(FileNotFoundError, match="no run of LightGCN"):
        reproduce_figure("tiny", tmp_path / "none", reuse=[tmp_path / "empty"])


def test_unknown_figure_or_budget_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="unknown table"):
        reproduce_figure("no-such-figure", tmp_path)
    with pytest.raises(KeyError, match="budgets"):
        reproduce_figure("p4gcn-f4", tmp_path, budget="gpu")


def test_cli_lists_figures_and_refuses_set(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fedgraphrec.cli._app import app

    runner = CliRunner()
    listed = runner.invoke(app, ["reproduce", "--list"])
    assert listed.exit_code == 0 and "lpgcn-f10" in listed.output and "dgrec-f3" in listed.output
    refused = runner.invoke(app, ["reproduce", "p4gcn-f4", "--set", "epochs=1", "--out", str(tmp_path)])
    assert refused.exit_code == 2 and "--set / --row do not apply to p4gcn-f4" in refused.output
