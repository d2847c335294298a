"""A lying server cannot lower what protects a client in secure aggregation (issue 30 §2).

The client takes its threshold fraction, minimum roster size, semi-honest opt-in and crypto mode
from its own settings. Each test plays the server: it runs :func:`secure_sum` over a transport
whose requests it alters before the nodes' public handler sees them, or sends hand-made requests
to a client program's :meth:`~fedgraphrec.protocols.base.ClientProgram.handle`, and checks that the
client refuses with :class:`IntegrityError` naming the stage and the parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch

from fedgraphrec.attacks.secagg_params import SECAGG_LIES, SecAggLie
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.base import ClientProgram, NodeData, shard_of
from fedgraphrec.protocols.fedgrec.roles import UPLOAD, session
from fedgraphrec.protocols.fedgrec.sampling import sample_clients
from fedgraphrec.protocols.secagg.client import SecAggState, SecureSumClient
from fedgraphrec.protocols.secagg.expect import (
    sum_expectation,
)
from fedgraphrec.protocols.secagg.server import secure_sum
from fedgraphrec.protocols.secagg.upload import SparseUpload
from fedgraphrec.protocols.settings import SecureSumSettings
from fedgraphrec.runtime.expect import Expectation, StageFlow
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import Network
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner
from tests.protocols.test_secagg_rounds import TOY_FLOW

N, L, FRAC = 9, 4, 40
Lie = Callable[[str, int, Message], None]


@dataclass(frozen=True)
class ToySettings(SecureSumSettings):
    """The client's own settings: the secure-sum group plus its inputs."""

    x: Any = None


@dataclass
class ToyState:
    secagg: SecAggState = field(default_factory=SecAggState)


class ToyClient(SecureSumClient, ClientProgram[ToyState]):
    """Client u's input is row u of ``settings.x``."""

    def __init__(self, settings: Any, clients: np.ndarray, data: NodeData | None) -> None:
        super().__init__(settings, clients, data)
        self.state = ToyState()

    def stage_flow(self) -> StageFlow:
        return TOY_FLOW

    def expect(self, stage: str) -> Expectation:
        return sum_expectation(stage, "toy/up")

    def secagg_input(self, session: str) -> SparseUpload:
        x = self.settings.x[torch.from_numpy(self.clients)]
        up = SparseUpload(self.clients, L)
        up.add(torch.arange(len(self.clients)).repeat_interleave(L), torch.arange(L).repeat(len(self.clients)),
               x.reshape(-1))  # fmt: skip
        return up


class LyingTransport(LocalTransport):
    """The server: ``lie(stage, node, request)`` alters each request before the node handles it."""

    lie: Lie | None = None

    def round(self, stage: str, requests: Any, *, allow_loss: bool = False) -> dict[int, Message]:
        if self.lie is not None:
            for node, request in requests.items():
                self.lie(stage, node, request)
        return super().round(stage, requests, allow_loss=allow_loss)


def _sum(crypto: str, threshold: int, lie: Lie | None = None, n: int = N, **own: Any) -> torch.Tensor:
    """Run one secure sum among ``n`` clients on three nodes, with the server telling ``lie``."""
    x = torch.arange(n * L, dtype=torch.float64).reshape(n, L) / 7
    settings = ToySettings(x=x, frac_bits=FRAC, crypto=crypto, **own)
    shards = shard_of(n, [0, 1, 2])
    net = Network(n, crypto=crypto, protocol="toy")  # type: ignore[arg-type]
    transport = LyingTransport(net, {k: ToyClient(settings, ids, None) for k, ids in shards.items()})
    transport.lie = lie
    net.begin_step(0)
    result = secure_sum(
        transport, phase="toy/up", session="toy/0", participants=shards, length=L, threshold=threshold,
        frac_bits=FRAC,
    )  # fmt: skip
    assert torch.allclose(result.total, x.sum(0))
    return result.total


def _set(stage: str, **values: Any) -> Lie:
    def lie(at: str, node: int, request: Message) -> None:
        if at == stage:
            request.fields.update(values)

    return lie


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_an_honest_server_gets_the_sum(crypto: str) -> None:
    _sum(crypto, threshold=6)  # ceil(0.6 · 9) = 6


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_a_lowered_threshold_is_refused(crypto: str) -> None:
    lie = _set("secagg/advertise", threshold=2)  # t = 2 of n = 9: the server could rebuild secrets alone
    with pytest.raises(IntegrityError, match=r"secagg advertise .*threshold t = 2 .*requires t >= 6"):
        _sum(crypto, threshold=6, lie=lie)


def test_the_server_threshold_below_the_clients_fraction_is_refused() -> None:
    # t = 6 > n/2 but the client's own fraction asks for ceil(0.8 · 9) = 8
    with pytest.raises(IntegrityError, match=r"threshold t = 6 .*requires t >= 8 \(secagg_threshold = 0.8"):
        _sum("real", threshold=6, secagg_threshold=0.8)


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_half_or_fewer_is_refused_unless_the_client_opts_into_semi_honest(crypto: str) -> None:
    with pytest.raises(IntegrityError, match=r"threshold t = 4 .*requires t >= 6 .*t > n/2"):
        _sum(crypto, threshold=4)
    _sum(crypto, threshold=4, secagg_threshold=0.4, secagg_semi_honest=True)  # ceil(0.4 · 9) = 4
    with pytest.raises(IntegrityError, match=r"threshold t = 3 .*requires t >= 4"):
        _sum(crypto, threshold=3, secagg_threshold=0.4, secagg_semi_honest=True)


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_a_sum_below_the_minimum_roster_is_refused(crypto: str) -> None:
    with pytest.raises(IntegrityError, match=r"n_clients = 2 clients, below .*secagg_min_clients = 3"):
        _sum(crypto, threshold=2, n=2)
    _sum(crypto, threshold=2, n=2, secagg_min_clients=2)  # a client that accepts pairs


def test_a_roster_shrunk_after_the_advertise_stage_is_refused() -> None:
    """n_clients = 9 at advertise, but the roster the shares are split among holds 3 clients (t = 6 ok)."""

    def lie(stage: str, node: int, request: Message) -> None:
        if stage == "secagg/share":
            blob = request["roster"].value[0]
            request["roster"].value[:] = [blob[: 3 * (len(blob) // N)]] * len(request["roster"].value)
            request.fields["n_advertised"] = 3

    with pytest.raises(IntegrityError, match=r"secagg share .*the roster"):
        _sum("real", threshold=6, lie=lie)


def test_an_understated_n_clients_cannot_lower_the_threshold_for_the_real_roster() -> None:
    """The server says n = 3 (so t = 2 looks fine) but the roster holds all 9: refused at the share stage."""
    lie = _set("secagg/advertise", n_clients=3, threshold=3)

    def both(stage: str, node: int, request: Message) -> None:
        lie(stage, node, request)
        if stage != "secagg/advertise":
            request.fields.update(n_clients=3, threshold=3)

    with pytest.raises(IntegrityError, match=r"secagg share .*roster of 9 clients, more than n_clients"):
        _sum("real", threshold=6, lie=both)


@pytest.mark.parametrize("crypto", ["accounted", "real"])
@pytest.mark.parametrize("stage", ["secagg/share", "secagg/mask", "secagg/unmask"])
def test_a_threshold_changed_after_the_advertise_stage_is_refused(crypto: str, stage: str) -> None:
    short = stage.split("/")[1]
    with pytest.raises(IntegrityError, match=rf"secagg {short} .*threshold changed from 6 .* to 7"):
        _sum(crypto, threshold=6, lie=_set(stage, threshold=7))


@pytest.mark.parametrize("name", ["length", "frac_bits", "phase"])
def test_other_session_parameters_cannot_change_either(name: str) -> None:
    with pytest.raises(IntegrityError, match=rf"secagg mask .*{name} changed"):
        _sum("real", threshold=6, lie=_set("secagg/mask", **{name: 99}))


def test_an_unmask_request_with_another_u2_is_refused() -> None:
    """U2 at unmask must be the U2 the client masked towards (else it reveals shares it should not)."""

    def lie(stage: str, node: int, request: Message) -> None:
        if stage == "secagg/unmask":
            request.fields["shared"] = request.fields["shared"][:-1]
            request.fields["survivors"] = request.fields["survivors"][:-1]

    with pytest.raises(IntegrityError, match=r"secagg unmask .*U2 differs"):
        _sum("real", threshold=6, lie=lie)


def test_a_real_client_refuses_an_unprotected_sum() -> None:
    """Own crypto mode real: a request that marks the sum unprotected is refused."""
    with pytest.raises(IntegrityError, match=r"secagg advertise .*unprotected .*real crypto mode"):
        _sum("real", threshold=6, lie=_set("secagg/advertise", real=False))


@pytest.mark.parametrize("name", SECAGG_LIES)
def test_every_lie_of_the_audit_hook_is_refused(name: str) -> None:
    lie = SecAggLie(name)
    with pytest.raises(IntegrityError, match=r"secagg (advertise|mask) "):
        _sum("real", threshold=6, lie=lambda stage, node, request: lie.apply(stage, {node: request}))
    assert lie.fired


# ---------------------------------------------------------------- hand-made requests to handle()
def _fields(stage: str, **extra: Any) -> dict[str, Any]:
    base = {"session": "toy/0", "phase": "toy/up", "real": False, "threshold": 6, "length": L,
            "frac_bits": FRAC, "n_clients": N, "clients": [0, 1, 2]}  # fmt: skip
    more: dict[str, dict[str, Any]] = {
        "secagg/advertise": {},
        "secagg/share": {"n_advertised": N},
        "secagg/mask": {"shared": list(range(N))},
        "secagg/unmask": {"shared": list(range(N)), "survivors": list(range(N))},
    }
    return {**base, **more[stage], **extra}


def _client(**own: Any) -> ToyClient:
    x = torch.ones(N, L, dtype=torch.float64)
    return ToyClient(ToySettings(x=x, frac_bits=FRAC, **own), np.array([0, 1, 2]), None)


def _drive(client: ToyClient, *stages: str) -> None:
    for stage in stages:
        client.handle(stage, 0, Message(fields=_fields(stage)))


STAGES = ("secagg/advertise", "secagg/share", "secagg/mask", "secagg/unmask")


@pytest.mark.parametrize("repeat", STAGES[1:])
def test_a_repeated_stage_is_refused(repeat: str) -> None:
    client = _client()
    upto = STAGES[: STAGES.index(repeat) + 1]
    _drive(client, *upto)
    with pytest.raises(IntegrityError, match=r"out of order or repeated|no such session"):
        _drive(client, repeat)


def test_a_skipped_stage_is_refused() -> None:
    client = _client()
    _drive(client, "secagg/advertise")
    with pytest.raises(IntegrityError, match=r"secagg mask .*mask after advertise"):
        _drive(client, "secagg/mask")


def test_a_session_label_is_used_once() -> None:
    client = _client()
    _drive(client, *STAGES)
    with pytest.raises(IntegrityError, match=r"secagg advertise .*already used"):
        _drive(client, "secagg/advertise")


def test_a_completed_session_label_is_refused_after_other_sessions_too() -> None:
    """Summing the same inputs twice (over different clients) and subtracting would give one away."""
    client = _client()
    _drive(client, *STAGES)
    for stage in STAGES:
        client.handle(stage, 1, Message(fields=_fields(stage, session="toy/1")))
    with pytest.raises(IntegrityError, match=r"secagg advertise \(toy/up, session 'toy/0'\).*already used"):
        _drive(client, "secagg/advertise")


def test_fedgrec_sums_a_rounds_upload_once_and_only_under_its_round() -> None:
    cfg = load_config(None, ["dataset_options.n_users=40", "dataset_options.n_items=60"], protocol="fedgrec",
                      dataset="synthetic", dim=4, n_layers=1, clients_per_round=10, n_negatives=8,
                      local_steps=1, crypto="real")  # fmt: skip

    def trained_round() -> tuple[Any, Any, int]:
        server: Any = ProtocolLearner(cfg, prepare_interactions(cfg)).server
        clients = sample_clients(
            server.active, 0, seed=cfg.seed, clients_per_round=cfg.settings.clients_per_round
        )
        server.transport.begin_step(0)  # round 0 (train_round opens it)
        _, _, trained = server.step2_3_local(server.step1_query(0, clients))
        return server, trained, len(clients)

    server, trained, n = trained_round()  # a node refusing a request stops: one world per lie
    with pytest.raises(
        ValueError,
        match=r"no secure-aggregation input for session 'fedgrec/round/1'|'session' is 'fedgrec/round/1'",
    ):
        server._sum(UPLOAD, session("round", 1), trained, server.n_items * server.dim * 2)
    server, trained, n = trained_round()
    server.step4_aggregate(0, trained, n)  # the round's own sum
    with pytest.raises(
        IntegrityError, match=r"session 'fedgrec/round/0'.*already used|already ran|may not follow"
    ):
        server.step4_aggregate(0, trained, n)  # refused by the stage order or the label


def test_an_abandoned_session_label_cannot_be_run_again() -> None:
    """The server leaves session 0 after the masked inputs went up, runs another, then comes back."""
    client = _client()
    _drive(client, "secagg/advertise", "secagg/share", "secagg/mask")
    client.handle("secagg/advertise", 1, Message(fields=_fields("secagg/advertise", session="toy/1")))
    with pytest.raises(IntegrityError, match=r"session 'toy/0'.*already used"):
        _drive(client, "secagg/advertise")


def test_u2_smaller_than_t_or_outside_the_node_is_refused() -> None:
    client = _client()
    _drive(client, "secagg/advertise", "secagg/share")
    small = Message(fields=_fields("secagg/mask", shared=[0, 1, 2, 3, 4]))
    with pytest.raises(IntegrityError, match=r"secagg mask .*U2 = 5 clients, below the threshold t = 6"):
        client.handle("secagg/mask", 0, small)
    without = Message(fields=_fields("secagg/mask", shared=list(range(1, N))))
    with pytest.raises(IntegrityError, match=r"secagg mask .*U2 leaves out this node's clients \[0\]"):
        client.handle("secagg/mask", 0, without)


def test_a_length_other_than_the_input_is_refused() -> None:
    client = _client()
    request = Message(fields=_fields("secagg/advertise", length=L + 1))
    client.handle("secagg/advertise", 0, request)
    client.handle("secagg/share", 0, Message(fields=_fields("secagg/share", length=L + 1)))
    with pytest.raises(IntegrityError, match=r"secagg mask .*length = 5, but this client's input has 4"):
        client.handle("secagg/mask", 0, Message(fields=_fields("secagg/mask", length=L + 1)))


@pytest.mark.parametrize("own", [{"crypto": "real"}, {}])
def test_uploads_in_the_clear_are_refused_by_a_client_that_requires_protection(own: dict[str, Any]) -> None:
    @dataclass(frozen=True)
    class Protected(ToySettings):
        secure_aggregation: bool = True

    x = torch.ones(N, L, dtype=torch.float64)
    client = ToyClient(Protected(x=x, frac_bits=FRAC, **own), np.array([0, 1, 2]), None)
    request = Message(fields={"session": "toy/0", "phase": "toy/up", "clients": [0, 1, 2]})
    with pytest.raises(IntegrityError, match=r"secagg plain .*in the clear"):
        client.handle("secagg/plain", 0, request)


def test_a_client_whose_own_settings_opt_out_of_secure_aggregation_uploads_in_the_clear() -> None:
    @dataclass(frozen=True)
    class Clear(ToySettings):
        secure_aggregation: bool = False

    x = torch.ones(N, L, dtype=torch.float64)
    client = ToyClient(Clear(x=x, frac_bits=FRAC, crypto="real"), np.array([0, 1, 2]), None)
    request = Message(fields={"session": "toy/0", "phase": "toy/up", "clients": [0, 1, 2]})
    assert "upload" in client.handle("secagg/plain", 0, request)
