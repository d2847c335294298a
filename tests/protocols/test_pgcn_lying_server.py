"""A P-GCN node checks every request against its own expectation and stage order (issue 30 §1).

Two nodes, ``real`` crypto, two layers: per training step two forward layers, each with its secure
sum, then the local step and the gradients' secure sum. The server rewrites a stage's requests before
they reach a node's public handler, or calls it directly: the sealed shares of every sum (degrees,
each layer, gradients, prediction) relabelled ``plain`` with blobs of its own; the shares of another
layer or step replayed (keeping their label or relabelled); a sum or the local step run again in a
step; the local step before every layer arrived; the layer ``k``, the forward's session or a sum's
session forged. Each is an :class:`IntegrityError`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace

import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.baselines.pgcn import roles as R
from fedgraphrec.protocols.secagg.roles import ADVERTISE, MASK
from fedgraphrec.runtime.message import Message
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler
from tests.protocols.lying_server import Lie, Tamper, learner, local, lying, with_fields, with_part

SMALL = [
    "dataset_options.n_users=12", "dataset_options.n_items=15", "dataset_options.mean_degree=4.0",
    "dim=4", "dtype='float64'", "n_layers=2", "batch_size=8", "ks=[5]", "metric='recall@5'",
]  # fmt: skip
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _learner(lie: tuple[str, Lie] | None = None) -> tuple[ProtocolLearner, list[Batch]]:
    cfg = load_config(None, SMALL, protocol="pgcn", model="lightgcn+", dataset="synthetic")
    batches = list(itertools.islice(BPRSampler(prepare_interactions(cfg).train, cfg.seed).batches(0, 8), 3))
    return learner("pgcn", SMALL, lie, model="lightgcn+"), batches


def _nth(n: int, tamper: Tamper) -> Tamper:
    """``tamper`` only the ``n``-th round of the stage (counting from 0; all nodes of that round)."""
    calls: dict[int, int] = {}

    def at(node: int, msg: Message) -> Message:
        calls[node] = calls.get(node, 0) + 1
        return tamper(node, msg) if calls[node] == n + 1 else msg

    return at


def _own_blobs(node: int, msg: Message) -> Message:
    if "shares" not in msg:
        return msg
    part = msg["shares"]
    forged = replace(part, protection="plain", presealed=False, value=[bytes(len(b)) for b in part.value])
    return Message({**msg.parts, "shares": forged}, msg.fields)


def test_the_honest_run_is_accepted() -> None:
    run, batches = _learner()
    for b in batches[:2]:
        run.train_batch(*b)
    run.server.predict()
    assert run.server.evaluate([5])["test"]["recall@5"] >= 0.0
    run.embeddings()
    run.train_batch(*batches[2])


@pytest.mark.parametrize(("which", "phase"), [(0, "train/forward"), (1, "train/forward"), (2, "train/item")])
def test_shares_of_every_training_sum_relabelled_plain_are_refused(which: int, phase: str) -> None:
    run, batches = _learner()
    with (
        lying(run, MASK, _nth(which, _own_blobs)),
        pytest.raises(
            IntegrityError, match=rf"secagg/mask.*protection 'plain'.*expects 'sealed' \(phase {phase}"
        ),
    ):
        run.train_batch(*batches[0])


def test_shares_of_the_degrees_and_of_a_prediction_relabelled_plain_are_refused() -> None:
    with pytest.raises(IntegrityError, match=r"protection 'plain'.*phase setup/degrees/"):
        _learner(lie=(MASK, lambda reqs: {n: _own_blobs(n, m) for n, m in reqs.items()}))
    run, _ = _learner()
    with (
        lying(run, MASK, _own_blobs),
        pytest.raises(IntegrityError, match=r"protection 'plain'.*phase predict/forward/propagate/"),
    ):
        run.server.predict()


def _replay(capture_at: int, deliver_at: Callable[[int], bool], **relabel: str) -> Tamper:
    """Keep the shares of the ``capture_at``-th sum; deliver them instead at the sums ``deliver_at``."""
    calls: dict[int, int] = {}
    kept: dict[int, Message] = {}

    def tamper(node: int, msg: Message) -> Message:
        n = calls[node] = calls.get(node, -1) + 1
        if n == capture_at and "shares" in msg:
            kept[node] = msg
        if deliver_at(n) and node in kept:
            old = kept[node]["shares"]
            return Message({**msg.parts, "shares": replace(old, **relabel)}, msg.fields)
        return msg

    return tamper


def test_a_deeper_layers_shares_replayed_at_a_shallower_layer_are_refused() -> None:
    """Layer 1's shares of one step at layer 0 of the next: same phase, another session."""
    run, batches = _learner()
    with lying(run, MASK, _replay(1, lambda n: n == 3)), pytest.raises(IntegrityError, match="secagg share"):
        run.train_batch(*batches[0]), run.train_batch(*batches[1])


@pytest.mark.parametrize("relabel", [False, True])
def test_the_gradients_shares_replayed_at_a_layer_are_refused(relabel: bool) -> None:
    """The gradients' shares (sum 2) at the next step's layer 0, keeping their phase or relabelled."""
    run, batches = _learner()
    phase = dict(phase="train/forward/propagate/secagg-share-keys") if relabel else {}
    match = "secagg share" if relabel else r"phase 'train/item-gradients/secagg-share-keys'"
    with lying(run, MASK, _replay(2, lambda n: n == 3, **phase)), pytest.raises(IntegrityError, match=match):
        run.train_batch(*batches[0]), run.train_batch(*batches[1])


def test_the_gradients_sum_or_the_local_step_run_again_is_refused() -> None:
    run, batches = _learner()
    seen: dict[str, dict[int, Message]] = {ADVERTISE: {}, R.ST_LOCAL: {}}

    def keep(stage: str) -> Tamper:
        def at(node: int, msg: Message) -> Message:
            seen[stage][node] = msg
            return msg

        return at

    with lying(run, ADVERTISE, keep(ADVERTISE)), lying(run, R.ST_LOCAL, keep(R.ST_LOCAL)):
        run.train_batch(*batches[0])
    transport = local(run)
    node = next(iter(seen[R.ST_LOCAL]))
    endpoint, program, step = transport.endpoints[node], transport.programs[node], run.net.step
    with pytest.raises(IntegrityError, match="'secagg/advertise' may not follow 'secagg/unmask'"):
        endpoint.handle(program, ADVERTISE, step, seen[ADVERTISE][node])
    with pytest.raises(IntegrityError, match="'train/local' already ran 1 time"):
        endpoint.handle(program, R.ST_LOCAL, step, seen[R.ST_LOCAL][node])
    with pytest.raises(IntegrityError, match="the degrees come once, after their secure sum"):
        endpoint.handle(program, R.ST_DEGREES, step, Message())


def test_the_local_step_without_the_last_layer_is_refused() -> None:
    """The last training layer's table is optional (nodes without triples); a node with triples needs it."""

    def drop_items(node: int, msg: Message) -> Message:
        return Message({k: p for k, p in msg.parts.items() if k != R.P_ITEMS}, msg.fields)

    run, batches = _learner()
    with (
        lying(run, R.ST_FORWARD, _nth(1, drop_items)),
        pytest.raises(IntegrityError, match="did not receive every layer"),
    ):
        run.train_batch(*batches[0])


@pytest.mark.parametrize(
    ("tamper", "match"),
    [
        (with_fields(k=1), r"field 'k' is 1; this node expects 0"),
        (with_fields(session="pgcn/train/0"), r"field 'session' is 'pgcn/train/0'"),
        (with_part(R.P_ITEMS, phase="predict/forward/download"), r"phase 'predict/forward/download'"),
    ],
)
def test_a_forward_field_the_node_knows_is_checked(tamper: Tamper, match: str) -> None:
    run, batches = _learner()
    with lying(run, R.ST_FORWARD, tamper), pytest.raises(IntegrityError, match=match):
        run.train_batch(*batches[0])


def test_a_layers_sum_under_the_previous_layers_session_is_refused() -> None:
    """Reusing a session would reuse its masks: two masked inputs would differ by their inputs' difference."""
    run, batches = _learner()
    step = run.net.step + 1
    previous = f"pgcn/train/{step}/layer/0"
    with (
        lying(run, ADVERTISE, _nth(1, with_fields(session=previous))),
        pytest.raises(IntegrityError, match=rf"field 'session' is '{previous}'.*layer/1'"),
    ):
        run.train_batch(*batches[0])


@pytest.mark.parametrize("which", [0, 2])
def test_a_sum_downgraded_to_accounted_mode_is_refused(which: int) -> None:
    """In ``accounted`` mode a node would upload its shard's sum of encodings unmasked."""
    run, batches = _learner()
    with (
        lying(run, ADVERTISE, _nth(which, with_fields(real=False))),
        pytest.raises(IntegrityError, match=r"field 'real' is False; this node expects True"),
    ):
        run.train_batch(*batches[0])


def test_a_lowered_threshold_of_a_layers_sum_is_refused() -> None:
    run, batches = _learner()
    with (
        lying(run, ADVERTISE, _nth(1, with_fields(threshold=1))),
        pytest.raises(IntegrityError, match=r"field 'threshold' is 1; this node expects"),
    ):
        run.train_batch(*batches[0])
