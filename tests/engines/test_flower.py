"""The Flower engine: secure aggregation with keys on SuperNodes gives in-process numbers exactly.

Unit tests drive the node handler and the server's stages without processes. The deployment tests
start a real SuperLink and two SuperNodes on loopback (free ports, own process groups, always torn
down, bounded in time), submit FedGRec with ``real`` crypto through ``flwr run``, and compare the
embeddings and metrics with the in-process engine; in the second, one SuperNode kills itself when the
training round's masked inputs are requested, and secure aggregation recovers.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")

from flwr.app import RecordDict

from fedgraphrec.crypto.secagg import SecAggClient, SecAggServer, secure_sum
from fedgraphrec.engines.flower.job import FlowerJob, run_fedgrec_job
from fedgraphrec.engines.flower.local import APP_DIR, flwr_run, local_federation
from fedgraphrec.runtime.flower import FlowerSecureSum, content_bytes, handle_secagg, pack, unpack

BIN = Path(sys.executable).parent
LIMIT_S = 420.0  # one aggregation is four rounds of a few seconds each (SuperNodes poll every 3 s)
JOB = FlowerJob(users=24, items=30, mean_degree=5.0, dim=4, K=1, rounds=1, clients_per_round=8)


def _ring(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**63, size=n, dtype=np.uint64)


class TestNodeState:
    def test_client_survives_export_and_restore_between_every_stage(self) -> None:
        rng = np.random.default_rng(0)
        inputs = {u: _ring(rng, 5) for u in (1, 4, 6)}
        server = SecAggServer(2, 5, b"s")

        def reload(cs: dict[int, SecAggClient]) -> dict[int, SecAggClient]:
            return {u: SecAggClient.restore(c.export_state()) for u, c in cs.items()}

        clients = reload({u: SecAggClient(u, 2, 5, b"s") for u in inputs})
        roster = server.collect_keys(c.advertise() for c in clients.values())
        clients = reload(clients)
        inbox = server.route_shares({u: c.share_keys(roster) for u, c in clients.items()})
        clients = reload(clients)
        for v, c in clients.items():
            c.receive_shares(inbox[v])
        clients = reload(clients)
        survivors = server.collect_masked(
            {u: clients[u].masked_input(inputs[u], server.shared) for u in (1, 4)}
        )
        clients = reload(clients)  # client 6 dropped before uploading: its pairwise masks are recovered
        total = server.unmask({u: clients[u].unmask(survivors, server.shared) for u in (1, 4)})
        assert np.array_equal(total, inputs[1] + inputs[4])

    def test_records_round_trip_and_flower_counts_at_least_the_payload(self) -> None:
        vec = {3: np.arange(1000, dtype=np.uint64) * np.uint64(2**40)}
        content = pack({"op": "mask", "label": b"x", "ids": [1, 2]}, vec)
        fields, vectors = unpack(content)
        assert fields["op"] == "mask" and fields["label"] == b"x" and list(fields["ids"]) == [1, 2]
        assert np.array_equal(vectors[3], vec[3])
        assert content_bytes(content) > 8000  # Flower's serialised size covers the 8,000-byte vector


class TestJobConfig:
    def test_run_config_round_trip_and_unknown_key_named(self) -> None:
        assert FlowerJob.from_config(JOB.to_config()) == JOB
        assert FlowerJob.from_config({"clients-per-round": "3"}).clients_per_round == 3
        with pytest.raises(ValueError, match="'bogus-key'"):
            FlowerJob.from_config({"bogus-key": 1})


@dataclass
class _Meta:
    dst_node_id: int
    src_node_id: int = 0


@dataclass
class _Msg:
    content: RecordDict
    metadata: _Meta

    def has_content(self) -> bool:
        return True


class _LocalGrid:
    """Stand-in for the grid: each node is a state store and :func:`handle_secagg` (no processes)."""

    def __init__(self, nodes: list[int], dead_at: tuple[int, str] | None = None) -> None:
        self.states = {n: RecordDict() for n in nodes}
        self.dead_at = dead_at
        self.dead: set[int] = set()

    def send_and_receive(self, messages: list[_Msg], timeout: float | None = None) -> list[_Msg]:
        replies = []
        for m in messages:
            node = m.metadata.dst_node_id
            fields, vectors = unpack(m.content)
            if self.dead_at == (node, fields["op"]):
                self.dead.add(node)
            if node in self.dead:
                continue
            out, vecs = handle_secagg(fields, vectors, self.states[node])
            replies.append(_Msg(pack(out, vecs), _Meta(0, node)))
        return replies


class TestStagesWithoutProcesses:
    @pytest.mark.parametrize("dead", [None, (11, "mask"), (11, "unmask")])
    def test_equals_in_process_secure_sum(self, dead: tuple[int, str] | None) -> None:
        rng = np.random.default_rng(1)
        inputs = {u: _ring(rng, 7) for u in range(9)}
        grid = _LocalGrid([10, 11, 12], dead)
        summer = FlowerSecureSum(grid, [10, 11, 12])  # type: ignore[arg-type]
        summer.measure = lambda message: 0  # stand-in messages have no Flower object tree
        summer.make_message = lambda content, node, group: _Msg(content, _Meta(node))  # type: ignore[assignment,return-value]
        got = summer(inputs, 3, label=b"t", drop_before_input=[0], drop_after_input=[3])
        lost = {u for u in inputs if u % 3 == 1} if dead else set()
        before = {0} | (lost if dead and dead[1] == "mask" else set())
        want = secure_sum(inputs, 3, label=b"t", drop_before_input=sorted(before), drop_after_input=[3])
        assert np.array_equal(got.total, want.total)
        assert set(got.included) == set(want.included) == set(inputs) - before
        assert [t.total_bytes for t in got.traffic][:2] == [t.total_bytes for t in want.traffic][:2]
        assert summer.traffic.summary()["rounds"] == 4

    def test_prepared_sessions_skip_their_advertise_round(self) -> None:
        rng = np.random.default_rng(2)
        inputs = {u: _ring(rng, 6) for u in range(5)}
        summer = FlowerSecureSum(_LocalGrid([1, 2]), [1, 2])  # type: ignore[arg-type]
        summer.measure = lambda message: 0
        summer.make_message = lambda content, node, group: _Msg(content, _Meta(node))  # type: ignore[assignment,return-value]
        summer.prepare([(b"a", list(inputs), 2, 6), (b"b", [0, 1], 2, 6)])  # b's guess will be wrong
        got_a = summer(inputs, 2, label=b"a")
        got_b = summer(inputs, 2, label=b"b")
        want = sum(inputs.values(), np.zeros(6, dtype=np.uint64))
        assert np.array_equal(got_a.total, want) and np.array_equal(got_b.total, want)
        assert [r.op for r in summer.traffic.rounds] == [
            "advertise",
            "share",
            "mask",
            "unmask",
            "advertise",
            "share",
            "mask",
            "unmask",
        ]

    def test_fedgrec_job_over_local_nodes_equals_in_process_with_keys_advertised_ahead(self) -> None:
        summer = FlowerSecureSum(_LocalGrid([5, 6, 7]), [5, 6, 7])  # type: ignore[arg-type]
        summer.measure = lambda message: 0
        summer.make_message = lambda content, node, group: _Msg(content, _Meta(node))  # type: ignore[assignment,return-value]
        job = replace(JOB, rounds=2)
        got, ref = run_fedgrec_job(job, secure_sum=summer), run_fedgrec_job(job)
        assert torch.equal(got.user_emb, ref.user_emb) and torch.equal(got.item_emb, ref.item_emb)
        assert got.ledger == ref.ledger
        ops = [r.op for r in summer.traffic.rounds]
        assert ops.count("advertise") == 2 and len(ops) == 2 + 3 * 4  # every guess was right


# ---------------------------------------------------------------------------- real processes
def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("flower-superlink", path=str(BIN)) is None, reason="no flower-superlink")
@pytest.mark.skipif(not APP_DIR.exists(), reason="deploy/flower is part of a source checkout")
class TestDeployment:
    def test_fedgrec_on_superlink_and_two_supernodes_equals_in_process(self, tmp_path: Path) -> None:
        with local_federation(tmp_path, 2) as fed:
            got = flwr_run(fed, replace(JOB, min_nodes=2), limit_s=LIMIT_S)
        ref = run_fedgrec_job(JOB)
        assert _rel(got["user"], ref.user_emb) <= 1e-10
        assert _rel(got["item"], ref.item_emb) <= 1e-10
        assert got["metrics"] == ref.metrics and got["losses"] == ref.losses
        assert got["ledger"] == ref.ledger  # the same bytes counted by the protocol
        traffic = got["flower_traffic"]
        assert traffic["rounds"] == 2 + 3 * 3  # keys advertised ahead twice, then 3 rounds per aggregation
        assert got["nodes"] == 2 and got["lost_nodes"] == 0

    def test_fedgrec_recovers_when_a_supernode_dies_mid_round(self, tmp_path: Path) -> None:
        # losing one of two SuperNodes loses about half a round: below the malicious-server threshold
        job = replace(JOB, min_nodes=2, stage_timeout=45.0, secagg_threshold=0.4, secagg_semi_honest=True)
        with local_federation(tmp_path, 2, ["", 'crash-at="fedgrec/round/0|mask"']) as fed:
            got = flwr_run(fed, job, limit_s=LIMIT_S)
        dropped = {int(r): ids for r, ids in got["dropped"].items()}
        assert got["lost_nodes"] == 1 and dropped.get(0)
        ref = run_fedgrec_job(job, forced_drops=dropped)
        assert _rel(got["user"], ref.user_emb) <= 1e-10
        assert _rel(got["item"], ref.item_emb) <= 1e-10
        assert got["metrics"] == ref.metrics
        plain = run_fedgrec_job(job)  # without the failure the model differs: the loss is real
        assert not torch.equal(plain.item_emb, got["item"])
