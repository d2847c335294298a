"""P4GCN's organisation programs check what they receive against their own state (a lying coordinator)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.he.plain import PlainBackend
from fedgraphrec.protocols.p4gcn.driver import P4GCNRun
from fedgraphrec.protocols.p4gcn.roles import (
    NODE_OF,
    PH_GRAD,
    PH_IDS,
    RECOMMENDER,
    SOCIAL,
    ST_BACKWARD,
    ST_FORWARD,
    ST_HELLO,
    ST_IDS,
    ST_RELEASE,
    ST_SETUP,
)
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.protocols.p4gcn.social_program import SocialData, SocialProgram
from fedgraphrec.protocols.p4gcn.wire import he_part, ids_part, relay
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import Network

N_USERS, N_ITEMS, DIM = 12, 10, 4
P1, P2 = NODE_OF[RECOMMENDER], NODE_OF[SOCIAL]


def _run(**kw: object) -> P4GCNRun:
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(N_USERS), 4)
    items = rng.integers(0, N_ITEMS, size=len(users))
    ratings = rng.integers(1, 6, size=len(users)).astype(float)
    a = np.triu(rng.random((N_USERS, N_USERS)) < 0.3, 1)
    adj = sp.csr_matrix((a | a.T).astype(float))
    s = P4GCNSettings(**{"dim": DIM, "batch": 8, "epochs": 1, "eps": 5.0, **kw})  # type: ignore[arg-type]
    return P4GCNRun((users, items, ratings), N_USERS, N_ITEMS, adj, s, PlainBackend(512), (1.0, 5.0), seed=3)


def _to_social(run: P4GCNRun, stage: str, message: Message, step: int) -> Message:
    run.transport.begin_step(step)
    return run.transport.round(stage, {P2: message})[P2]


def _ids(users: list[int]) -> Message:
    return Message({"ids": relay(ids_part(np.array(users), RECOMMENDER, SOCIAL, PH_IDS))})


def test_the_social_party_refuses_a_gradient_for_a_batch_it_did_not_forward() -> None:
    run = _run()
    grad = he_part(run.backend, run.backend.encrypt(np.zeros((2, DIM))), PH_GRAD, "social_gradient",
                   RECOMMENDER, SOCIAL, serialise=False)  # fmt: skip
    with pytest.raises(IntegrityError, match=r"may not follow|cannot open a new step"):
        _to_social(run, ST_BACKWARD, Message({"grad": relay(grad)}), step=2)


def test_the_social_party_refuses_a_gradient_of_another_batch_size() -> None:
    run = _run()
    _to_social(run, ST_FORWARD, _ids([0, 3, 5]), step=2)
    grad = he_part(run.backend, run.backend.encrypt(np.zeros((2, DIM))), PH_GRAD, "social_gradient",
                   RECOMMENDER, SOCIAL, serialise=False)  # fmt: skip
    with pytest.raises(IntegrityError, match=r"\(2, 4\) ciphertext matrix; this party expects \(3, 4\)"):
        run.transport.round(ST_BACKWARD, {P2: Message({"grad": relay(grad)})})


@pytest.mark.parametrize(
    ("users", "why"),
    [([0, N_USERS], "in \\[0, 12\\)"), ([3, 1], "sorted"), ([2, 2], "distinct"), (list(range(9)), "1 to 8")],
)
def test_the_social_party_refuses_bad_batch_ids(users: list[int], why: str) -> None:
    with pytest.raises(IntegrityError, match=why):
        _to_social(_run(), ST_FORWARD, _ids(users), step=2)


def test_the_social_party_refuses_ids_relabelled_or_from_the_coordinator_itself() -> None:
    run = _run()
    own = Message({"ids": ids_part(np.array([0, 1]), "server", SOCIAL, PH_IDS)})  # not relayed from P1
    with pytest.raises(IntegrityError, match="origin role"):
        _to_social(run, ST_FORWARD, own, step=2)
    msg = _ids([0, 1])
    msg.parts["ids"] = replace(msg.parts["ids"], phase=PH_GRAD)
    with pytest.raises(IntegrityError, match="phase"):
        _to_social(_run(), ST_FORWARD, msg, step=2)


def test_the_social_party_refuses_iterations_beyond_the_plan() -> None:
    run = _run()
    run.run_epoch(0)  # the whole plan: one epoch
    with pytest.raises(IntegrityError, match="planned iterations ran"):
        _to_social(run, ST_FORWARD, _ids([0, 1]), step=run.server.step + 1)


def test_the_social_party_releases_every_user_once() -> None:
    run = _run(eval_chunk=5)
    run.final_release()
    with pytest.raises(IntegrityError, match="already"):
        _to_social(run, ST_RELEASE, Message(), step=run.server.step + 1)


@pytest.mark.parametrize("sensitivity", ["global", "paper-local"])
def test_the_social_party_refuses_a_plan_with_weaker_noise(sensitivity: str) -> None:
    """A recommender announcing more batches than K covers would get less noise per release."""
    run = _run(sensitivity=sensitivity)
    plan = {"n_users": N_USERS, "batches": 6, "batches_per_epoch": 6, "releases": 2 * 6 + 2}
    social = SocialProgram(run.settings, np.array([P2]), SocialData(run.social.own.adjacency, 3),
                           backend=run.backend)  # fmt: skip
    transport = LocalTransport(Network(0, protocol="p4gcn"), {P2: social})
    x = he_part(run.backend, run.backend.encrypt(np.zeros((N_USERS, DIM))), "setup/x", "embedding",
                RECOMMENDER, SOCIAL, serialise=False)  # fmt: skip
    transport.begin_step(1)
    transport.round(ST_HELLO, {P2: Message()})
    with pytest.raises(IntegrityError, match="K = 14 releases"):
        transport.round(ST_SETUP, {P2: Message({"x": relay(x)}, fields=plan)})


def test_the_recommender_refuses_a_batch_out_of_its_schedule_order() -> None:
    run = _run()
    run.transport.begin_step(2)
    with pytest.raises(IntegrityError, match="next batch of this party's schedule is 0"):
        run.transport.round(ST_IDS, {P1: Message(fields={"batch": 1})})
