"""`fedgraphrec reproduce` for the P4GCN and DGREC tables: registry, reuse, resume and runner calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedgraphrec.evaluation.reference import REFERENCES
from fedgraphrec.protocols.dgrec.settings import VARIANTS
from fedgraphrec.protocols.p4gcn.settings import METHODS
from fedgraphrec.reproduce import p4gcn_table
from fedgraphrec.reproduce.runs import RUN_TABLES, reproduce_runs


def _write_p4gcn(folder: Path, dataset: str, method: str, seed: int, rmse: float, mae: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    name = method.replace("*", "_ideal")
    run = {"test_rmse": rmse, "test_mae": mae, "method": method, "seed": seed, "dataset": dataset}
    (folder / f"{dataset}_{name}_s{seed}.json").write_text(json.dumps(run))


def test_every_run_table_names_runner_methods_and_both_budgets() -> None:
    assert {"p4gcn-t1-filmtrust", "p4gcn-t1-douban", "p4gcn-t1-ciao", "p4gcn-t1-epinions"} <= set(RUN_TABLES)
    for t in RUN_TABLES.values():
        assert {"cpu", "full"} <= set(t.budgets)
        known = set(METHODS) if t.kind == "p4gcn" else {*VARIANTS, *REFERENCES}
        for row in t.rows:
            assert row.method in known, (t.name, row.method)
            assert row.paper
        labels = {row.label for row in t.rows}
        assert {x for pair in t.pairs for x in pair} <= labels, t.name


def test_reuse_reports_mean_std_and_verdicts(tmp_path: Path) -> None:
    runs = tmp_path / "committed"
    for seed, (rmse, mae) in enumerate([(0.79, 0.60), (0.80, 0.61), (0.81, 0.62)]):
        _write_p4gcn(runs, "filmtrust", "p4gcn", seed, rmse, mae)
        _write_p4gcn(runs, "filmtrust", "pmf", seed, 1.0, 0.9)
    report = reproduce_runs("p4gcn-t1-filmtrust", tmp_path / "out", rows=["P4GCN (DP)", "PMF"], reuse=[runs])
    by_row = {r["row"]: r for r in report["rows"]}
    p4, pmf = by_row["P4GCN (DP)"], by_row["PMF"]
    assert p4["cells"]["rmse"]["ours"] == pytest.approx(0.80)
    assert p4["cells"]["rmse"]["ours_std"] == pytest.approx(0.01)
    assert p4["cells"]["rmse"]["verdict"] == "matches"  # 0.80 vs the paper's 0.7929
    assert pmf["cells"]["rmse"]["verdict"] == "deviates"  # 1.0 vs 0.8007
    md = (tmp_path / "out" / "reproduce.md").read_text()
    assert "| P4GCN (DP) | 0.8000 ± 0.0100 | 0.7929 | matches" in md
    assert "committed" in report["budget_note"]


def test_reuse_without_a_run_file_says_which(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no run of LightGCN"):
        reproduce_runs("p4gcn-t1-filmtrust", tmp_path / "out", rows=["LightGCN"], reuse=[tmp_path])


def test_unknown_table_or_row_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="unknown table"):
        reproduce_runs("no-such-table", tmp_path)
    with pytest.raises(KeyError, match="no rows"):
        reproduce_runs("p4gcn-t1-douban", tmp_path, rows=["NotARow"])


def test_missing_runs_are_trained_with_the_budget_and_row_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[int, object]] = []

    def fake_run_table(
        dataset: str, methods: list[str], seeds: list[int], settings: object, out: Path
    ) -> None:
        (method,), (seed,) = methods, seeds
        calls.append((seed, settings))
        _write_p4gcn(Path(out), dataset, method, seed, 0.75, 0.6)

    monkeypatch.setattr(p4gcn_table, "run_table", fake_run_table)
    out = tmp_path / "out"
    _write_p4gcn(out / "runs", "douban", "lightgcn", 0, 0.74, 0.58)  # already there: not run again
    report = reproduce_runs("p4gcn-t1-douban", out, rows=["LightGCN"])
    assert [seed for seed, _ in calls] == [1, 2]
    assert all(s.epochs == 20 for _, s in calls)  # type: ignore[attr-defined]  # the row's own, after the budget's 12
    assert report["rows"][0]["seeds"] == 3
    assert report["rows"][0]["cells"]["rmse"]["ours"] == pytest.approx((0.74 + 0.75 + 0.75) / 3)


def test_comm_table_names_are_checked(tmp_path: Path) -> None:
    from fedgraphrec.reproduce.formula_tables import COMM_TABLES, reproduce_comm

    assert "p4gcn-t3" in COMM_TABLES
    with pytest.raises(KeyError, match="unknown table"):
        reproduce_comm("p4gcn-t9", tmp_path)


def test_fig13_reads_a_sweep_and_judges_range_and_trends(tmp_path: Path) -> None:
    from fedgraphrec.reproduce.formula_tables import reproduce_fig13

    rows = [(0.0757, 100.0, 0.3), (0.3, 120.0, 0.2), (0.5930, 130.0, 0.25)]  # R rises on the last step
    lines = ["convolution_fraction,cost_bytes,R"] + [f"{k},{c},{r}" for k, c, r in rows]
    (tmp_path / "fig13_gowalla.csv").write_text("\n".join(lines) + "\n")
    report = reproduce_fig13("lpgcn-f13-gowalla", tmp_path / "out", reuse=[tmp_path])
    cells = {r["row"]: r["cells"]["value"] for r in report["rows"]}
    assert cells["k minimum (% of users)"]["verdict"] == "matches"
    assert cells["k maximum (% of users)"]["ours"] == pytest.approx(59.30)
    assert cells["C rises with k (share of steps)"]["ours"] == 1.0
    assert cells["R falls with k (share of steps)"]["ours"] == 0.5
    assert cells["R falls with k (share of steps)"]["verdict"] == "deviates"
    with pytest.raises(FileNotFoundError, match="fig13_yelp2018"):
        reproduce_fig13("lpgcn-f13-yelp2018", tmp_path / "out", reuse=[tmp_path])
    with pytest.raises(ValueError, match="--graph resplit90"):
        reproduce_fig13("lpgcn-f13-gowalla-resplit90", tmp_path / "out")


CIAO_DGREC, CIAO_NONOISE, CIAO_DMF, CIAO_DLGNN = 0.6, 6.0, 20.0, 50.0  # chosen on Ciao's validation split

# what each DGREC table's CPU budget hands the runner per variant (papers/dgrec-tables.toml): seeds,
# epochs, centres (None: every user) and the validation-chosen lr
CPU_CALLS: dict[str, dict[str, dict[str, object]]] = {
    "dgrec-t2-flixster": {
        "dmf": {"seeds": [0, 1, 2], "epochs": 30, "centres": None, "lr": 10.0, "eval_every": 1},
        "dlgnn": {"seeds": [0, 1, 2], "epochs": 30, "centres": None, "lr": 20.0, "eval_every": 1},
        "dgrec": {"seeds": [0, 1, 2], "epochs": 30, "centres": None, "lr": 0.6, "eval_every": 1},
        "no-noise": {"seeds": [0], "epochs": 30, "centres": None, "lr": 15.0, "eval_every": 1},
    },
    "dgrec-t2-ciao": {
        "dmf": {"seeds": [0, 1, 2], "epochs": 6, "centres": 3000, "lr": CIAO_DMF, "eval_every": 1},
        "dlgnn": {"seeds": [0, 1, 2], "epochs": 6, "centres": 3000, "lr": CIAO_DLGNN, "eval_every": 1},
        "dgrec": {"seeds": [0, 1, 2], "epochs": 2, "centres": 300, "lr": CIAO_DGREC, "eval_every": 1},
        "no-noise": {"seeds": [0, 1, 2], "epochs": 2, "centres": 300, "lr": CIAO_NONOISE, "eval_every": 1},
    },
    "dgrec-t2-weeplaces": {
        v: {"seeds": [0], "epochs": epochs, "centres": 100000, "lr": lr, "eval_every": 1}
        for v, lr, epochs in (
            ("dmf", CIAO_DMF, 20),
            ("dlgnn", CIAO_DLGNN, 20),
            ("dgrec", CIAO_DGREC, 5),
            ("no-noise", CIAO_NONOISE, 5),
        )
    },
}


@pytest.mark.parametrize("table", sorted(CPU_CALLS))
def test_dgrec_tables_hand_each_row_its_budget_lr_and_seeds(
    table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each row runs with its table's budget, its own validation-chosen lr and its own seeds.

    The reference rankings (popularity, random) go through the same runner on every budget seed;
    the report compares rows and reports the validation-selected epoch's test metrics.
    """
    from fedgraphrec.reproduce import dgrec_runs as dgrec

    calls: dict[str, dict[str, object]] = {}

    def fake_run(dataset: str, variant: str, seed: int, epochs: int, out: Path, **kw: object) -> None:
        call = calls.setdefault(variant, {"seeds": []})
        seeds = call["seeds"]
        assert isinstance(seeds, list)
        seeds.append(seed)
        call.update({"epochs": epochs, **kw})
        run = {
            "metrics": {"recall@20": 0.5, "ndcg@20": 0.5},
            "selected_metrics": {"recall@20": 0.02, "ndcg@20": 0.01},
        }
        (Path(out) / f"{dataset}_{variant}_r1.0_s{seed}.json").write_text(json.dumps(run))

    monkeypatch.setattr(dgrec, "run_and_save", fake_run)
    reproduce_runs(table, tmp_path)
    for variant, expected in CPU_CALLS[table].items():
        assert calls[variant] == expected, variant
    budget_seeds = list(RUN_TABLES[table].budgets["cpu"].seeds)
    assert calls["popularity"]["seeds"] == calls["random"]["seeds"] == budget_seeds
    md = (tmp_path / "reproduce.md").read_text()
    assert "| Popularity (train counts) | 0.0200 ± 0.0000 | – | reference |" in md
    assert "| DGREC | DMF | recall@20 | +0.00 |" in md


def test_dgrec_ciao_table_runs_the_10_core_against_the_weeplaces_column() -> None:
    t = RUN_TABLES["dgrec-t2-ciao"]
    assert t.dataset == "ciao-10core" and t.budgets["cpu"].seeds == (0, 1, 2)
    paper = {r.label: r.paper["recall@20"] for r in t.rows if r.paper["recall@20"] == r.paper["recall@20"]}
    assert paper == pytest.approx({"DMF": 0.1546, "DLGNN": 0.1850, "DGREC": 0.1991})
