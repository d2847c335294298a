"""What the LP-GCN server receives in ``real`` mode: ciphertexts, never user data in the clear."""

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.lpgcn.holdings import virtual_items
from fedgraphrec.runtime.codec import encode_tensor
from fedgraphrec.runtime.transcript import payload_bytes
from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import random_train
from tests.protocols.lpgcn_world import oracle, world

PLAINTEXT_KINDS_ALLOWED = {"public_key", "item_embedding", "item_gradient", "item_degree", "item_token"}


def make(alpha=3, n_users=14, n_items=16, nodes=1, adversary=None):
    train = random_train(n_users=n_users, n_items=n_items, density=0.3, seed=8)
    model = oracle(train, plus=False, n_layers=2, seed=1)
    w = world(train, dict(model.named_parameters()), nodes, n_layers=2, alpha=alpha, seed=2, crypto="real",
              transcripts=True, adversary=adversary)  # fmt: skip
    return train, w


@pytest.mark.parametrize("nodes", [1, 3])
def test_server_transcript_holds_no_plaintext_user_data(nodes):
    train, w = make(nodes=nodes)
    user_rows_seen = []
    for users, pos, neg in BPRSampler(train, seed=0).batches(0, 10):
        w.reset_debug()
        w.step(users, pos, neg)
        user_rows_seen += w.recorded("user_layers", train.shape[0]) + w.recorded("user_grad", train.shape[0])
    entries = w.net.transcript.of("server")
    assert entries, "transcripts were not recorded"
    kinds = {e.kind for e in entries}
    assert {
        "user_embedding",
        "user_gradient",
        "item_token",
        "virtual_flag",
        "user_degree",
        "wrapped_key",
    } <= kinds
    # every protected message anybody got carries its payload (nothing merely counted as protected),
    # each opaque bytes of exactly the accounted size; plaintext ones are item-level or public keys
    # (one node seals each part as one batch: one ciphertext for all its messages, runtime/batching.py)
    for role in w.net.transcript.roles():
        for e in w.net.transcript.of(role):
            if e.protected:
                assert e.sizes is not None and len(e.payloads) > 0, (role, e.phase)
                if nodes == 1 and e.protection == "sealed":
                    assert len(e.payloads) == 1 and isinstance(e.payloads[0], bytes), (role, e.phase)
                    continue
                assert len(e.payloads) == len(e.sizes), (role, e.phase)
                assert [len(payload_bytes(p)) for p in e.payloads] == list(e.sizes), (role, e.phase)
    for e in entries:
        if e.kind.startswith("user_") or e.kind in ("virtual_flag", "wrapped_key"):
            assert e.protected and all(isinstance(p, bytes) for p in e.payloads), e.phase
        if not e.protected:
            assert e.kind in PLAINTEXT_KINDS_ALLOWED, (e.phase, e.kind)
    blobs = b"".join(p for e in entries for p in e.payloads if isinstance(p, bytes))
    # no user row or user gradient of any layer appears, encoded or raw, inside anything the server got
    for layer in user_rows_seen:
        for u in range(layer.shape[0]):
            assert encode_tensor(layer[u : u + 1]) not in blobs
            assert layer[u].numpy().tobytes() not in blobs
    # no item id appears as a plaintext token: the uploads are HMAC tokens, 16 bytes per held item
    uploads = [
        (u, p)
        for e in entries
        if e.phase == "setup/item-tokens"
        for u, p in zip(e.senders, e.payloads, strict=True)
    ]
    held = {int(u): len(p) // 16 for u, p in uploads}
    for program in w.programs.values():
        for k, u in enumerate(program.clients.tolist()):
            assert held[u] == program.state.held_ptr[k + 1] - program.state.held_ptr[k]
    chunks = {p[k : k + 16] for _, p in uploads for k in range(0, len(p), 16)}
    plain_ids = {int(i).to_bytes(16, order) for i in range(train.shape[1]) for order in ("little", "big")}
    assert not chunks & plain_ids, "an item id was uploaded in the clear"
    # the virtual/real flags travel sealed: same length whatever the answer, no two ciphertexts equal
    answers = [p for e in entries if e.kind == "virtual_flag" for p in e.payloads]
    assert len({len(a) for a in answers}) == 1 and len(set(answers)) == len(answers)


class _Flip:
    """An active server that flips a byte of the first ciphertext of one phase it forwards."""

    def __init__(self, phase: str) -> None:
        self.phase = phase

    def forward(self, phase, step, payloads, receivers):
        if phase != self.phase or not payloads:
            return payloads
        blob = bytearray(payloads[0])
        blob[len(blob) // 2] ^= 0x01
        return [bytes(blob), *payloads[1:]]


def test_a_flipped_ciphertext_byte_is_rejected():
    train, w = make(adversary=_Flip("forward/l=1/user-embeddings"))
    with pytest.raises(IntegrityError, match="forward/l=1/user-embeddings"):
        w.step(*next(BPRSampler(train, seed=0).batches(0, 10)))


def test_a_flipped_verification_answer_stops_the_set_up():
    with pytest.raises(IntegrityError, match="setup/verification-answer"):
        make(adversary=_Flip("setup/verification-answer"))


def test_secret_cover_is_not_reproducible_from_the_seed_and_changes_no_number():
    """With secure virtual items the cover differs between two runs of one seed; training is equal."""
    train = random_train(n_users=30, n_items=40, density=0.1, seed=1)
    clients = np.arange(30)
    seeded = [virtual_items(train, clients, 4, seed=3, secret=False).toarray() for _ in range(2)]
    secret = [virtual_items(train, clients, 4, seed=3, secret=True).toarray() for _ in range(2)]
    assert (seeded[0] == seeded[1]).all()
    assert not (secret[0] == secret[1]).all()
    for v in secret + seeded:  # still α distinct non-held items per client
        assert (v.sum(1) == 4).all() and not (v * train.toarray()).any()
    # a client's draws do not depend on which other clients share its node
    part = virtual_items(train[10:20], clients[10:20], 4, seed=3, secret=False).toarray()
    assert (part == seeded[0][10:20]).all()
    model = oracle(train, plus=False, n_layers=2, seed=0)
    tables = dict(model.named_parameters())
    a = world(train, tables, n_layers=2, alpha=4, seed=2, secure_virtual_items=True)
    b = world(train, tables, n_layers=2, alpha=4, seed=2)
    for users, pos, neg in BPRSampler(train, seed=0).batches(0, 16):
        assert a.step(users, pos, neg) == pytest.approx(b.step(users, pos, neg), rel=1e-12)
    assert torch.allclose(a.tables()["item_emb"], b.tables()["item_emb"], rtol=1e-12, atol=0)
