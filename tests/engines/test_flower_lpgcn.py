"""LP-GCN on Flower: users' shards on SuperNodes, the relay server in the ServerApp, in-process numbers.

Unit tests drive the ServerApp's transport over a stand-in grid whose nodes run the real SuperNode
handler (state in a ``RecordDict``, messages packed and unpacked as Flower records), so they check the
whole message path without processes. The deployment test starts a real SuperLink and two SuperNodes
on loopback (bounded in time, always torn down), submits LP-GCN with ``real`` crypto through
``flwr run``, and compares embeddings and metrics with the in-process engine.
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

from fedgraphrec.engines.flower.job import FlowerJob
from fedgraphrec.engines.flower.local import APP_DIR, flwr_run, local_federation
from fedgraphrec.engines.flower.lpgcn import (
    FlowerTransport,
    handle_lpgcn,
    run_lpgcn_in_process,
    run_lpgcn_job,
)
from fedgraphrec.protocols.lpgcn.distributed import LostNodeError, rounds_per_minibatch
from fedgraphrec.runtime.flower import content_bytes, pack_arrays, unpack_arrays

BIN = Path(sys.executable).parent
LIMIT_S = 420.0
JOB = FlowerJob(
    protocol="lpgcn",
    users=24,
    items=30,
    mean_degree=5.0,
    dim=4,
    seed=1,
    lr=0.01,
    batches=3,
    train_set="n_layers=2;alpha=2;batch_size=16;dtype='float64'",
)


@dataclass
class _Meta:
    dst_node_id: int
    src_node_id: int = 0


@dataclass
class _Reply:  # a request or a reply
    content: RecordDict
    metadata: _Meta

    def has_error(self) -> bool:
        return False

    def has_content(self) -> bool:
        return True


class _Grid:
    """Stand-in grid: each node is a ``RecordDict`` state and the SuperNode handler (no processes)."""

    def __init__(self, job: FlowerJob, nodes: list[int], dead_at: tuple[int, str] | None = None) -> None:
        self.job = job
        self.states = {n: RecordDict() for n in nodes}
        self.dead_at = dead_at
        self.seen: list[tuple[str, bytes]] = []

    def send_and_receive(self, messages: list, timeout: float | None = None) -> list[_Reply]:  # type: ignore[type-arg]
        replies = []
        for m in messages:
            node = m.metadata.dst_node_id
            fields, arrays = unpack_arrays(m.content)
            self.seen.append((str(fields["op"]), b"".join(a.tobytes() for a in arrays.values())))
            if self.dead_at == (node, fields["op"]):
                continue
            out_f, out_a = handle_lpgcn(fields, arrays, self.states[node])
            self.seen.append((str(fields["op"]), b"".join(a.tobytes() for a in out_a.values())))
            replies.append(_Reply(pack_arrays(out_f, out_a), _Meta(0, node)))
        return replies


def _transport(grid: _Grid) -> FlowerTransport:
    t = FlowerTransport(grid, timeout=30.0, job=grid.job, n_items=grid.job.items)  # type: ignore[arg-type]
    t.measure = lambda message: content_bytes(message.content)
    t.make_message = lambda content, node, group: _Reply(content, _Meta(node))  # type: ignore[assignment,return-value]
    return t


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


class TestJobConfig:
    def test_lpgcn_settings_and_bad_input_named(self) -> None:
        cfg = JOB.lpgcn_config()
        assert (cfg.n_layers, cfg.alpha, cfg.crypto, cfg.dtype) == (2, 2, "real", "float64")
        assert FlowerJob.from_config(JOB.to_config()) == JOB
        with pytest.raises(ValueError, match="protocol"):
            FlowerJob(protocol="bogus")
        with pytest.raises(ValueError, match="batches"):
            replace(JOB, batches=0).lpgcn_config()
        with pytest.raises(ValueError, match="crypto"):
            replace(JOB, train_set="crypto='accounted'").lpgcn_config()
        with pytest.raises(ValueError, match="model"):
            replace(JOB, train_set="model='lightgcn+'").lpgcn_config()
        with pytest.raises(ValueError, match="n_layers"):
            replace(JOB, train_set="n_layers=0").lpgcn_config()


class TestShardsOverStandInGrid:
    def test_float64_equals_in_process_and_server_sees_no_key_or_user_row(self) -> None:
        nodes = [11, 2**63 + 12, 2**64 - 1]  # Flower's node ids are unsigned 64-bit
        grid = _Grid(JOB, nodes)
        transport = _transport(grid)
        got = run_lpgcn_job(JOB, transport, nodes)
        ref = run_lpgcn_in_process(JOB)
        assert _rel(got.user_emb, ref.user_emb) <= 1e-10
        assert _rel(got.item_emb, ref.item_emb) <= 1e-10
        assert got.metrics == ref.metrics
        assert np.allclose(got.losses, ref.losses, rtol=1e-12, atol=0)
        L = 2
        assert got.extra["rounds"] == 5 + JOB.batches * rounds_per_minibatch(L) + L
        assert len(transport.traffic.rounds) == got.extra["rounds"]
        # what crossed the wire before prediction: never S, never a user's layer-0 row in the clear
        wire = b"".join(blob for op, blob in grid.seen[: -2 * len(nodes)])
        for state in grid.states.values():
            shard = {k: a.numpy() for k, a in state.array_records["lpgcn.shard"].items()}
            assert shard["S"].tobytes() not in wire
            for row in shard["U0"]:
                assert row.tobytes() not in wire

    def test_float32_close_to_in_process(self) -> None:
        job = replace(JOB, batches=2, train_set="n_layers=2;alpha=2;batch_size=16;dtype='float32'")
        got = run_lpgcn_job(job, _transport(_Grid(job, [1, 2])), [1, 2])
        ref = run_lpgcn_in_process(job)
        assert got.user_emb.dtype == torch.float32
        assert _rel(got.user_emb, ref.user_emb) <= 1e-5
        assert _rel(got.item_emb, ref.item_emb) <= 1e-5

    def test_lost_node_fails_naming_it(self) -> None:
        grid = _Grid(JOB, [5, 6], dead_at=(6, "loss"))
        with pytest.raises(LostNodeError, match=r"\[6\].*no dropout recovery"):
            run_lpgcn_job(JOB, _transport(grid), [5, 6])

    def test_items_nobody_holds_are_a_clear_error(self) -> None:
        job = replace(JOB, train_set="alpha=0")
        with pytest.raises(ValueError, match="held by no client"):
            run_lpgcn_job(job, _transport(_Grid(job, [1, 2])), [1, 2])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("flower-superlink", path=str(BIN)) is None, reason="no flower-superlink")
@pytest.mark.skipif(not APP_DIR.exists(), reason="deploy/flower is part of a source checkout")
class TestDeployment:
    def test_lpgcn_on_superlink_and_two_supernodes_equals_in_process(self, tmp_path: Path) -> None:
        job = replace(JOB, batches=2, min_nodes=2, stage_timeout=120.0)
        with local_federation(tmp_path, 2) as fed:
            got = flwr_run(fed, job, limit_s=LIMIT_S)
        ref = run_lpgcn_in_process(job)
        assert _rel(got["user"], ref.user_emb) <= 1e-10
        assert _rel(got["item"], ref.item_emb) <= 1e-10
        assert got["metrics"] == ref.metrics
        assert np.allclose(got["losses"], ref.losses, rtol=1e-12, atol=0)
        assert got["nodes"] == 2 and got["rounds"] == 5 + 2 * rounds_per_minibatch(2) + 2
        assert got["flower_traffic"]["rounds"] == got["rounds"]

    def test_lost_supernode_stops_lpgcn_naming_it(self, tmp_path: Path) -> None:
        job = replace(
            JOB, batches=1, min_nodes=2, stage_timeout=20.0, train_set="n_layers=1;alpha=2;batch_size=16"
        )
        lost = r"LostNodeError.*did not answer.*no dropout recovery"
        with (
            local_federation(tmp_path, 2, ["", 'crash-at="lpgcn|loss"']) as fed,
            pytest.raises(RuntimeError, match=lost),
        ):
            flwr_run(fed, job, limit_s=LIMIT_S)
