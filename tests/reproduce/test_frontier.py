"""`fedgraphrec frontier`: every horizontal method on one dataset, with measured server inference."""

from __future__ import annotations

import json

from fedgraphrec.reproduce.frontier import HORIZONTAL, frontier

TINY = [
    "epochs=2", "eval_every=1", "dim=8", "n_layers=1", "batch_size=256", "clients_per_round=40",
    "n_negatives=20", "local_steps=2", "n_pseudo=5",
]  # fmt: skip


FAST = list(HORIZONTAL)  # the attack's set-up runs accounted, so FedGRec's warm-up is cheap


def test_frontier_on_synthetic_data(tmp_path) -> None:
    rows = frontier("synthetic", tmp_path, methods=FAST, overrides=TINY)
    by = {r["method"]: r for r in rows}
    assert set(by) == {m.label for m in FAST} and len(FAST) >= 9
    # secure aggregation hides each user's update: the server's guess is near random; FedPerGNN's
    # plain (noised) uploads still leak; methods without per-client item updates have no such attack
    for name in ("FedMF", "FedNCF", "P-GCN", "FedGRec-2", "FedeRank"):
        assert 0.35 < by[name]["server_inference_auc"] < 0.65, (name, by[name])
    assert by["FedPerGNN"]["server_inference_auc"] > 0.7
    assert by["LP-GCN"]["server_inference_auc"] is None
    assert by["FedPerGNN"]["epsilon"] == 2 * 0.01 / 0.001
    assert by["LightGCN (centralized)"]["bytes_per_client_per_epoch"] == 0
    assert all(0.0 <= r["recall@20"] <= 1.0 for r in rows)
    saved = json.loads((tmp_path / "frontier.json").read_text())
    assert len(saved["rows"]) == len(rows)
    assert (tmp_path / "frontier.png").stat().st_size > 0 and "| FedPerGNN |" in (
        tmp_path / "frontier.md"
    ).read_text()


def test_frontier_reuses_a_compare_folder(tmp_path) -> None:
    from fedgraphrec.reproduce.compare import compare, parse_method

    fedmf = next(m for m in HORIZONTAL if m.label == "FedMF")
    rows = compare(
        [parse_method(fedmf.method)], [1], tmp_path / "cmp", overrides=["dataset=synthetic", *TINY]
    )
    table = frontier(
        "synthetic", tmp_path / "fr", methods=[fedmf], overrides=TINY, reuse=tmp_path / "cmp", attack=False
    )
    assert table[0]["recall@20"] == rows[0]["recall@20_mean"]
    assert not (tmp_path / "fr" / "runs").exists()


def test_frontier_reuses_several_folders_and_shows_other_seeds(tmp_path) -> None:
    from fedgraphrec.reproduce.compare import compare, parse_method

    fedmf = next(m for m in HORIZONTAL if m.label == "FedMF")
    central = next(m for m in HORIZONTAL if m.label == "LightGCN (centralized)")
    over = ["dataset=synthetic", *TINY]
    compare([parse_method(fedmf.method)], [1, 2], tmp_path / "a", overrides=over)
    compare([parse_method(central.method)], [1], tmp_path / "b", overrides=over)
    table = frontier(
        "synthetic",
        tmp_path / "fr",
        methods=[fedmf, central],
        seeds=[1, 2],
        overrides=TINY,
        reuse=[tmp_path / "a", tmp_path / "b"],
        attack=False,
    )
    assert [r["seeds"] for r in table] == [[1, 2], [1]]
    md = (tmp_path / "fr" / "frontier.md").read_text()
    assert "| LightGCN (centralized) (seeds [1]) |" in md and "| FedMF |" in md
    assert not (tmp_path / "fr" / "runs").exists()
