"""The papers' numbers and budgets are data files that ship with the package and feed the tables."""

from __future__ import annotations

import ast
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from fedgraphrec.reproduce import papers
from fedgraphrec.reproduce.formula_tables import FIG13
from fedgraphrec.reproduce.paper_figures import FIGURES
from fedgraphrec.reproduce.papers import PaperDataError, Section, paper, paper_names
from fedgraphrec.reproduce.tables import TABLES

_SRC = Path(papers.__file__).parent


def test_each_data_file_loads_and_is_valid_toml() -> None:
    names = paper_names()
    assert {"fedgrec", "gnn4fr", "lpgcn"} <= set(names)
    for name in names:
        raw = resources.files("fedgraphrec.reproduce").joinpath("papers", f"{name}.toml").read_text()
        assert paper(name).data == tomllib.loads(raw)


def test_table_cells_are_the_files_numbers() -> None:
    t4 = paper("lpgcn").section("t4")
    row = next(r for r in TABLES["lpgcn-t4-gowalla"].rows if r.label == "LP-GCN (LightGCN+)")
    recall, ndcg, recall_std, _ = t4.section("paper").section("gowalla").numbers("LP-GCN (LightGCN+)")
    assert row.paper == {"recall@20": recall, "ndcg@20": ndcg}
    assert row.paper_std["recall@20"] == recall_std
    assert row.method == t4.section("methods").text("LP-GCN (LightGCN+)")
    assert [r.label for r in TABLES["lpgcn-t4-yelp2018"].rows] == list(
        t4.section("paper").section("yelp2018").names()
    )
    t1 = paper("fedgrec").section("t1")
    fedgrec = next(r for r in TABLES["fedgrec-t1-yelp2018"].rows if r.label == "FedGRec-3")
    assert fedgrec.paper["ndcg@20"] == t1.section("paper").section("yelp2018").numbers("FedGRec-3")[1]
    assert fedgrec.rounds and "FedGRec-3" in t1.texts("rounds")
    g1 = paper("gnn4fr").section("t1")
    assert TABLES["gnn4fr-t1"].base == g1.texts("base")
    assert (
        TABLES["gnn4fr-t1"].rows[0].paper["precision@5"]
        == g1.section("paper").section("ml-100k").numbers("LightGCN")[0]
    )


def test_budgets_and_tuned_rates_come_from_the_files() -> None:
    cpu = paper("lpgcn").section("t4").section("budgets").section("cpu")
    plan = TABLES["lpgcn-t4-gowalla"].budgets["cpu"]
    assert plan.overrides == cpu.texts("overrides") and "lr=0.005" in plan.overrides
    assert plan.seeds == cpu.integers("seeds") and plan.note == cpu.text("note")
    rounds = paper("fedgrec").section("t1").section("budgets").section("cpu").texts("round_overrides")
    assert TABLES["fedgrec-t1-gowalla"].budgets["cpu"].round_overrides == rounds
    t3 = paper("fedgrec").section("t34").section("paper")
    assert FIGURES["fedgrec-t3"].paper[("FedGRec-last", 2.0)] == {
        "ndcg@20": t3.section("FedGRec-last").numbers("ndcg@20")[1]
    }
    f11 = paper("lpgcn").section("f11")
    assert FIGURES["lpgcn-f11"].series[0].xs == f11.numbers("layers")
    assert FIGURES["lpgcn-f11"].budgets["cpu"].note == f11.section("budgets").section("cpu").text("note")
    gowalla = paper("lpgcn").section("f13").section("datasets").section("gowalla")
    assert FIG13["lpgcn-f13-gowalla"][1:4] == (
        gowalla.integer("layers"),
        gowalla.number("k_min"),
        gowalla.number("k_max"),
    )


def test_a_missing_or_mistyped_key_names_the_file_and_key() -> None:
    sec = Section("papers/toy.toml: t1", {"seeds": [1, "2"], "note": 3, "layers": 4})
    with pytest.raises(PaperDataError, match=r"papers/toy.toml: t1\.metrics: missing"):
        sec.texts("metrics")
    with pytest.raises(PaperDataError, match=r"papers/toy.toml: t1\.seeds: expected an array of integers"):
        sec.integers("seeds")
    with pytest.raises(PaperDataError, match=r"t1\.note: expected a string"):
        sec.text("note")
    assert sec.number("layers") == 4.0
    with pytest.raises(
        PaperDataError, match=r"papers/nope\.toml: no such paper data file; available: .*lpgcn"
    ):
        paper("nope")


def test_the_data_files_ship_with_the_package() -> None:
    pyproject = tomllib.loads((_SRC.parents[2] / "pyproject.toml").read_text())
    assert "reproduce/papers/*.toml" in pyproject["tool"]["setuptools"]["package-data"]["fedgraphrec"]


def test_no_paper_number_left_in_the_reproduce_modules() -> None:
    """No reproduce module holds a float literal equal to a paper cell (they read papers/*.toml)."""
    cells = {  # printed cells of three or more significant digits (0.1937, 3.15), not 0.001
        v
        for name in paper_names()
        for v in _floats(_paper_parts(paper(name).data))
        if len(repr(v).replace(".", "").strip("0")) >= 3
    }
    assert len(cells) > 100
    for module in sorted(_SRC.glob("*.py")):
        tree = ast.parse(module.read_text())
        found = {
            n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, float)
        }
        assert not found & cells, (
            f"reproduce/{module.name}: paper numbers {sorted(found & cells)} as literals"
        )


def _paper_parts(data: object) -> list[object]:
    """The ``paper`` sub-tables of a data file (the printed cells, not our budgets or grids)."""
    if not isinstance(data, dict):
        return []
    parts: list[object] = []
    for key, value in data.items():
        parts += [value] if key == "paper" else _paper_parts(value)
    return parts
    return [
        v if k == "paper" else p for k, v in data.items() for p in ([v] if k == "paper" else _paper_parts(v))
    ]


def _floats(data: object) -> list[float]:
    if isinstance(data, dict):
        return [v for x in data.values() for v in _floats(x)]
    if isinstance(data, list):
        return [v for x in data for v in _floats(x)]
    return [data] if isinstance(data, float) else []


def test_p4gcn_tables_read_their_numbers_and_budgets() -> None:
    from fedgraphrec.reproduce.p4gcn_comm import PAPER_TABLE3
    from fedgraphrec.reproduce.p4gcn_summary import PAPER
    from fedgraphrec.reproduce.runs import RUN_TABLES

    data = paper("p4gcn-tables")
    numbers = data.section("t12").section("paper").section("douban")
    row = next(r for r in RUN_TABLES["p4gcn-t1-douban"].rows if r.method == "p4gcn")
    assert (row.paper["rmse"], row.paper["mae"]) == numbers.numbers("p4gcn") == PAPER["douban"]["p4gcn"]
    plan = data.section("t12").section("budgets")
    cpu = RUN_TABLES["p4gcn-t1-epinions"].budgets["cpu"]
    assert cpu.overrides == (*plan.texts("common"), *plan.section("cpu").texts("epinions"))
    assert "2e-2" in cpu.overrides  # the tuned rate of the Epinions budget comes from the file
    assert RUN_TABLES["p4gcn-t1-douban"].row_args["cpu"]["LightGCN"] == (
        plan.section("cpu_rows").section("douban").texts("LightGCN")
    )
    assert PAPER_TABLE3["ciao"]["s3rec"] == data.section("t3").section("paper").section("ciao").numbers(
        "s3rec"
    )
    assert FIGURES["p4gcn-f4"].series[0].xs == data.section("figures").numbers("eps")


def test_dgrec_tables_read_their_numbers_and_budgets() -> None:
    from fedgraphrec.reproduce.runs import DGREC_ROW_ARGS, RUN_TABLES

    data = paper("dgrec-tables")
    recall, ndcg, *_ = data.section("t2").section("paper").section("weeplaces").numbers("DGREC")
    row = next(r for r in RUN_TABLES["dgrec-t2-ciao"].rows if r.label == "DGREC")
    assert row.paper == {"recall@20": recall / 100, "ndcg@20": ndcg / 100}
    assert DGREC_ROW_ARGS["DLGNN"] == data.section("t2").section("rows").texts("DLGNN")
    cpu = data.section("t2").section("budgets").section("cpu-flixster")
    plan = RUN_TABLES["dgrec-t2-flixster"].budgets["cpu"]
    assert (plan.overrides, plan.seeds, plan.note) == (
        cpu.texts("overrides"),
        cpu.integers("seeds"),
        cpu.text("note"),
    )
    ablation = data.section("t3").section("paper").section("w/non-pearson")
    assert FIGURES["dgrec-t3"].paper[("w/non-pearson", 1.0)]["ndcg@20"] == ablation.number("ndcg@20") / 100
