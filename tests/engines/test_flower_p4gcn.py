"""P4GCN on Flower: each organisation on its own node, the coordinator in the ServerApp, same run as in process.

A fast test carries Flower records over a stand-in grid whose two nodes run the real node handler
(:func:`handle_p4gcn`) on ``RecordDict`` states, each with its organisation in its node config; one test
runs Flower's simulation runtime (Ray) through the CLI on FilmTrust; the deployment test (marker
``deploy``) starts a real SuperLink and two SuperNodes.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")
from flwr.app import RecordDict
from typer.testing import CliRunner

from fedgraphrec.cli._app import app
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.engines.flower.p4gcn import FlowerP4GCN
from fedgraphrec.engines.flower.p4gcn_node import handle_p4gcn
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.runtime.flower.parts import encode_message
from fedgraphrec.runtime.flower.transport import FlowerTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.training.rating import NamedDataset, train_rating

SETTINGS = P4GCNSettings(dim=8, batch=64, epochs=2, lr=1e-2, eps=5.0, patience=2)


@dataclass
class _Meta:
    dst_node_id: int
    src_node_id: int = 0


@dataclass
class _Msg:
    content: Any
    metadata: _Meta
    error: Any = None

    def has_error(self) -> bool:
        return self.error is not None

    def has_content(self) -> bool:
        return self.error is None


class _Grid:
    """Two nodes answered by the real P4GCN node handler, each with its organisation's node config."""

    def __init__(self, orgs: dict[int, str]) -> None:
        self.states = {n: RecordDict() for n in orgs}
        self.orgs = orgs

    def get_node_ids(self) -> list[int]:
        return list(self.states)

    def send_and_receive(self, messages: list[_Msg], timeout: float | None = None) -> list[_Msg]:
        out = []
        for m in messages:
            node = m.metadata.dst_node_id
            config = {"organisation": self.orgs[node]}
            out.append(_Msg(handle_p4gcn(m.content, self.states[node], config), _Meta(0, node)))
        return out


class _Transport(FlowerTransport):
    measure = staticmethod(lambda m: 0)
    make_message = staticmethod(lambda content, node, group: _Msg(content, _Meta(node)))  # type: ignore[assignment]


class _Learner(FlowerP4GCN):
    transport_class = _Transport


def _rows(run: Path) -> list[str]:
    return sorted((run / "ledger.csv").read_text().splitlines()[1:])


def test_p4gcn_over_flower_records_equals_in_process(tmp_path: Path) -> None:
    """Nodes 7 and 3 (ids not in role order): the hello tells the coordinator who is who."""
    data = load_dataset("synthetic-ratings")
    ref = train_rating(data, 4, SETTINGS, tmp_path / "local")  # type: ignore[arg-type]
    learner = _Learner(SETTINGS, "synthetic-ratings", 4, _Grid({7: "social", 3: "recommender"}), [7, 3])  # type: ignore[arg-type]
    assert learner.server.node_of == {"recommender": 3, "social": 7}
    got = train_rating(
        NamedDataset("synthetic-ratings"),
        4,
        SETTINGS,
        tmp_path / "flower",
        learner=lambda c, d: learner,
        checkpoint_every=0,
    )
    for split in ("test", "valid"):
        for name, value in ref[split].items():
            assert got[split][name] == pytest.approx(value, rel=1e-10, abs=1e-12), (split, name)
    assert got["privacy"] == ref["privacy"] and got["selected_epoch"] == ref["selected_epoch"]
    assert _rows(tmp_path / "flower") == _rows(tmp_path / "local")
    local = [json.loads(x) for x in (tmp_path / "local" / "metrics.jsonl").read_text().splitlines()]
    flower = [json.loads(x) for x in (tmp_path / "flower" / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in flower] == pytest.approx([r["loss"] for r in local], rel=1e-10)


def test_a_node_refuses_a_second_hello_and_a_coordinator_without_both_organisations() -> None:
    grid = _Grid({1: "recommender", 2: "recommender"})
    with pytest.raises(ValueError, match="one recommender node and one social node"):
        _Learner(SETTINGS, "synthetic-ratings", 0, grid, [1, 2])  # type: ignore[arg-type]
    state = RecordDict()
    hello = {"settings": json.dumps(dataclasses.asdict(SETTINGS)), "seed": 0, "dataset": "synthetic-ratings",
             "crypto": "accounted"}  # fmt: skip
    for _ in range(2):
        content = encode_message(Message(), {"protocol": "p4gcn", "stage": "setup/hello", "step": 1})
        from flwr.app import ConfigRecord

        content["hello"] = ConfigRecord(hello)
        if _ == 0:
            handle_p4gcn(content, state, {"organisation": "social"})
        else:
            with pytest.raises(IntegrityError, match="second hello"):
                handle_p4gcn(content, state, {"organisation": "social"})


@pytest.mark.datasets
def test_cli_flower_simulate_p4gcn_equals_the_in_process_run(tmp_path: Path) -> None:
    """``fedgraphrec flower simulate p4gcn --dataset filmtrust --epochs 1`` and ``train p4gcn`` agree."""
    import os

    if not os.environ.get("FEDGRAPHREC_DATA"):
        pytest.skip("FEDGRAPHREC_DATA is not set; this test runs on the real FilmTrust")
    runner = CliRunner()
    for engine, out in (("flower", tmp_path / "flower"), ("local", tmp_path / "local")):
        head = ["flower", "simulate"] if engine == "flower" else ["train"]
        args = [*head, "p4gcn", "--dataset", "filmtrust", "--epochs", "1", "--out", str(out)]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    got, ref = (
        json.loads((d / "summary.json").read_text()) for d in (tmp_path / "flower", tmp_path / "local")
    )
    assert got["engine"] == "flower"
    for name, value in ref["test"].items():
        assert got["test"][name] == pytest.approx(value, rel=1e-10, abs=1e-12)
    assert got["privacy"] == ref["privacy"]
    assert _rows(tmp_path / "flower") == _rows(tmp_path / "local")


CKKS = dataclasses.replace(SETTINGS, backend="ckks", batch=1024, epochs=1, dim=4, reproducible=True)
"""Real CKKS (TenSEAL) on tiny data: 5 iterations; W1 and the noise seeded so both runs draw the same."""


def _assert_within_he_noise(got: dict[str, Any], ref: dict[str, Any]) -> None:
    for split in ("test", "valid"):
        for name, value in ref[split].items():
            assert got[split][name] == pytest.approx(value, rel=1e-4), (split, name)
    assert got["privacy"] == ref["privacy"]


@pytest.mark.slow
def test_p4gcn_with_real_ckks_over_flower_records_matches_in_process(tmp_path: Path) -> None:
    """The recommender's node keeps its key pair; the social node gets the public context at set-up."""
    pytest.importorskip("tenseal")
    data = load_dataset("synthetic-ratings")
    ref = train_rating(data, 4, CKKS, tmp_path / "local")  # type: ignore[arg-type]
    grid = _Grid({1: "recommender", 2: "social"})
    learner = _Learner(CKKS, "synthetic-ratings", 4, grid, [1, 2])  # type: ignore[arg-type]
    got = train_rating(
        NamedDataset("synthetic-ratings"),
        4,
        CKKS,
        tmp_path / "flower",
        learner=lambda c, d: learner,
        checkpoint_every=0,
    )
    _assert_within_he_noise(got, ref)
    # the same messages between the same organisations; across processes each ciphertext is a message
    # of its serialised size (in process one per matrix), and CKKS's serialised sizes vary with the keys
    phases = [r.split(",")[:3] for r in _rows(tmp_path / "flower") if not r.startswith("setup/context")]
    assert phases == [r.split(",")[:3] for r in _rows(tmp_path / "local")]
    assert any(r.startswith("setup/context,recommender,social,1,") for r in _rows(tmp_path / "flower"))
    assert "he_secret" in grid.states[1].array_records["p4gcn.state"]
    assert "he_secret" not in grid.states[2].array_records["p4gcn.state"]  # the social node: public only


@pytest.mark.deploy
def test_deploy_p4gcn_with_ckks_on_a_superlink_and_two_supernodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SuperLink and one SuperNode per organisation on loopback, real CKKS: the in-process run."""
    pytest.importorskip("tenseal")
    import os

    from fedgraphrec.engines.flower.local import APP_DIR, local_federation
    from fedgraphrec.engines.flower.p4gcn import deploy_p4gcn

    if not APP_DIR.exists():
        pytest.skip("deploy/flower is part of a source checkout")
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(root / "src"), str(root), os.environ.get("PYTHONPATH", "")])
    )
    orgs = ["organisation='recommender'", "organisation='social'"]
    tiny = {"n_users": 16, "n_items": 20}  # the social node keeps [X]: 330 kB a user under CKKS
    settings = dataclasses.replace(CKKS, batch=32)
    with local_federation(tmp_path / "fed", 2, orgs) as fed:
        got = deploy_p4gcn(settings, "synthetic-ratings", 4, tmp_path / "flower", fed.connection, env=fed.env,
                           timeout=300, limit_s=1200, options=tiny)  # fmt: skip
    ref = train_rating(load_dataset("synthetic-ratings", **tiny), 4, settings, tmp_path / "local")  # type: ignore[arg-type]
    assert got["engine"] == "flower"
    _assert_within_he_noise(got, ref)
    phases = [r.split(",")[:3] for r in _rows(tmp_path / "flower") if not r.startswith("setup/context")]
    assert phases == [r.split(",")[:3] for r in _rows(tmp_path / "local")]
    for name in ("config.toml", "metrics.jsonl", "curves.png", "ledger.csv", "flower.json"):
        assert (tmp_path / "flower" / name).exists(), name
