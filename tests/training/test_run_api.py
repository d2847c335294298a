"""The saved-run API: the model the summary reports is the model you get, in the dataset's own ids.

``best.pt`` is the selected epoch's model (not the last), read with ``weights_only=True``;
``Run.recommend`` returns original ids, never a seen item, and scores equal ``U·Vᵀ`` of that model;
``Run.evaluate`` on the run's test split reproduces the summary; a Flower run refuses to hand out
user rows it does not hold.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import fedgraphrec as fgr
from fedgraphrec.data.synthetic import synthetic_interactions
from fedgraphrec.data.types import Interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.run import Run, load_run
from fedgraphrec.training.trainer import Trainer

SMALL = {
    "dataset_options.n_users": 60,
    "dataset_options.n_items": 80,
    "eval.ks": [5],
    "eval.metric": "recall@5",
    "eval.valid_fraction": 0.2,
}
MF = {**SMALL, "model": "mf", "dim": 8, "batch_size": 64, "lr": 0.05}
"""Central BPR-MF whose validation recall peaks before epoch 8 (the selected epoch is not the last)."""


def _gapped_ml100k(folder: Path) -> Path:
    """A MovieLens-format folder (``u1.base``/``u1.test``) whose ids have gaps: 1000 + 3u, 500 + 7i."""
    data = synthetic_interactions(50, 70, seed=4)
    folder.mkdir()
    for name, matrix in (("u1.base", data.train), ("u1.test", data.test)):
        coo = matrix.tocoo()
        lines = [f"{1000 + 3 * u}\t{500 + 7 * i}\t5\t0" for u, i in zip(coo.row, coo.col, strict=True)]
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(scope="module")
def mf_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return fgr.train(
        "central", "synthetic", out=tmp_path_factory.mktemp("mf") / "run", epochs=8, seed=0, **MF
    )


def test_best_pt_is_the_selected_epochs_model_and_last_pt_the_last(mf_run: Run, tmp_path: Path) -> None:
    summary = mf_run.summary
    selected = summary["selected_epoch"]
    assert 1 <= selected < summary["last_epoch"] == 8  # the premise of this test
    assert summary["model_files"] == {"selected": "best.pt", "last": "last.pt"}
    best = torch.load(mf_run.path / "best.pt", weights_only=True)
    last = torch.load(mf_run.path / "last.pt", weights_only=True)
    assert (best["epoch"], last["epoch"], best["scoring"]) == (selected, 8, "dot")
    assert not torch.equal(best["users"], last["users"])
    # the same run stopped at the selected epoch ends with exactly the tables best.pt holds
    short = fgr.train("central", "synthetic", out=tmp_path / "short", epochs=selected, seed=0, **MF)
    again = torch.load(short.path / "last.pt", weights_only=True)
    assert torch.equal(again["users"], best["users"]) and torch.equal(again["items"], best["items"])
    assert load_run(mf_run.path).epoch == selected and load_run(mf_run.path, "last").epoch == 8


def test_recommend_excludes_seen_items_and_scores_are_the_dot_products(mf_run: Run) -> None:
    users = [0, 7, 33]
    recs = mf_run.recommend(users, k=10)
    assert len(recs) == 30 and recs.rank.tolist() == list(range(1, 11)) * 3
    snapshot = torch.load(mf_run.path / "best.pt", weights_only=True)
    U, V = snapshot["users"].double(), snapshot["items"].double()
    scores = (U[torch.tensor(users)] @ V.T).numpy()
    seen = mf_run.seen()
    for row, u in enumerate(users):
        mine = recs.user == u
        items = recs.item[mine]
        assert np.array_equal(recs.score[mine], scores[row, items])  # float64, exact
        assert not seen[u, items].toarray().any()
        rankable = np.setdiff1d(np.arange(V.shape[0]), seen[u].indices)
        best = rankable[np.argsort(-scores[row, rankable], kind="stable")[:10]]
        assert set(items.tolist()) == set(best.tolist())
    with_seen = mf_run.recommend([0], k=80, exclude_seen=False)
    assert len(with_seen) == 80
    assert mf_run.ledger is None  # a centralized run sends nothing


def test_evaluate_on_the_test_split_and_on_a_file_reproduces_the_summary(mf_run: Run, tmp_path: Path) -> None:
    assert mf_run.evaluate("test") == mf_run.summary["test"]
    assert mf_run.evaluate("valid") == mf_run.summary["valid"]
    data = mf_run.dataset
    assert isinstance(data, Interactions)
    coo = data.test.tocoo()
    seen_user = 3
    seen_item = int(mf_run.seen()[seen_user].indices[0])
    lines = ["user\titem", *(f"{u}\t{i}" for u, i in zip(coo.row, coo.col, strict=True))]
    lines += ["9999\t1", f"{seen_user}\t{seen_item}"]  # an unknown user; an item the user has in train
    (tmp_path / "held_out.tsv").write_text("\n".join(lines) + "\n")
    got = mf_run.evaluate(tmp_path / "held_out.tsv")
    counts = {k: got.pop(k) for k in ("rows_used", "rows_unknown", "rows_seen")}
    assert counts == {"rows_used": data.test.nnz, "rows_unknown": 1, "rows_seen": 1}
    assert got == pytest.approx(mf_run.summary["test"], rel=1e-12)


def test_export_npz_holds_ids_and_tables_numpy_reads_without_pickle(mf_run: Run, tmp_path: Path) -> None:
    (path,) = mf_run.export(tmp_path / "exp", "npz")
    with np.load(path, allow_pickle=False) as npz:
        assert npz["user_ids"].dtype.kind == "U" and npz["user_ids"][5] == "5"
        assert np.array_equal(npz["user_embeddings"], mf_run.model.users.numpy())  # type: ignore[union-attr]
        assert npz["item_embeddings"].shape == (80, 8)
    users_pq, _ = mf_run.export(tmp_path / "pq", "parquet")
    import pyarrow.parquet as pq

    table = pq.read_table(users_pq)
    assert table.column("id").to_pylist()[:3] == [0, 1, 2]
    assert np.allclose(np.asarray(table.column("embedding").to_pylist()), mf_run.model.users.numpy())  # type: ignore[union-attr]


def test_original_ids_of_a_dataset_with_gaps_go_in_and_come_out(tmp_path: Path) -> None:
    folder = _gapped_ml100k(tmp_path / "gapped")
    run = fgr.train(
        "lpgcn", str(folder), out=tmp_path / "run", epochs=2, dim=8, alpha=2, ks=[5], metric="recall@5"
    )
    ids = (run.path / "ids" / "users.tsv").read_text().splitlines()
    assert ids[0] == "index\tid" and ids[1] == "0\t1000"
    recs = run.recommend([1003, "1009"], k=5)
    assert set(recs.user.tolist()) == {1003, 1009}
    assert all((i - 500) % 7 == 0 for i in recs.item.tolist())
    index = run.user_index([1009])[0]
    known = set(run.item_ids.original(run.seen()[index].indices).tolist())
    assert not known & set(recs.item[recs.user == 1009].tolist())
    with pytest.raises(ValueError, match="unknown user id '1001'"):
        run.recommend([1001])
    assert "simulated in one process" in run.note and "its own client" in run.note
    assert run.config.protocol == "lpgcn" and [r["epoch"] for r in run.metrics] == [1, 2]
    ledger = run.ledger
    assert ledger is not None and ledger["rows"] and {"phase", "payload_bytes"} <= set(ledger["rows"][0])
    snapshot = torch.load(run.path / "best.pt", weights_only=True)
    U, V = snapshot["users"].double(), snapshot["items"].double()
    idx = run.user_index([1003, 1009])
    dense = (U[torch.from_numpy(idx)] @ V.T).numpy()
    for row, u in enumerate((1003, 1009)):
        items = run.item_ids.find(recs.item[recs.user == u])[0]
        assert np.array_equal(recs.score[recs.user == u], dense[row, items])


def test_string_ids_of_the_data_are_the_ids_of_the_run(tmp_path: Path) -> None:
    base = synthetic_interactions(30, 40, seed=1)
    users = np.asarray([f"user-{u:02d}" for u in range(30)], dtype=object)
    items = np.asarray([f"item/{i}" for i in range(40)], dtype=object)
    data = Interactions(base.name, 30, 40, base.train, base.test, user_ids=users, item_ids=items)
    cfg = load_config(
        None, ["dim=4", "ks=[5]", "metric=recall@5"], protocol="central", dataset="synthetic", epochs=1
    )
    Trainer(cfg, tmp_path / "run", progress=False, data=data).fit()
    run = load_run(tmp_path / "run")
    recs = run.recommend(["user-07"], k=3, exclude_seen=False)
    assert recs.user.tolist() == ["user-07"] * 3 and all(i.startswith("item/") for i in recs.item.tolist())
    table_users, table_items = run.embeddings()
    assert table_users.ids[7] == "user-07" and table_items.vectors.shape == (40, 4)


def test_p4gcn_keeps_its_predicted_ratings_and_reproduces_its_rmse(tmp_path: Path) -> None:
    settings: dict[str, Any] = {
        "dataset_options.n_users": 40, "dataset_options.n_items": 30, "method": "p4gcn", "dim": 4,
        "batch": 64, "eps": 5.0,
    }  # fmt: skip
    run = fgr.train("p4gcn", "synthetic-ratings", out=tmp_path / "p4", epochs=2, seed=1, **settings)
    snapshot = torch.load(run.path / "best.pt", weights_only=True)
    assert snapshot["scoring"] == "scores" and snapshot["scores"].shape == (40, 30)
    assert snapshot["epoch"] == run.summary["selected_epoch"]
    got = run.evaluate("test")
    assert got["rmse"] == pytest.approx(run.summary["test"]["rmse"], rel=1e-9)
    assert got["mae"] == pytest.approx(run.summary["test"]["mae"], rel=1e-9)
    recs = run.recommend([0, 1], k=5)
    rated = run.seen()
    for u in (0, 1):
        assert not rated[u, recs.item[recs.user == u]].toarray().any()
        assert np.array_equal(
            recs.score[recs.user == u], snapshot["scores"][u, recs.item[recs.user == u]].numpy()
        )
    with pytest.raises(ValueError, match="no embedding tables"):
        run.embeddings()
    assert "organisation" in run.note


def test_a_flower_run_keeps_no_user_rows_and_says_where_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fedgraphrec.engines.flower.learner import FlowerLearner
    from fedgraphrec.runtime.flower.transport import FlowerTransport
    from tests.engines.test_flower_party import NODES, _Grid, _Meta, _Msg

    monkeypatch.setattr(
        FlowerTransport, "make_message", staticmethod(lambda c, node, g: _Msg(c, _Meta(node)))
    )
    monkeypatch.setattr(FlowerTransport, "measure", staticmethod(lambda m: 0))
    cfg = load_config(
        None,
        ["dataset_options.n_users=12", "dataset_options.n_items=15", "dim=4", "alpha=2", "ks=[5]",
         "metric='recall@5'", "checkpoint_every=0", "reproducible=true"],
        protocol="lpgcn", dataset="synthetic", epochs=1,
    )  # fmt: skip
    grid = _Grid(NODES)
    Trainer(
        cfg,
        tmp_path / "fl",
        progress=False,
        learner=lambda c, d: FlowerLearner(c, d, grid, NODES, timeout=5.0),
    ).fit()  # type: ignore[arg-type]
    assert not (tmp_path / "fl" / "best.pt").exists() and not (tmp_path / "fl" / "last.pt").exists()
    run = load_run(tmp_path / "fl")
    assert run.summary["model_files"] == {} and "SuperNodes" in run.summary["model_note"]
    with pytest.raises(ValueError, match="SuperNodes"):
        run.recommend([0])
    with pytest.raises(ValueError, match="SuperNodes"):
        run.embeddings()
    assert "Flower" in run.note
    from typer.testing import CliRunner

    from fedgraphrec.cli._app import app

    res = CliRunner().invoke(app, ["recommend", str(tmp_path / "fl"), "--users", "0"])
    assert res.exit_code == 2 and "SuperNodes" in res.output and "Traceback" not in res.output


def test_a_network_scored_model_keeps_its_score_matrix(tmp_path: Path) -> None:
    run = fgr.train("central", "synthetic", out=tmp_path / "ncf", epochs=2, model="ncf", dim=4, **SMALL)
    snapshot = torch.load(run.path / "best.pt", weights_only=True)
    assert snapshot["scoring"] == "scores" and snapshot["scores"].shape == (60, 80)
    assert run.evaluate("test") == run.summary["test"]
    recs = run.recommend([2], k=4)
    assert np.array_equal(recs.score, snapshot["scores"][2, recs.item].double().numpy())


def test_import_fedgraphrec_loads_the_api_on_first_use() -> None:
    script = (
        "import sys, fedgraphrec as fgr\n"
        "assert 'torch' not in sys.modules and 'fedgraphrec.training' not in sys.modules\n"
        "assert fgr.Run.__module__ == 'fedgraphrec.training.run' and callable(fgr.train)\n"
        "assert set(fgr.__all__) <= set(dir(fgr))\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_load_run_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such run folder"):
        load_run(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=r"no config\.toml"):
        load_run(tmp_path)
    with pytest.raises(ValueError, match="'best' or 'last'"):
        load_run(tmp_path, "first")


def test_train_refuses_an_existing_run_unless_overwrite(mf_run: Run, tmp_path: Path) -> None:
    folder = tmp_path / "again"
    fgr.train("central", "synthetic", out=folder, epochs=1, seed=0, **MF)
    (folder / "stale.txt").write_text("from the old run")
    with pytest.raises(ValueError, match="overwrite"):
        fgr.train("central", "synthetic", out=folder, epochs=1, seed=0, **MF)
    assert (folder / "stale.txt").exists()
    fgr.train("central", "synthetic", out=folder, epochs=1, seed=0, overwrite=True, **MF)
    assert not (folder / "stale.txt").exists()
