"""LP-GCN on Flower: the relay server in the ``ServerApp``, the users' shards on the SuperNodes.

The protocol's party programs are :mod:`fedgraphrec.protocols.lpgcn.distributed`; this module is the
glue. :class:`FlowerTransport` turns each of the relay server's rounds into one
``grid.send_and_receive`` (one message per SuperNode, all its users batched in it, bounded by a
timeout); :func:`lpgcn_query` is the SuperNode side, keeping the shard's state (user and
convolution-item rows, Adam moments, items, weights, the shared key S) in ``context.state`` between
messages. :func:`run_lpgcn_job` runs a :class:`~fedgraphrec.engines.flower.job.FlowerJob` over
any transport and :func:`run_lpgcn_in_process` runs the same job on the in-process engine
(:class:`~fedgraphrec.protocols.lpgcn.LPGCN`) for comparison.

Simulation shortcuts, stated plainly:

* every SuperNode loads the dataset named by the job and keeps only its users' rows, and draws the
  run's initial tables from the seed and keeps only its users' and convolution-items' rows (spec
  §11.19: both systems start from the same tables);
* the ServerApp replays the in-process triple sampler (spec §11.7), so it knows the triples, and
  it evaluates the final embeddings, which the SuperNodes export after the last forward round
  (evaluation only; during training no user row leaves a SuperNode unencrypted).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from flwr.app import Array, ArrayRecord, Context, Message, RecordDict
from flwr.serverapp import Grid

from fedgraphrec.data import Interactions
from fedgraphrec.engines.flower.job import FlowerJob, JobResult
from fedgraphrec.protocols.lpgcn.distributed import (
    LostNodeError,
    Msg,
    RelayServer,
    ShardClient,
    ShardSettings,
    Transport,
    rounds_per_minibatch,
)
from fedgraphrec.runtime.flower.records import Traffic, message_bytes, pack_arrays, unpack_arrays
from fedgraphrec.training.config import TrainConfig

__all__ = [
    "MESSAGE_TYPE",
    "FlowerTransport",
    "JobSource",
    "flower_summary",
    "handle_lpgcn",
    "job_data",
    "lpgcn_query",
    "minibatches",
    "run_lpgcn_in_process",
    "run_lpgcn_job",
    "shard_settings",
]

MESSAGE_TYPE = "query.lpgcn"
_STATE = "lpgcn.shard"
SETUP_ROUNDS = 5


@lru_cache(maxsize=2)
def _load(cfg_json: str) -> tuple[Interactions, torch.Tensor, torch.Tensor]:
    """The job's data and initial tables (cached per process: a Ray actor serves many messages)."""
    from fedgraphrec.training.learner_base import build_model
    from fedgraphrec.training.trainer import prepare_interactions

    cfg = TrainConfig(**json.loads(cfg_json))
    data = prepare_interactions(cfg)
    user0, item0 = build_model(cfg, data).layer0()
    return data, user0.detach(), item0.detach()


def job_data(cfg: TrainConfig) -> tuple[Interactions, torch.Tensor, torch.Tensor]:
    """The data and initial tables of ``cfg``'s run (loaded once per process)."""
    return _load(json.dumps(cfg.to_dict(), sort_keys=True))


class JobSource:
    """A SuperNode's view of the job's data: its users' rows and their initial rows (module docstring)."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg

    def real_items(self, users: np.ndarray) -> sp.csr_matrix:
        """The training rows of ``users``."""
        data, _, _ = job_data(self.cfg)
        return sp.csr_matrix(data.train)[users]

    def initial_rows(self, users: np.ndarray, items: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows of the run's initial user and item tables."""
        _, user0, item0 = job_data(self.cfg)
        return user0[torch.from_numpy(users)], item0[torch.from_numpy(items)]


def shard_settings(cfg: TrainConfig, n_items: int) -> ShardSettings:
    """The public hyper-parameters every party of ``cfg``'s run knows."""
    return ShardSettings(
        n_layers=cfg.n_layers,
        dim=cfg.dim,
        dtype=cfg.dtype,
        lr=cfg.lr,
        reg=cfg.reg,
        alpha=cfg.alpha,
        seed=cfg.seed,
        n_items=n_items,
    )


def handle_lpgcn(fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray], state: RecordDict) -> Msg:
    """The SuperNode's side of one round: load the shard from ``state``, answer, store it back.

    The ``keys`` round (the first) carries the job (a :class:`FlowerJob` as JSON) and the number of
    items; the node keeps both with the shard, so every later round runs under the same settings
    whatever the node's own run config says (Flower's simulation runtime passes none).
    """
    op = str(fields["op"])
    shard: dict[str, np.ndarray] = {}
    if _STATE in state.array_records:
        shard = {k: a.numpy() for k, a in state.array_records[_STATE].items()}
    if op == "keys":
        job_json, n_items = str(fields["job"]), int(fields["n_items"])
    elif "job" in shard:
        job_json, n_items = shard["job"].tobytes().decode(), int(shard["n_items"])
    else:
        raise RuntimeError(f"LP-GCN round {op!r} reached a SuperNode that never ran set-up ('keys')")
    cfg = FlowerJob.from_config(json.loads(job_json)).lpgcn_config()
    client = ShardClient(shard_settings(cfg, n_items), shard, JobSource(cfg))
    reply = client.handle(op, fields, arrays)
    shard["job"] = np.frombuffer(job_json.encode(), dtype=np.uint8).copy()
    shard["n_items"] = np.asarray(n_items)
    state[_STATE] = ArrayRecord({k: Array(np.array(v, order="C")) for k, v in shard.items()})
    return reply


def lpgcn_query(msg: Message, context: Context) -> Message:
    """``query.lpgcn`` handler of the ClientApp.

    For fault tests, ``node_config["crash-at"] = "lpgcn|<op>"`` kills this SuperNode's process group
    when a request of round ``op`` arrives (start the SuperNode in a session of its own).
    """
    fields, arrays = unpack_arrays(msg.content)
    crash = str(context.node_config.get("crash-at", ""))
    if crash and crash == f"lpgcn|{fields['op']}":
        os.killpg(os.getpgrp(), signal.SIGKILL)
    out_fields, out_arrays = handle_lpgcn(fields, arrays, context.state)
    return Message(pack_arrays(out_fields, out_arrays), reply_to=msg)


def _request(content: RecordDict, node: int, group: str) -> Message:
    """A request to SuperNode ``node``; the group id names the round in Flower's logs."""
    return Message(content, dst_node_id=node, message_type=MESSAGE_TYPE, group_id=group)


class FlowerTransport:
    """The relay server's rounds over a Flower grid: one ``send_and_receive`` per round.

    Args:
        grid: the ServerApp's grid.
        timeout: seconds to wait for the replies of one round; a SuperNode that has not answered
            by then is reported lost (:class:`LostNodeError`), never waited for forever.
        job: the run, sent to the SuperNodes with the first round (``keys``).
        n_items: sent with the first round (the SuperNodes' settings need it).
        traffic: where to record each round's latency and Flower's byte counts.
    """

    def __init__(
        self, grid: Grid, timeout: float, job: FlowerJob, n_items: int, traffic: Traffic | None = None
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive (LP-GCN rounds are bounded), got {timeout}")
        self.grid = grid
        self.timeout = timeout
        self.n_items = n_items
        self.job_json = json.dumps(job.to_config())
        self.traffic = traffic if traffic is not None else Traffic()
        self.measure: Callable[[Message], int] = message_bytes
        self.make_message: Callable[[RecordDict, int, str], Message] = _request

    def round(self, op: str, requests: Mapping[int, Msg]) -> dict[int, Msg]:
        """Send each node its request, wait for all replies (or the timeout)."""
        sent = []
        for node, (fields, arrays) in requests.items():
            first = {"job": self.job_json, "n_items": self.n_items} if op == "keys" else {}
            content = pack_arrays({"op": op, **first, **fields}, arrays)
            sent.append(self.make_message(content, node, f"lpgcn/{op}"))
        start = self.traffic.start()
        got = list(self.grid.send_and_receive(sent, timeout=self.timeout))
        self.traffic.record(op, op, sent, got, start, self.measure)
        replies: dict[int, Msg] = {}
        for m in got:
            node = m.metadata.src_node_id
            if m.has_error():
                raise RuntimeError(f"LP-GCN round {op!r}: SuperNode {node} failed: {m.error.reason}")
            replies[node] = unpack_arrays(m.content)
        missing = sorted(set(requests) - set(replies))
        if missing:
            raise LostNodeError(
                f"LP-GCN round {op!r}: SuperNode(s) {missing} did not answer within {self.timeout:.0f} s. "
                "LP-GCN has no dropout recovery (every user's rows and every convolution-item take part "
                "in every minibatch), so the run stops."
            )
        return replies


def minibatches(cfg: TrainConfig, data: Interactions, n: int) -> Iterator[tuple[torch.Tensor, ...]]:
    """The first ``n`` minibatches the in-process trainer would use (epochs in order)."""
    from fedgraphrec.training.sampler import BPRSampler

    sampler = BPRSampler(data.train, cfg.seed, "users" if cfg.sampler == "users" else "interactions")
    done, epoch = 0, 0
    while done < n:
        for batch in sampler.batches(epoch, cfg.batch_size):
            yield batch
            done += 1
            if done == n:
                return
        epoch += 1


def _phase_traffic(traffic: Traffic, n_layers: int) -> dict[str, Any]:
    """Flower's bytes and latency split into set-up, training and prediction rounds."""
    rounds = traffic.rounds
    parts = {
        "setup": rounds[:SETUP_ROUNDS],
        "train": rounds[SETUP_ROUNDS : len(rounds) - n_layers],
        "predict": rounds[len(rounds) - n_layers :],
    }
    return {
        name: {
            "rounds": len(rs),
            "sent_bytes": sum(r.sent_bytes for r in rs),
            "received_bytes": sum(r.received_bytes for r in rs),
            "seconds": sum(r.seconds for r in rs),
            "mean_round_seconds": sum(r.seconds for r in rs) / max(len(rs), 1),
        }
        for name, rs in parts.items()
    }


def run_lpgcn_job(job: FlowerJob, transport: Transport, nodes: Sequence[int]) -> JobResult:
    """Set-up, ``job.batches`` minibatches and prediction over ``transport``; metrics as in-process."""
    from fedgraphrec.training.trainer import evaluate_embeddings_on

    cfg = job.lpgcn_config()
    data, _, _ = job_data(cfg)
    server = RelayServer(transport, shard_settings(cfg, data.n_items), data.n_users, nodes)
    start = time.perf_counter()
    server.setup()
    losses = [
        server.train_step(u.numpy(), p.numpy(), n.numpy()) for u, p, n in minibatches(cfg, data, job.batches)
    ]
    pred = server.predict()
    metrics = evaluate_embeddings_on(pred.user, pred.item, data, list(cfg.ks))
    extra: dict[str, object] = {
        "protocol": "lpgcn",
        "minibatches": job.batches,
        "rounds": server.rounds,
        "setup_rounds": SETUP_ROUNDS,
        "rounds_per_minibatch": rounds_per_minibatch(cfg.n_layers),
        "predict_rounds": cfg.n_layers,
        "wall_seconds": time.perf_counter() - start,
    }
    return JobResult(pred.user, pred.item, metrics, losses, {}, extra=extra)


def run_lpgcn_in_process(job: FlowerJob) -> JobResult:
    """The same job on the in-process engine (:class:`~fedgraphrec.protocols.lpgcn.LPGCN`)."""
    from fedgraphrec.training.learners import LPGCNLearner
    from fedgraphrec.training.trainer import evaluate_embeddings_on

    cfg = job.lpgcn_config()
    data, _, _ = job_data(cfg)
    learner = LPGCNLearner(cfg, data)
    start = time.perf_counter()
    losses = [learner.train_batch(u, p, n).loss for u, p, n in minibatches(cfg, data, job.batches)]
    user, item = learner.embeddings()
    metrics = evaluate_embeddings_on(user, item, data, list(cfg.ks))
    ledger = learner.protocol.net.ledger
    phases: dict[str, int] = {"setup": 0, "train": 0, "predict": 0}
    for row in ledger.rows():
        key = (
            "setup"
            if row.phase.startswith("setup/")
            else "predict"
            if row.phase.startswith("predict/")
            else "train"
        )
        phases[key] += row.payload_bytes
    result = JobResult(user, item, metrics, losses, ledger.to_dict())
    result.extra = {"protocol": "lpgcn", "wall_seconds": time.perf_counter() - start, "ledger_bytes": phases}
    return result


def flower_summary(result: JobResult, traffic: Traffic, n_layers: int, nodes: int) -> None:
    """Add the Flower-side measurements (per-round latency, Flower-counted bytes) to ``result.extra``."""
    result.extra.update(
        engine="flower",
        nodes=nodes,
        flower_traffic=traffic.summary(),
        flower_phases=_phase_traffic(traffic, n_layers),
    )
