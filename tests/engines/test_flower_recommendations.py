"""On Flower each SuperNode writes its own users' recommendations, equal to the in-process run's lists.

LP-GCN on 3 nodes (float64, ``real`` crypto, reproducible draws), 2 epochs on ``synthetic`` with a
validation split: the nodes' ``recommendations.csv`` hold, for every user with a rankable item and
in the dataset's original ids, the top-K of the same run in process (``learner.embeddings()`` and
:func:`~fedgraphrec.evaluation.recommend.top_k`, train and validation items masked); the server's run
folder and everything the ServerApp received hold no user row. A node refuses the recommendation
request before training ended, out of order or twice, and replies with counts only. The fast tests
run the real node handler over the loopback grid; one runs ``fedgraphrec flower simulate`` (Ray).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import torch

pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")

from typer.testing import CliRunner

from fedgraphrec.cli._app import app
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.data.types import Interactions
from fedgraphrec.engines.flower import node as node_module
from fedgraphrec.engines.flower.local import APP_DIR, local_federation
from fedgraphrec.engines.flower.loopback import LoopbackLearner
from fedgraphrec.engines.flower.node import handle_party
from fedgraphrec.engines.flower.node_output import RECOMMEND_STAGE, NodeOutput
from fedgraphrec.engines.flower.party_app import deploy, run_on_nodes
from fedgraphrec.evaluation.recommend import dot_scores, top_k
from fedgraphrec.runtime.flower.parts import decode_message, encode_message
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler
from fedgraphrec.training.trainer import Trainer

SETTINGS = [
    "dataset_options.n_users=30", "dataset_options.n_items=24", "dataset_options.mean_degree=5.0",
    "dim=4", "n_layers=2", "dtype='float64'", "batch_size=32", "ks=[5]", "metric='recall@5'",
    "eval.valid_fraction=0.2", "transcripts=true", "checkpoint_every=0", "lr=0.05", "reproducible=true",
]  # fmt: skip
K = 6
Lists = dict[str, list[tuple[str, float]]]


def _cfg(epochs: int = 2) -> TrainConfig:
    values = {"protocol": "lpgcn", "dataset": "synthetic", "epochs": epochs, "crypto": "real"}
    return load_config(None, SETTINGS, **values)


def _named(data: Interactions) -> Interactions:
    """The dataset with string ids, as a loader of a file with raw ids would give it."""
    users = np.array([f"user-{u:03d}" for u in range(data.n_users)])
    items = np.array([f"item-{i:03d}" for i in range(data.n_items)])
    return dataclasses.replace(data, user_ids=users, item_ids=items)


@pytest.fixture
def named_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every node loads the dataset with original (string) ids."""
    monkeypatch.setattr(node_module, "_interactions", lambda cfg_json: _named(_load(cfg_json)))


def _load(cfg_json: str) -> Interactions:
    from fedgraphrec.training.loading import config_from_dict

    return prepare_interactions(config_from_dict(json.loads(cfg_json)))


def _in_process_lists(cfg: TrainConfig, out: Path, named: bool) -> tuple[Lists, torch.Tensor]:
    """The same run in process: its final tables' top-K, seen (train + valid) items masked."""
    trainer = Trainer(cfg, out, progress=False, learner=lambda c, d: ProtocolLearner(c, d, nodes=3))
    trainer.fit()
    learner: Any = trainer.learner
    U, V = learner.embeddings()
    data = _named(trainer.data) if named else trainer.data
    assert data.valid is not None and data.valid.nnz  # the mask is train + valid, not train alone
    seen = sp.csr_matrix(data.train + data.valid)
    items, scores = top_k(dot_scores(U, V), np.arange(data.n_users), K, data.n_items, seen)
    user_ids = data.user_ids if data.user_ids is not None else np.arange(data.n_users)
    item_ids = data.item_ids if data.item_ids is not None else np.arange(data.n_items)
    lists: Lists = {}
    for u in range(data.n_users):
        keep = items[u] >= 0
        if keep.any():
            lists[str(user_ids[u])] = [
                (str(item_ids[i]), float(s)) for i, s in zip(items[u][keep], scores[u][keep], strict=True)
            ]
    return lists, U


def _node_lists(folder: Path) -> dict[str, Lists]:
    """Each node's ``recommendations.csv``, by node folder."""
    out: dict[str, Lists] = {}
    for path in sorted(folder.glob("node-*/recommendations.csv")):
        lists: Lists = {}
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
        assert rows[0] == ["user", "rank", "item", "score"]
        for user, rank, item, score in rows[1:]:
            got = lists.setdefault(user, [])
            assert int(rank) == len(got) + 1
            got.append((item, float(score)))
        out[path.parent.name] = lists
    return out


def _assert_same_lists(nodes: dict[str, Lists], ref: Lists) -> None:
    users = [u for lists in nodes.values() for u in lists]
    assert len(users) == len(set(users))  # every user on one node only
    assert set(users) == set(ref)  # every user with a rankable item, and only those
    got = {u: lst for lists in nodes.values() for u, lst in lists.items()}
    for user, expected in ref.items():
        assert [i for i, _ in got[user]] == [i for i, _ in expected], user
        np.testing.assert_allclose([s for _, s in got[user]], [s for _, s in expected], rtol=1e-6)


def _assert_no_user_rows(run_dir: Path, U: torch.Tensor, nodes: dict[str, Lists]) -> None:
    """No file of the server's run folder holds a final user row or a recommended score."""
    rows = [U[u].numpy().tobytes() for u in range(U.shape[0])]
    scores = {repr(s) for lists in nodes.values() for lst in lists.values() for _, s in lst}
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert files and not any(p.name.startswith(("recommendations", "embeddings")) for p in files)
    for path in files:
        blob = path.read_bytes()
        assert not any(r in blob for r in rows), path
        text = blob.decode("latin-1")
        assert not any(s in text for s in scores), path


def test_nodes_write_the_in_process_runs_recommendations(named_ids: None, tmp_path: Path) -> None:
    cfg = _cfg()
    outputs = {n: NodeOutput(tmp_path / "nodes", K, embeddings=n == 2, name=str(n)) for n in (1, 2, 3)}
    run = run_on_nodes(cfg, tmp_path / "server", lambda c, d: LoopbackLearner(c, d, 3, outputs=outputs))
    ref, U = _in_process_lists(cfg, tmp_path / "local", named=True)
    nodes = _node_lists(tmp_path / "nodes")
    assert sorted(nodes) == ["node-1", "node-2", "node-3"]
    _assert_same_lists(nodes, ref)
    assert all(u.startswith("user-") for lists in nodes.values() for u in lists)  # original ids
    counts = run.result.summary["flower"]["node_recommendations"]
    assert counts == {"nodes": 3, "nodes_written": 3, "users": len(ref), "nodes_failed": 0}
    _assert_no_user_rows(run.result.run_dir, U, nodes)
    # the operator of node 2 asked for its users' embeddings too (numpy alone reads them)
    with np.load(tmp_path / "nodes" / "node-2" / "embeddings.npz", allow_pickle=False) as npz:
        index = np.array([int(str(u).removeprefix("user-")) for u in npz["user_ids"]])
        np.testing.assert_allclose(npz["users"], U[index].numpy(), rtol=1e-10)
        assert list(npz["item_ids"][:2]) == ["item-000", "item-001"]
    assert not (tmp_path / "nodes" / "node-1" / "embeddings.npz").exists()
    manifest = json.loads((tmp_path / "nodes" / "node-3" / "node.json").read_text())
    assert manifest["model"] == "last" and manifest["evaluations"] == cfg.epochs and manifest["k"] == K


def _trained(tmp_path: Path, outputs: dict[int, NodeOutput] | None = None) -> tuple[LoopbackLearner, Any]:
    cfg = _cfg(epochs=1)
    data = prepare_interactions(cfg)
    learner = LoopbackLearner(cfg, data, 3, outputs=outputs)
    return learner, data


def _refused(learner: LoopbackLearner, match: str) -> None:
    with pytest.raises(IntegrityError, match=match):
        learner.recommend_on_nodes()


def test_a_node_refuses_recommendations_before_training_ended_and_after_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "nodes"
    learner, data = _trained(tmp_path, {n: NodeOutput(out, K, name=str(n)) for n in (1, 2, 3)})
    _refused(learner, "follow the prediction stages")  # right after set-up
    users, pos, neg = next(iter(BPRSampler(data.train, seed=0).batches(0, 32)))
    learner.train_batch(users, pos, neg)
    _refused(learner, "follow the prediction stages")  # in the middle of training
    assert not out.exists()
    learner.evaluate_federated([5])
    assert learner.recommend_on_nodes()["nodes_written"] == 3
    _refused(learner, "already wrote")  # once per run
    with pytest.raises(IntegrityError, match="session ended"):  # and nothing follows it
        learner.train_batch(users, pos, neg)


def _ask(learner: LoopbackLearner, node: int, message: Message, output: NodeOutput | None) -> Message:
    """A recommendation request straight to a node's handler; its decoded reply."""
    header = {"protocol": "lpgcn", "stage": RECOMMEND_STAGE, "step": learner.net.step}
    grid: Any = learner.grid
    reply = handle_party(encode_message(message, header), grid.states[node], output=output)
    return decode_message(reply)[1]


def test_a_node_replies_counts_only_and_writes_only_where_its_operator_said(tmp_path: Path) -> None:
    learner, _ = _trained(tmp_path)
    learner.evaluate_federated([5])
    rows = Part("export/users", "user_embedding", "client", "server", torch.zeros(2, 4, dtype=torch.float64))
    with pytest.raises(IntegrityError, match="unexpected part"):  # the request carries no rows either
        _ask(learner, 1, Message({"users": rows}), NodeOutput(tmp_path / "a", K, name="1"))
    reply = _ask(learner, 1, Message(fields={"out-dir": str(tmp_path / "server-picked")}), None)
    assert not reply.parts and reply.fields == {"written": 0, "users": 0, "k": 0}  # no output configured
    reply = _ask(learner, 2, Message(), NodeOutput(tmp_path / "own", K, embeddings=True, name="2"))
    assert not reply.parts and set(reply.fields) == {"written", "users", "k"} and reply.fields["written"] == 1
    assert reply.fields["users"] == len(_node_lists(tmp_path / "own")["node-2"]) > 0
    assert not (tmp_path / "server-picked").exists()
    (tmp_path / "a-file").write_text("")  # an operator's folder that cannot be made: said, not fatal
    reply = _ask(learner, 3, Message(), NodeOutput(tmp_path / "a-file" / "recs", K, name="3"))
    assert not reply.parts and reply.fields == {"written": 0, "users": 0, "k": K, "failed": 1}


def test_flower_simulate_cli_nodes_write_the_in_process_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sets = [a for s in SETTINGS for a in ("--set", s)]
    args = ["flower", "simulate", "lpgcn", "--dataset", "synthetic", "--supernodes", "3", "--epochs", "1"]
    result = CliRunner().invoke(app, [*args, "--crypto", "real", "--node-k", str(K), "--out", "run", *sets])
    assert result.exit_code == 0, result.output
    nodes = _node_lists(tmp_path / "run-supernodes")
    assert len(nodes) == 3 and "recommendations" in result.output
    cfg = load_config(tmp_path / "run" / "config.toml")
    ref, U = _in_process_lists(cfg, tmp_path / "local", named=False)
    _assert_same_lists(nodes, ref)
    _assert_no_user_rows(tmp_path / "run", U, nodes)


@pytest.mark.parametrize("protocol", ["fedmf", "fedncf", "gnn4fr"])
def test_every_kind_of_protocol_writes_every_rankable_users_list(protocol: str, tmp_path: Path) -> None:
    """Items from the server (FedMF), a model scored by its own function (FedNCF), GNN4FR's nodes."""
    sizes = ["dataset_options.n_users=20", "dataset_options.n_items=15", "dataset_options.mean_degree=4.0"]
    cfg = load_config(None, [*sizes, "checkpoint_every=0"], protocol=protocol, dataset="synthetic", epochs=1)
    outputs = {n: NodeOutput(tmp_path / "nodes", K, embeddings=True, name=str(n)) for n in (1, 2, 3)}
    run = run_on_nodes(cfg, tmp_path / "server", lambda c, d: LoopbackLearner(c, d, 3, outputs=outputs))
    data = prepare_interactions(cfg)
    seen = data.train + (data.valid if data.valid is not None else 0)
    rankable = {str(u) for u in range(data.n_users) if seen[u].nnz < data.n_items}
    nodes = _node_lists(tmp_path / "nodes")
    assert {u for lists in nodes.values() for u in lists} == rankable
    for lists in nodes.values():
        for user, ranked in lists.items():
            items = [int(i) for i, _ in ranked]
            scores = [s for _, s in ranked]
            assert (
                len(ranked) == min(K, data.n_items - seen[int(user)].nnz) and scores == sorted(scores)[::-1]
            )
            assert not set(items) & set(seen[int(user)].indices.tolist())  # seen items never recommended
    assert run.result.summary["flower"]["node_recommendations"]["users"] == len(rankable)
    manifest = json.loads((tmp_path / "nodes" / "node-1" / "node.json").read_text())
    written = (tmp_path / "nodes" / "node-1" / "embeddings.npz").exists()
    assert written == (protocol != "fedncf") and (manifest["embeddings"] == "embeddings.npz") == written


@pytest.mark.deploy
@pytest.mark.skipif(not APP_DIR.exists(), reason="deploy/flower is part of a source checkout")
def test_deployed_supernodes_write_where_their_operators_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real SuperNode processes: each one's ``--node-config`` names its folder, list length and name."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    cfg = _cfg(epochs=1)
    configs = [
        f"out-dir='{tmp_path / 'machine-a'}' recommend-k={K} node-name='a'",
        f"out-dir='{tmp_path / 'machine-b'}' recommend-k={K}",
    ]
    with local_federation(tmp_path / "fed", 2, configs) as fed:
        summary = deploy(cfg, tmp_path / "flower", 2, fed.connection, env=fed.env, timeout=120, limit_s=900)
    assert summary["flower"]["node_recommendations"]["nodes_written"] == 2
    nodes = {**_node_lists(tmp_path / "machine-a"), **_node_lists(tmp_path / "machine-b")}
    assert "node-a" in nodes and len(nodes) == 2  # node b is named by its Flower node id
    trainer = Trainer(
        cfg, tmp_path / "local", progress=False, learner=lambda c, d: ProtocolLearner(c, d, nodes=2)
    )
    trainer.fit()
    learner: Any = trainer.learner
    U, V = learner.embeddings()
    data = trainer.data
    assert data.valid is not None
    items, scores = top_k(
        dot_scores(U, V), np.arange(data.n_users), K, data.n_items, sp.csr_matrix(data.train + data.valid)
    )
    ref = {
        str(u): [(str(i), float(s)) for i, s in zip(items[u], scores[u], strict=True) if i >= 0]
        for u in range(data.n_users)
    }
    _assert_same_lists(nodes, {u: lst for u, lst in ref.items() if lst})
    _assert_no_user_rows(tmp_path / "flower", U, nodes)
