"""A FedNCF node checks every request against its own expectation and stage order (issue 30 §1).

Two nodes, ``real`` crypto (full secure aggregation). The server rewrites a stage's requests before
they reach a node's public handler, or calls it directly: secure aggregation's sealed shares
relabelled ``plain`` with blobs of its own or under another phase, the sum run a second time in a
round or before the local step, a sum under another round's session or of another length, a replayed
round, rows in another dtype, weights of another length. Each is an :class:`IntegrityError`.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.baselines.fedncf import roles as R
from fedgraphrec.protocols.secagg.policy import threshold_for
from fedgraphrec.protocols.secagg.roles import ADVERTISE, MASK, SHARE, UNMASK
from fedgraphrec.runtime.message import Message
from fedgraphrec.training.protocol_learner import ProtocolLearner
from tests.protocols.lying_server import Tamper, learner, local, lying, with_fields, with_part

SMALL = [
    "dataset_options.n_users=16", "dataset_options.n_items=20", "dataset_options.mean_degree=4.0",
    "dim=4", "dtype='float64'", "clients_per_round=8", "local_steps=2", "n_negatives=4", "ks=[5]",
    "metric='recall@5'", "ncf_hidden=[6, 3]",
]  # fmt: skip


def _learner() -> ProtocolLearner:
    return learner("fedncf", SMALL, model="ncf")


def test_the_honest_run_is_accepted() -> None:
    run = _learner()
    for r in range(2):
        run.server.train_round(r)
    run.server.predict()
    assert run.server.evaluate([5])["test"]["recall@5"] >= 0.0
    assert run.server.evaluate([5])["test"]["recall@5"] >= 0.0  # an evaluation of its own (new step)
    run.server.train_round(2)


def test_shares_relabelled_plain_with_the_servers_own_blobs_are_refused() -> None:
    def own_blobs(node: int, msg: Message) -> Message:
        if "shares" not in msg:
            return msg
        part = msg["shares"]
        forged = replace(part, protection="plain", presealed=False, value=[bytes(len(b)) for b in part.value])
        return Message({**msg.parts, "shares": forged}, msg.fields)

    run = _learner()
    with (
        lying(run, MASK, own_blobs),
        pytest.raises(IntegrityError, match=r"secagg/mask.*protection 'plain'.*expects 'sealed'"),
    ):
        run.server.train_round(0)


def test_shares_under_another_phase_are_refused() -> None:
    def relabel(node: int, msg: Message) -> Message:
        if "shares" not in msg:
            return msg
        return with_part("shares", phase="train/upload/secagg-advertise-keys")(node, msg)

    run = _learner()
    with (
        lying(run, MASK, relabel),
        pytest.raises(IntegrityError, match=r"phase 'train/upload/secagg-advertise-keys'"),
    ):
        run.server.train_round(0)


def test_the_roster_downgraded_or_relabelled_is_refused() -> None:
    run = _learner()
    with (
        lying(run, "secagg/share", with_part("roster", phase=f"{R.PH_UPLOAD}/secagg-unmask")),
        pytest.raises(IntegrityError, match=r"secagg/share.*phase 'train/upload/secagg-unmask'"),
    ):
        run.server.train_round(0)


def test_a_second_secure_sum_in_a_round_is_refused() -> None:
    run = _learner()
    seen: dict[int, Message] = {}

    def keep(node: int, msg: Message) -> Message:
        seen[node] = msg
        return msg

    with lying(run, ADVERTISE, keep):
        run.server.train_round(0)
    transport, node = local(run), next(iter(seen))
    with pytest.raises(IntegrityError, match="'secagg/advertise' may not follow 'secagg/unmask'"):
        transport.endpoints[node].handle(transport.programs[node], ADVERTISE, run.net.step, seen[node])


def test_the_local_stage_twice_or_the_sum_before_it_is_refused() -> None:
    run = _learner()
    seen: dict[str, dict[int, Message]] = {R.ST_QUERY: {}, R.ST_LOCAL: {}}
    with ExitStack() as stack:
        for stage in seen:

            def keep(node: int, msg: Message, stage: str = stage) -> Message:
                seen[stage][node] = msg
                return msg

            stack.enter_context(lying(run, stage, keep))
        run.server.train_round(0)
    transport = local(run)
    node = next(iter(seen[R.ST_LOCAL]))
    endpoint, program = transport.endpoints[node], transport.programs[node]
    with pytest.raises(IntegrityError, match="'train/local' may not follow 'secagg/unmask'"):
        endpoint.handle(program, R.ST_LOCAL, run.net.step, seen[R.ST_LOCAL][node])
    query = with_fields(round=1)(node, seen[R.ST_QUERY][node])
    endpoint.handle(program, R.ST_QUERY, run.net.step + 1, query)
    with pytest.raises(IntegrityError, match="'secagg/advertise' may not follow 'train/query'"):
        endpoint.handle(program, ADVERTISE, run.net.step + 1, Message(fields={"phase": R.PH_UPLOAD}))


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        (
            "session",
            "fedncf/round/7",
            r"field 'session' is 'fedncf/round/7'; this node expects 'fedncf/round/0'",
        ),
        ("length", 5, r"field 'length' is 5"),
        ("phase", "train/other", r"field 'phase' is 'train/other'"),
        ("real", False, r"field 'real' is False; this node expects True"),  # the shard's sum unmasked
    ],
)
def test_a_secure_sum_field_the_node_knows_is_checked(field: str, value: object, match: str) -> None:
    run = _learner()
    with lying(run, ADVERTISE, with_fields(**{field: value})), pytest.raises(IntegrityError, match=match):
        run.server.train_round(0)


def test_a_replayed_round_is_refused() -> None:
    run = _learner()
    run.server.train_round(3)
    with pytest.raises(IntegrityError, match=r"field 'round' is 2.*already trained round 3"):
        run.server.train_round(2)


def test_rows_in_another_dtype_or_weights_of_another_length_are_refused() -> None:
    def to_float32(node: int, msg: Message) -> Message:
        part = msg[R.P_DOWNLOAD]
        return Message({R.P_DOWNLOAD: replace(part, value=torch.as_tensor(part.value).float())}, msg.fields)

    run = _learner()
    with lying(run, R.ST_LOCAL, to_float32), pytest.raises(IntegrityError, match=r"torch\.float32"):
        run.server.train_round(0)
    run = _learner()

    def one_weight_more(node: int, msg: Message) -> Message:
        return with_fields(weights=[*msg.fields[R.F_WEIGHTS], 0.0])(node, msg)

    with lying(run, R.ST_LOCAL, one_weight_more), pytest.raises(IntegrityError, match="shared weights"):
        run.server.train_round(0)


def test_the_unmask_stage_with_clients_the_node_does_not_have_is_refused() -> None:
    def foreign(node: int, msg: Message) -> Message:
        return with_fields(clients=[*msg.fields["clients"], 10_000])(node, msg)

    run = _learner()
    with lying(run, UNMASK, foreign), pytest.raises(IntegrityError, match="field 'clients'"):
        run.server.train_round(0)


def _fewer(node: int, msg: Message) -> Message:
    """Tell the node its own clients are the whole sum, with the threshold of that (a consistent lie)."""
    n = len(msg.fields["clients"])
    return with_fields(n_clients=n, threshold=threshold_for(n, 0.6))(node, msg)


@pytest.mark.parametrize(
    ("stage", "tamper", "match"),
    [
        (ADVERTISE, with_fields(threshold=1), r"'secagg/advertise'.*field 'threshold' is 1"),
        (ADVERTISE, with_fields(n_clients=1), r"field 'n_clients' is 1, fewer than this node's own"),
        (SHARE, with_fields(threshold=1), r"'secagg/share'.*field 'threshold' is 1"),
        (SHARE, with_fields(n_advertised=2), r"field 'n_advertised' is 2; the roster holds another"),
    ],
)
def test_a_lowered_threshold_is_refused(stage: str, tamper: Tamper, match: str) -> None:
    """With ``t`` too low the server could collect both kinds of shares of one client and unmask it."""
    run = _learner()
    with lying(run, stage, tamper), pytest.raises(IntegrityError, match=match):
        run.server.train_round(0)


def test_a_threshold_lowered_consistently_is_refused_at_the_roster() -> None:
    """The server tells each node that the sum has only the node's clients, then sends the full roster."""
    run = _learner()
    with ExitStack() as stack:
        stack.enter_context(lying(run, ADVERTISE, _fewer))
        low: dict[int, int] = {}

        def same_low(node: int, msg: Message) -> Message:
            low[node] = threshold_for(len(msg.fields["clients"]), 0.6)
            return with_fields(threshold=low[node])(node, msg)

        stack.enter_context(lying(run, SHARE, same_low))
        with pytest.raises(
            IntegrityError, match=r"'secagg/share'.*field 'threshold' is \d+; this node expects"
        ):
            run.server.train_round(0)


def test_shares_rerouted_to_a_client_outside_the_sum_are_refused() -> None:
    def reroute(node: int, msg: Message) -> Message:
        if "shares" not in msg:
            return msg
        part = msg["shares"]
        outside = sorted(set(local(run).programs[node].clients.tolist()) - set(msg.fields["clients"]))
        assert part.receivers is not None and outside
        return with_part("shares", receivers=np.full_like(part.receivers, outside[0]))(node, msg)

    run = _learner()
    with lying(run, MASK, reroute), pytest.raises(IntegrityError, match="receivers that are not this node's"):
        run.server.train_round(0)
