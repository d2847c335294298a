"""Packed CKKS sandwich: ``L̃_B X W1`` forward and ``(B L̃ Bᵀ) G W1ᵀ`` backward against float64."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from fedgraphrec.crypto.he import make_backend
from fedgraphrec.crypto.he.base import EncMatrix
from fedgraphrec.privacy.matrix_gaussian import clip_frobenius, normalized_adjacency

seal = pytest.importorskip("tenseal.sealapi")

from fedgraphrec.crypto.he.packed import PackedCKKSBackend  # noqa: E402
from fedgraphrec.crypto.he.packed_public import packed_sandwich  # noqa: E402

N, D = 100, 64  # 100 users; the 70-user batch spans two blocks of R = 4096 / 64 = 64 rows


@pytest.fixture(scope="module")
def be() -> Iterator[PackedCKKSBackend]:
    yield PackedCKKSBackend(dim=D)


@pytest.fixture(scope="module")
def case(be: PackedCKKSBackend) -> dict[str, Any]:
    """Random symmetric graph with isolated users (no neighbour but the self-loop), ``[X]`` and ``[G]``."""
    rng = np.random.default_rng(0)
    a = np.triu(rng.random((N, N)) < 0.03, 1)
    a = a | a.T
    isolated = np.arange(0, N, 7)
    a[isolated, :] = a[:, isolated] = False
    batch = np.sort(
        np.concatenate([isolated[:5], rng.choice(np.setdiff1d(np.arange(N), isolated), 65, False)])
    )
    x = rng.normal(size=(N, D))
    x *= 0.1 / np.linalg.norm(x, axis=1, keepdims=True)  # rows clipped to C = 0.1, as in P4GCN
    g = rng.normal(size=(len(batch), D)) * 1e-2
    return {
        "adj": sp.csr_matrix(a.astype(float)), "batch": batch, "x": x, "g": g,
        "w1": clip_frobenius(rng.normal(size=(D, D)), 0.1), "noise": rng.normal(size=(len(batch), D)) * 1e-3,
        "enc_x": be.encrypt(x), "enc_g": be.encrypt(g),
    }  # fmt: skip


def _close(got: np.ndarray, want: np.ndarray, rel: float = 1e-6) -> None:
    np.testing.assert_allclose(got, want, rtol=0, atol=rel * np.abs(want).max())


@pytest.mark.parametrize("scale", [1.0, 1.0 / N])
def test_forward_and_backward_equal_float64(
    be: PackedCKKSBackend, case: dict[str, Any], scale: float
) -> None:
    lt = normalized_adjacency(case["adj"], scale=scale)
    batch, w1 = case["batch"], case["w1"]
    fwd = be.decrypt(be.sandwich(lt[batch], case["enc_x"], w1))  # out-of-batch neighbours included
    assert fwd.shape == (len(batch), D)
    _close(fwd, np.asarray(lt[batch] @ case["x"]) @ w1)
    block = sp.csr_matrix(lt[batch][:, batch])
    bwd = be.decrypt(be.sandwich(block, case["enc_g"], w1.T))
    _close(bwd, np.asarray(block @ case["g"]) @ w1.T)
    noisy = be.decrypt(be.sandwich(block, case["enc_g"], w1.T, case["noise"]))
    _close(noisy, np.asarray(block @ case["g"]) @ w1.T + case["noise"])


def test_zero_rows_zero_blocks_and_padded_dims() -> None:
    be = PackedCKKSBackend(dim=48)  # D = 64: rows padded; the result has 40 of 64 column groups
    rng = np.random.default_rng(2)
    m = rng.normal(size=(30, 48))
    left = sp.random(70, 30, density=0.2, random_state=3, format="lil")
    left[3, :] = 0.0  # an all-zero row inside a block
    left[64:, :] = 0.0  # rows 64..69: an all-zero second block
    left = sp.csr_matrix(left)
    right = rng.normal(size=(48, 40)) * 0.1
    noise = rng.normal(size=(70, 40))
    enc = be.encrypt(m)
    np.testing.assert_allclose(be.decrypt(enc), m, atol=1e-7)
    got = be.decrypt(be.sandwich(left, enc, right))
    _close(got, np.asarray(left @ m) @ right)
    assert np.abs(got[3]).max() < 1e-8 and np.abs(got[64:]).max() < 1e-8
    got = be.decrypt(be.sandwich(left, enc, right, noise))
    _close(got, np.asarray(left @ m) @ right + noise)


class _Forbidden:
    """Stands in for a secret-key object: any use fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the side owner used a secret-key operation ({name})")


def test_side_owner_touches_only_ciphertexts_and_public_keys(be: PackedCKKSBackend) -> None:
    rng = np.random.default_rng(4)
    enc = be.encrypt(rng.normal(size=(10, D)))
    left = sp.csr_matrix(rng.random((5, 10)) * (rng.random((5, 10)) < 0.3))
    secret = (be._encryptor, be._decryptor)
    be._encryptor, be._decryptor = _Forbidden(), _Forbidden()  # type: ignore[assignment]
    try:
        out = packed_sandwich(be.public, left, enc, 0.1 * rng.normal(size=(D, D)), rng.normal(size=(5, D)))
        out2 = be.sandwich(left, enc, 0.1 * rng.normal(size=(D, D)))
    finally:
        be._encryptor, be._decryptor = secret
    held = [getattr(be.public, f) for f in be.public.__dataclass_fields__]
    assert not any(isinstance(v, seal.SecretKey | seal.Decryptor | seal.KeyGenerator) for v in held)
    for c in (enc, out, out2):
        assert all(isinstance(ct, seal.Ciphertext) for ct in c.data)
    assert len(out.data) == 1 and out.scale_bits == be.public.rows_per_block
    blobs = be.to_bytes(out)
    assert len(blobs) == 1 and be.nbytes(out) == len(blobs[0]) > 0


def test_bad_inputs_and_registry(be: PackedCKKSBackend) -> None:
    assert make_backend("ckks-packed", dim=8).name == "ckks-packed"
    with pytest.raises(ValueError, match="ckks-packed"):
        make_backend("rsa")
    with pytest.raises(ValueError, match="fit"):
        be.encrypt(np.ones((1, 2 * D)))
    enc = be.encrypt(np.ones((2, D)))
    with pytest.raises(ValueError, match="at most"):
        be.sandwich(sp.csr_matrix(np.ones((1, 2))), enc, np.ones((D, 2 * D)))
    res = be.sandwich(sp.csr_matrix(np.ones((1, 2))), enc, np.eye(D))
    with pytest.raises(ValueError, match="replicated"):
        be.sandwich(sp.csr_matrix(np.ones((1, 1))), EncMatrix((1, D), res.data, res.scale_bits), np.eye(D))
    with pytest.raises(ValueError, match="dim"):
        PackedCKKSBackend(dim=8192)


def test_out_of_range_inputs_are_refused_not_decrypted_wrong() -> None:
    import scipy.sparse as sp

    from fedgraphrec.crypto.he.packed import PackedCKKSBackend
    from fedgraphrec.crypto.he.packed_public import packed_sandwich

    be = PackedCKKSBackend(dim=4, middle_bound=1.0)
    with pytest.raises(ValueError, match="middle_bound"):
        be.encrypt(np.full((2, 4), 1.5))
    c = be.encrypt(np.full((2, 4), 0.5))
    limit = be.public.result_limit
    big_left = sp.csr_matrix(np.full((1, 2), limit))  # 2·limit·0.5·1 ≥ limit
    with pytest.raises(ValueError, match="beyond"):
        packed_sandwich(be.public, big_left, c, np.eye(4))
    ok = be.decrypt(packed_sandwich(be.public, sp.csr_matrix(np.ones((1, 2))), c, np.eye(4)))
    np.testing.assert_allclose(ok, np.ones((1, 4)), atol=1e-3)
