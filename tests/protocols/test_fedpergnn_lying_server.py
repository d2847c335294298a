"""A FedPerGNN node checks every request against its own expectation and stage order (issue 30 §1).

Two nodes, ``real`` crypto. The server (and the third party it hosts) lies by rewriting a stage's
requests before they reach a node's public handler (:meth:`NodeEndpoint.handle`), or by calling it
directly: a part under another phase (the prediction's neighbours replayed in a round), a part from
another sender role or in another dtype, a stage run twice in a step or out of order, a replayed
round, users the node does not host, rows other than the ones its users asked for, a key bundle with
a key of the server's own. Each is an :class:`IntegrityError`; the honest run is accepted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.baselines.fedpergnn import roles as R
from fedgraphrec.protocols.baselines.fedpergnn.server import FedPerGNNServer
from fedgraphrec.runtime.message import Message
from fedgraphrec.training.protocol_learner import ProtocolLearner
from tests.protocols.lying_server import Lie, Requests, local, lying, with_part
from tests.protocols.lying_server import learner as make

SMALL = [
    "dataset_options.n_users=16", "dataset_options.n_items=20", "dataset_options.mean_degree=4.0",
    "dim=4", "dtype='float64'", "clients_per_round=8", "local_steps=2", "n_negatives=4", "ks=[5]",
    "metric='recall@5'",
]  # fmt: skip


def _learner(lie: tuple[str, Lie] | None = None) -> ProtocolLearner:
    return make("fedpergnn", SMALL, lie)


def test_the_honest_run_is_accepted() -> None:
    learner = _learner()
    for r in range(3):
        learner.server.train_round(r)
    learner.embeddings()
    learner.server.predict()
    assert learner.server.evaluate([5])["test"]["recall@5"] >= 0.0
    learner.server.train_round(3)  # a round after evaluation opens its own step


def test_the_predictions_neighbours_replayed_in_a_round_are_refused() -> None:
    learner = _learner()
    with (
        lying(learner, R.ST_QUERY, with_part(R.P_NEIGHBOURS, phase=R.PH_PREDICT_NEIGHBOURS)),
        pytest.raises(IntegrityError, match=r"train/query.*phase 'predict/expand-download'"),
    ):
        learner.server.train_round(0)


def test_neighbours_not_from_the_third_party_are_refused() -> None:
    learner = _learner()
    with (
        lying(learner, R.ST_QUERY, with_part(R.P_NEIGHBOURS, sender_role=R.SERVER)),
        pytest.raises(IntegrityError, match=r"sender role 'server'.*expects 'third-party'"),
    ):
        learner.server.train_round(0)


def test_rows_in_another_dtype_are_refused() -> None:
    def to_float32(node: int, msg: Message) -> Message:
        part = msg[R.P_DOWNLOAD]
        rows = torch.as_tensor(part.value).float()
        return Message({R.P_DOWNLOAD: replace(part, value=rows)}, msg.fields)

    learner = _learner()
    with (
        lying(learner, R.ST_LOCAL, to_float32),
        pytest.raises(IntegrityError, match=r"train/local.*torch.float32.*expects torch.float64"),
    ):
        learner.server.train_round(0)


def test_rows_other_than_the_queried_ones_are_refused() -> None:
    def one_row_less(node: int, msg: Message) -> Message:
        part = msg[R.P_DOWNLOAD]
        assert part.counts is not None
        counts = part.counts.copy()
        counts[0] -= 1
        rows = torch.as_tensor(part.value)[1:]
        return Message({R.P_DOWNLOAD: replace(part, value=rows, counts=counts, _sizes=None)}, msg.fields)

    learner = _learner()
    with (
        lying(learner, R.ST_LOCAL, one_row_less),
        pytest.raises(IntegrityError, match="one row per queried item"),
    ):
        learner.server.train_round(0)


def test_the_local_stage_run_twice_in_a_step_is_refused() -> None:
    learner = _learner()
    seen: dict[int, Message] = {}

    def keep(node: int, msg: Message) -> Message:
        seen[node] = msg
        return msg

    with lying(learner, R.ST_LOCAL, keep):
        learner.server.train_round(0)
    transport = local(learner)
    node = next(iter(seen))
    with pytest.raises(IntegrityError, match="'train/local' may not follow 'train/local'"):
        transport.endpoints[node].handle(transport.programs[node], R.ST_LOCAL, learner.net.step, seen[node])


def test_stages_out_of_order_are_refused() -> None:
    learner = _learner()
    transport, step = local(learner), learner.net.step
    other = next(n for n, p in learner.programs.items() if 0 not in p.clients)  # not the key holder's
    assert transport.endpoints[other].flow.stage == R.ST_EXPAND
    with pytest.raises(IntegrityError, match="'train/local' may not follow 'setup/expand'"):
        transport.endpoints[other].handle(transport.programs[other], R.ST_LOCAL, step + 1, Message())
    with pytest.raises(IntegrityError, match="'setup/wrap' may not follow 'setup/expand'"):
        transport.endpoints[other].handle(transport.programs[other], R.ST_WRAP, step + 1, Message())
    with pytest.raises(IntegrityError, match="'evaluate' may not follow 'setup/expand'"):
        learner.server.evaluate([5])  # evaluation before any prediction


def test_the_key_wrapped_by_a_node_without_the_key_holder_is_refused() -> None:
    def to_the_other_node(requests: Requests) -> Requests:
        (holder, msg), other = next(iter(requests.items())), None
        other = 1 - holder
        return {other: msg}

    with pytest.raises(IntegrityError, match="'setup/wrap' may not follow 'setup/keys'"):
        _learner(lie=(R.ST_WRAP, to_the_other_node))


def test_a_second_prediction_in_the_same_step_is_refused() -> None:
    learner = _learner()
    learner.server.train_round(0)
    learner.server.predict()
    server = cast(FedPerGNNServer, learner.server)
    server.next_step = lambda: None  # type: ignore[method-assign] # the lying server keeps the step
    with pytest.raises(IntegrityError, match="'predict' already ran 1 time"):
        server.predict()


def test_a_replayed_round_is_refused() -> None:
    learner = _learner()
    learner.server.train_round(0)
    with pytest.raises(IntegrityError, match=r"field 'round' is 0.*already trained round 0"):
        learner.server.train_round(0)


@pytest.mark.parametrize("forge", ["foreign", "twice"])
def test_sampled_users_the_node_cannot_have_are_refused(forge: str) -> None:
    def users(node: int, msg: Message) -> Message:
        ids = list(msg.fields[R.F_CLIENTS])
        ids = [*ids, ids[-1] + 1] if forge == "foreign" else [ids[0], *ids]
        return Message(dict(msg.parts), {**msg.fields, R.F_CLIENTS: ids})

    learner = _learner()
    with (
        lying(learner, R.ST_QUERY, users),
        pytest.raises(IntegrityError, match=r"field 'clients': not distinct users of this node"),
    ):
        learner.server.train_round(0)


def test_a_public_key_bundle_with_a_key_of_the_servers_own_is_refused() -> None:
    def extra_key(requests: Requests) -> Requests:
        add = with_part(
            R.P_PUBLIC_KEYS, value=[next(iter(requests.values()))[R.P_PUBLIC_KEYS].value[0] + bytes(32)]
        )
        return {n: add(n, m) for n, m in requests.items()}

    with pytest.raises(IntegrityError, match=r"setup/wrap.*17 public key\(s\).*16 users"):
        _learner(lie=(R.ST_WRAP, extra_key))
