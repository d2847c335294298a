"""HE backends: round trips (incl. negatives) and the sandwich ``L·M·R (+E)`` on every backend."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fedgraphrec.crypto.he import make_backend
from fedgraphrec.crypto.he.base import EncMatrix
from fedgraphrec.crypto.he.plain import PlainBackend


def _case(seed: int = 0) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    left = sp.random(3, 5, density=0.5, random_state=seed, format="csr") * 0.3
    left[2, 4] = -0.25
    m = rng.normal(size=(5, 4))
    right = rng.normal(size=(4, 4))
    noise = rng.normal(size=(3, 4))
    return sp.csr_matrix(left), m, right, noise


def test_paillier_round_trip_with_negatives() -> None:
    pytest.importorskip("phe")
    pytest.importorskip("gmpy2")
    be = make_backend("paillier", key_bits=512)
    m = np.array([[-1.5, 0.0, 3.25], [1e-6, -7e3, 0.125]])
    c = be.encrypt(m)
    assert be.decrypt(c) == pytest.approx(m, abs=1e-11)
    raw = be.to_bytes(c)
    assert len(raw) == 6 and all(len(b) == be.ct_bytes for b in raw)
    assert be.nbytes(c) == 6 * be.ct_bytes


@pytest.mark.parametrize("name", ["plain", "paillier", "ckks"])
def test_sandwich_equals_lmr_plus_noise(name: str) -> None:
    if name == "paillier":
        pytest.importorskip("phe")
        pytest.importorskip("gmpy2")
        be = make_backend(name, key_bits=512)
    elif name == "ckks":
        pytest.importorskip("tenseal")
        be = make_backend(name)
    else:
        be = make_backend(name)
    left, m, right, noise = _case()
    want = np.asarray(left @ m) @ right
    tol = 1e-9 if name != "ckks" else 1e-3
    got = be.decrypt(be.sandwich(left, be.encrypt(m), right))
    np.testing.assert_allclose(got, want, atol=tol)
    got_noisy = be.decrypt(be.sandwich(left, be.encrypt(m), right, noise))
    np.testing.assert_allclose(got_noisy, want + noise, atol=tol)


def test_select_and_set_rows() -> None:
    be = PlainBackend(key_bits=1024)
    c = be.encrypt(np.arange(6.0).reshape(3, 2))
    be.set_rows(c, np.array([1]), be.encrypt(np.array([[9.0, 9.0]])))
    assert be.decrypt(be.select_rows(c, np.array([1, 2]))).tolist() == [[9.0, 9.0], [4.0, 5.0]]
    assert be.nbytes(c) == 6 * 256
    with pytest.raises(ValueError, match="new rows"):
        be.set_rows(c, np.array([0, 1]), EncMatrix((1, 2), np.zeros((1, 2))))


def test_bad_backend_and_shapes() -> None:
    with pytest.raises(ValueError, match="backend"):
        make_backend("rsa")
    be = PlainBackend()
    with pytest.raises(ValueError, match="left has"):
        be.sandwich(sp.csr_matrix(np.ones((2, 3))), be.encrypt(np.ones((4, 2))), np.ones((2, 2)))


def test_backends_are_registered_by_name_without_an_import_cycle() -> None:
    """Each backend module builds on ``he.base`` only; the package registers them by name."""
    import ast
    from pathlib import Path

    import fedgraphrec.crypto.he as he_pkg

    folder = Path(he_pkg.__file__).parent
    for module in ("base", "plain", "paillier", "ckks", "packed"):
        tree = ast.parse((folder / f"{module}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "fedgraphrec.crypto.he" not in imported, module
    assert he_pkg.BACKENDS == ("plain", "paillier", "ckks", "ckks-packed")
    assert type(he_pkg.make_backend("plain")).__name__ == "PlainBackend"
    with pytest.raises(ValueError, match="backend must be one of plain, paillier, ckks, ckks-packed"):
        he_pkg.make_backend("rsa")
