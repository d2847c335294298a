"""LP-GCN: a server with c colluding clients vs α virtual items (measured leakage, not the claim)."""

from __future__ import annotations

import numpy as np

from fedgraphrec.attacks import lpgcn_collusion
from fedgraphrec.protocols.lpgcn.setup import SetupResult, initialization
from fedgraphrec.runtime import Network
from tests.helpers import random_train


def _setup(alpha: int) -> tuple[Network, SetupResult, object]:
    train = random_train(n_users=20, n_items=40, density=0.15, seed=3)
    net = Network(20, crypto="real", transcripts=True)
    return net, initialization(train, alpha, seed=4, net=net), train


def _attack(alpha: int, colluders: list[int]) -> dict[str, float]:
    net, s, train = _setup(alpha)
    res = lpgcn_collusion(
        net.transcript, train, s.topology.conv_of_item, colluders, s.shared_key if colluders else None,  # type: ignore[arg-type]
        s.keypairs,
    )  # fmt: skip
    return res.summary()


def test_without_any_client_the_server_is_left_with_a_random_guess() -> None:
    s = _attack(alpha=5, colluders=[])
    assert s["mean_auc"] == 0.5 and s["mean_recovered"] == 0.0
    assert s["mean_precision"] == s["mean_random_precision"]


def test_the_server_cannot_regenerate_the_tokens_from_the_seed_or_the_ids() -> None:
    """Without S the tokens are opaque: two set-ups with the same seed share no token, and no token
    is an item id or a hash of one. (Were S, or the tokens, derived from the run seed, the server
    could rebuild the id dictionary from config.toml and the guess above would not be random.)"""
    import hashlib

    def tokens() -> set[bytes]:
        net, _, _ = _setup(alpha=5)
        uploads = next(e for e in net.transcript.of("server") if e.phase == "setup/item-tokens").payloads
        return {p[k : k + 16] for p in uploads for k in range(0, len(p), 16)}

    first, second = tokens(), tokens()
    assert len(first) > 30 and not first & second
    guesses = {h(i) for i in range(40) for h in (
        lambda i: int(i).to_bytes(16, "little"),
        lambda i: hashlib.sha256(str(i).encode()).digest()[:16],
        lambda i: hashlib.sha256(int(i).to_bytes(8, "little")).digest()[:16],
    )}  # fmt: skip
    assert not first & guesses


def test_one_client_with_s_breaks_the_tokens_and_alpha_zero_gives_everything() -> None:
    s = _attack(alpha=0, colluders=[0])
    assert s["mean_held_precision"] == 1.0 and s["mean_recall"] == 1.0 and s["mean_auc"] > 0.99


def test_virtual_items_dilute_one_colluder_and_verification_undoes_it() -> None:
    one = _attack(alpha=8, colluders=[0])
    assert one["mean_held_precision"] < 0.6  # real items drown among virtual ones
    assert one["mean_recall"] == 1.0  # but every real item is in the held set
    assert one["mean_auc"] > 0.8  # held vs not held already ranks far above random
    every_conv = _attack(alpha=8, colluders=list(range(10)))
    assert every_conv["mean_recovered"] > one["mean_recovered"]
    assert every_conv["mean_precision"] > one["mean_precision"]


def test_verification_answers_decode_to_the_truth() -> None:
    net, s, train = _setup(alpha=4)
    conv = s.topology.convolution_clients
    res = lpgcn_collusion(
        net.transcript, train, s.topology.conv_of_item, list(conv), s.shared_key, s.keypairs
    )
    # every convolution-client colludes: each victim edge is verified, so the recovery is exact
    assert len(res.victims) == 20 - len(conv) > 0
    np.testing.assert_array_equal(res.precision, 1.0)
    np.testing.assert_array_equal(res.recall, 1.0)
    np.testing.assert_array_equal(res.recovered, 1.0)
