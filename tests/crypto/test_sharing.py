"""Fixed-point encoding, additive sharing over Z_{2^64}, seeded masks and client pairing (GNN4FR)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fedgraphrec.crypto.fixed_point import DEFAULT_FRAC_BITS, FixedPoint
from fedgraphrec.crypto.sharing import MASK_SEED_BYTES, mask_from_seed, pair_clients, reconstruct, split

SEED = bytes(range(1, 33))
OTHER_SEED = bytes(range(101, 133))
TWO64 = 1 << 64


def _exact_int_sum(encodings: np.ndarray) -> np.ndarray:
    """Exact (Python-int) column sums of signed encodings, stacked on axis 0."""
    return encodings.view(np.int64).astype(object).sum(axis=0)


def _ring_sum(encodings: np.ndarray) -> np.ndarray:
    return np.sum(encodings, axis=0, dtype=np.uint64)


def _chi2_uniform(counts: np.ndarray) -> float:
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


def _chi2_homogeneity(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample chi-square statistic for equal distributions over the same bins."""
    total = a + b
    keep = total > 0
    a, b, total = a[keep], b[keep], total[keep]
    na, nb = a.sum(), b.sum()
    ea, eb = total * na / (na + nb), total * nb / (na + nb)
    return float(((a - ea) ** 2 / ea).sum() + ((b - eb) ** 2 / eb).sum())


# Chi-square with 255 degrees of freedom has mean 255 and sd ≈ 22.6; 400 is > 6 sd (loose on purpose).
CHI2_255_LOOSE = 400.0


# --- FixedPoint -----------------------------------------------------------------------------------------


class TestFixedPoint:
    def test_defaults_and_range(self) -> None:
        fp = FixedPoint()
        assert fp.frac_bits == DEFAULT_FRAC_BITS == 32
        assert fp.scale == 2**32
        assert fp.resolution == 2.0**-32
        assert fp.max_abs == 2.0**30
        assert fp.decode_range == (-(2.0**31), 2.0**31)
        assert repr(fp) == "FixedPoint(frac_bits=32)"
        assert FixedPoint(16) == FixedPoint(frac_bits=16) != fp
        assert hash(FixedPoint(16)) == hash(FixedPoint(16))

    @pytest.mark.parametrize("frac_bits", [0, 16, 32, 52, 61])
    def test_round_trip_within_half_resolution(self, frac_bits: int) -> None:
        fp = FixedPoint(frac_bits)
        rng = np.random.default_rng(frac_bits)
        x = rng.uniform(-1, 1, size=(40, 25)) * fp.max_abs * 0.999
        x[0, :5] = [0.0, -0.0, fp.resolution, -fp.resolution, 0.5 * fp.max_abs]
        back = fp.decode(fp.encode(x))
        assert back.shape == x.shape and back.dtype == np.float64
        assert np.all(np.abs(back - x) <= fp.resolution / 2)

    def test_round_trip_small_values(self) -> None:
        fp = FixedPoint()
        x = np.random.default_rng(0).standard_normal(10_000)
        assert np.max(np.abs(fp.decode(fp.encode(x)) - x)) <= 2.0**-33

    def test_exact_for_dyadic_values(self) -> None:
        fp = FixedPoint(8)
        x = np.array([1.5, -1.5, 0.00390625, -1000.25, 0.0])
        np.testing.assert_array_equal(fp.decode(fp.encode(x)), x)

    def test_negatives_are_twos_complement(self) -> None:
        fp = FixedPoint(4)
        enc = fp.encode(np.array([-1.0, -0.0625, 1.0, 0.0]))
        assert enc.dtype == np.uint64
        assert enc.tolist() == [TWO64 - 16, TWO64 - 1, 16, 0]
        assert (enc.view(np.int64)).tolist() == [-16, -1, 16, 0]
        # x and -x encode to additive inverses.
        x = np.random.default_rng(1).uniform(-100, 100, 1000)
        assert np.all(fp.encode(x) + fp.encode(-x) == 0)

    def test_rounds_to_nearest_ties_to_even(self) -> None:
        fp = FixedPoint(1)
        x = np.array([0.24, 0.26, 0.25, 0.75, -0.25, -0.75, -0.26])
        assert fp.encode(x).view(np.int64).tolist() == [0, 1, 0, 2, 0, -2, -1]

    def test_shapes_dtypes_and_torch(self) -> None:
        fp = FixedPoint()
        scalar = fp.encode(np.array(2.5))
        assert scalar.shape == () and isinstance(scalar, np.ndarray)
        assert fp.decode(scalar) == 2.5
        assert fp.decode(np.uint64(fp.encode(np.array([3.0]))[0])) == 3.0
        x32 = np.array([[0.1, -0.2]], dtype=np.float32)
        np.testing.assert_array_equal(fp.encode(x32), fp.encode(x32.astype(np.float64)))
        t = torch.tensor([0.1, -0.2], dtype=torch.float32, requires_grad=True)
        np.testing.assert_array_equal(fp.encode(t), fp.encode(t.detach().double().numpy()))
        t64 = torch.linspace(-3, 3, 7, dtype=torch.float64)
        np.testing.assert_array_equal(fp.decode(fp.encode(t64)), t64.numpy())
        assert fp.encode(np.zeros((0, 3))).shape == (0, 3)
        # Non-contiguous input.
        m = np.arange(12, dtype=np.float64).reshape(3, 4).T
        np.testing.assert_array_equal(fp.decode(fp.encode(m)), m)

    def test_overflow_error_names_position_and_limit_but_not_the_value(self) -> None:
        fp = FixedPoint()
        fp.encode(np.array([np.nextafter(2.0**30, 0), -np.nextafter(2.0**30, 0)]))  # just inside
        with pytest.raises(OverflowError) as info:
            fp.encode(np.array([1.0, -(2.0**31), 3.0]))
        message = str(info.value)
        assert "2147483648" not in message and "2**30" in message and "(1,)" in message
        with pytest.raises(OverflowError, match=r"\(1, 0\)") as info:
            fp.encode(np.array([[0.0, 5.0e9], [1.0e20, -2.0]]))
        assert "1e+20" not in str(info.value)
        with pytest.raises(OverflowError, match="out of fixed-point range"):
            fp.encode(np.array([np.inf]))
        with pytest.raises(OverflowError, match=r"2\*\*2 "):
            FixedPoint(60).encode(np.array([4.0]))

    def test_nan_and_bad_types(self) -> None:
        fp = FixedPoint()
        with pytest.raises(ValueError, match="NaN"):
            fp.encode(np.array([0.0, np.nan]))
        with pytest.raises(TypeError, match="float"):
            fp.encode(np.array([1, 2]))
        with pytest.raises(TypeError, match="floating-point tensor"):
            fp.encode(torch.tensor([1, 2]))
        with pytest.raises(TypeError, match=r"ndarray or torch\.Tensor"):
            fp.encode([1.0, 2.0])  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="uint64"):
            fp.decode(np.array([1, 2], dtype=np.int64))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="uint64"):
            fp.decode([1, 2])  # type: ignore[arg-type]

    @pytest.mark.parametrize("bad", [-1, 62, 64])
    def test_frac_bits_validation(self, bad: int) -> None:
        with pytest.raises(ValueError, match="frac_bits"):
            FixedPoint(bad)

    def test_frac_bits_type(self) -> None:
        with pytest.raises(TypeError):
            FixedPoint(32.0)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            FixedPoint(True)

    def test_max_summands(self) -> None:
        fp = FixedPoint()
        assert fp.max_summands(1.0) == (2**63 - 1) // 2**32
        assert fp.max_summands(np.nextafter(fp.max_abs, 0)) >= 2
        assert fp.max_summands(1e-12) == 2**63 - 1
        with pytest.raises(OverflowError):
            fp.max_summands(fp.max_abs)
        with pytest.raises(ValueError):
            fp.max_summands(0.0)
        with pytest.raises(ValueError):
            fp.max_summands(float("nan"))
        with pytest.raises(TypeError):
            fp.max_summands("1")  # type: ignore[arg-type]

    def test_max_summands_bound_is_tight_and_safe(self) -> None:
        fp = FixedPoint(40)
        bound = 1000.0
        n = fp.max_summands(bound)
        per_term = int(bound * 2**40)
        assert n * per_term <= 2**63 - 1 < (n + 1) * per_term

    def test_exact_sum_of_encodings(self) -> None:
        """50 clients × 1000 values: the ring sum is the exact integer sum of the rounded values."""
        fp = FixedPoint()
        rng = np.random.default_rng(2024)
        x = rng.standard_normal((50, 1000)) * rng.uniform(1e-6, 1e3, size=(50, 1))
        enc = fp.encode(x)
        ring = _ring_sum(enc)
        exact = _exact_int_sum(enc)
        assert ring.view(np.int64).astype(object).tolist() == exact.tolist()
        # Float side: decode(sum) equals the sum of individually rounded values, up to float64 summation.
        rounded_sum = fp.decode(enc).sum(axis=0)
        np.testing.assert_allclose(fp.decode(ring), rounded_sum, rtol=1e-12, atol=1e-9)
        assert np.max(np.abs(fp.decode(ring) - x.sum(axis=0))) <= 50 * fp.resolution / 2 + 1e-9

    def test_exact_sum_with_wrapping_partial_sums(self) -> None:
        """Near-limit summands: partial sums wrap, yet the result is the exact sum mod 2^64 and decodes
        exactly wherever the true sum is inside ``decode_range``."""
        fp = FixedPoint()
        rng = np.random.default_rng(7)
        x = rng.uniform(-0.999, 0.999, size=(50, 1000)) * fp.max_abs
        enc = fp.encode(x)
        ring = _ring_sum(enc)
        exact = _exact_int_sum(enc)
        assert ring.astype(object).tolist() == (exact % TWO64).tolist()
        low, high = fp.decode_range
        inside = np.array([low * 2**32 <= v < high * 2**32 for v in exact])
        assert 0 < inside.sum() < inside.size  # both cases occur
        assert ring.view(np.int64)[inside].astype(object).tolist() == exact[inside].tolist()
        assert ring.view(np.int64)[~inside].astype(object).tolist() != exact[~inside].tolist()


# --- split / reconstruct ----------------------------------------------------------------------------------


class TestSplit:
    @pytest.mark.parametrize("n_shares", [2, 3, 5])
    def test_split_reconstruct(self, n_shares: int) -> None:
        fp = FixedPoint()
        rng = np.random.default_rng(n_shares)
        value = fp.encode(rng.standard_normal((7, 11)) * 100)
        shares = split(value, n_shares)
        assert len(shares) == n_shares
        assert all(s.dtype == np.uint64 and s.shape == value.shape for s in shares)
        np.testing.assert_array_equal(reconstruct(shares), value)
        np.testing.assert_array_equal(reconstruct(shares[::-1]), value)
        # Fewer than all shares do not reconstruct.
        assert not np.array_equal(reconstruct(shares[:-1]), value)
        # Shares are fresh arrays.
        shares[0][0, 0] += np.uint64(1)
        assert not np.array_equal(reconstruct(shares), value)

    def test_split_extremes_and_scalars(self) -> None:
        value = np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64)
        np.testing.assert_array_equal(reconstruct(split(value, 4)), value)
        scalar = np.array(12345, dtype=np.uint64)
        shares = split(scalar, 3)
        assert all(s.shape == () for s in shares)
        assert reconstruct(shares) == scalar
        assert split(np.zeros((0,), dtype=np.uint64), 2)[1].shape == (0,)

    def test_shares_cannot_be_regenerated(self) -> None:
        """The secrecy property the protocols rely on: no seed reproduces a share.

        ``split`` takes no generator, so nothing a run seed fixes (numpy's or torch's global state
        included) determines the shares: two splits of one value, with the global generators reset to
        the same state before each, share no word.
        """
        value = np.arange(1000, dtype=np.uint64)
        draws = []
        for _ in range(2):
            np.random.seed(0)
            torch.manual_seed(0)
            draws.append(split(value, 3))
        for a, b in zip(draws[0], draws[1], strict=True):
            assert np.count_nonzero(a == b) == 0
        assert "rng" not in inspect.signature(split).parameters

    def test_split_validation(self) -> None:
        value = np.zeros(3, dtype=np.uint64)
        with pytest.raises(TypeError, match="uint64"):
            split(np.zeros(3), 2)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="at least 2"):
            split(value, 1)
        with pytest.raises(TypeError):
            split(value, 2.0)  # type: ignore[arg-type]

    def test_reconstruct_validation(self) -> None:
        with pytest.raises(ValueError, match="at least one"):
            reconstruct([])
        with pytest.raises(ValueError, match="same shape"):
            reconstruct([np.zeros(3, dtype=np.uint64), np.zeros(4, dtype=np.uint64)])
        with pytest.raises(TypeError, match=r"shares\[1\]"):
            reconstruct([np.zeros(3, dtype=np.uint64), np.zeros(3, dtype=np.int64)])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="sequence"):
            reconstruct(np.zeros((2, 3), dtype=np.uint64))  # type: ignore[arg-type]

    @pytest.mark.parametrize("n_shares", [2, 3])
    def test_each_share_is_statistically_uniform(self, n_shares: int) -> None:
        """A sanity check of the draw, not a secrecy proof: catches a constant, biased or truncated share.

        Secrecy rests on the CSPRNG (see :meth:`test_shares_cannot_be_regenerated`); a seeded PRNG
        would pass this test just as well.
        """
        value = np.full(50_000, np.uint64(0x0123_4567_89AB_CDEF))
        shares = split(value, n_shares)
        for share in shares:
            top = (share >> np.uint64(56)).astype(np.int64)
            assert _chi2_uniform(np.bincount(top, minlength=256)) < CHI2_255_LOOSE
            assert np.unique(share).size > 49_900  # not a constant offset pattern

    def test_share_histograms_do_not_depend_on_the_value(self) -> None:
        """Sanity check (statistical, not a secrecy proof): byte histograms of shares of 0 and of a
        large constant are alike and uniform."""
        zero = np.zeros(20_000, dtype=np.uint64)
        large = np.full(20_000, np.uint64(2**63 + 987_654_321))
        for i, (a, b) in enumerate(zip(split(zero, 3), split(large, 3), strict=True)):
            ha = np.bincount(a.view(np.uint8), minlength=256)
            hb = np.bincount(b.view(np.uint8), minlength=256)
            assert _chi2_homogeneity(ha, hb) < CHI2_255_LOOSE, f"share {i}"
            assert _chi2_uniform(ha) < CHI2_255_LOOSE and _chi2_uniform(hb) < CHI2_255_LOOSE


# --- mask_from_seed ----------------------------------------------------------------------------------------


class TestMaskFromSeed:
    def test_deterministic(self) -> None:
        a = mask_from_seed(SEED, (4, 5), b"round-0")
        b = mask_from_seed(bytearray(SEED), [4, 5], b"round-0")
        assert a.dtype == np.uint64 and a.shape == (4, 5)
        np.testing.assert_array_equal(a, b)
        a[0, 0] = 0  # writable, owns its memory
        assert mask_from_seed(SEED, (4, 5), b"round-0")[0, 0] == b[0, 0]

    def test_known_answer(self) -> None:
        """Pins the derivation: HKDF-SHA256 key with shape and label in info, AES-256-CTR from counter 0."""
        info = b"fedgraphrec/mask/v1" + (2).to_bytes(4, "little")
        info += (3).to_bytes(8, "little") + (2).to_bytes(8, "little") + b"lbl"
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(SEED)
        stream = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor().update(bytes(48))
        expected = np.frombuffer(stream, dtype="<u8").reshape(3, 2)
        np.testing.assert_array_equal(mask_from_seed(SEED, (3, 2), b"lbl"), expected)

    def test_label_independence(self) -> None:
        a = mask_from_seed(SEED, 10_000, b"a")
        b = mask_from_seed(SEED, 10_000, b"b")
        empty = mask_from_seed(SEED, 10_000, b"")
        assert np.count_nonzero(a == b) == 0 and np.count_nonzero(a == empty) == 0
        # Their difference looks uniform too (no shared structure).
        top = ((a - b) >> np.uint64(56)).astype(np.int64)
        assert _chi2_uniform(np.bincount(top, minlength=256)) < CHI2_255_LOOSE

    def test_key_dependence(self) -> None:
        a = mask_from_seed(SEED, 1000, b"x")
        assert np.count_nonzero(a == mask_from_seed(OTHER_SEED, 1000, b"x")) == 0
        flipped = bytes([SEED[0] ^ 1]) + SEED[1:]
        assert np.count_nonzero(a == mask_from_seed(flipped, 1000, b"x")) == 0

    def test_shape_is_bound(self) -> None:
        short = mask_from_seed(SEED, 10, b"x")
        long = mask_from_seed(SEED, 20, b"x")
        assert not np.array_equal(short, long[:10])
        assert not np.array_equal(mask_from_seed(SEED, (2, 5), b"x").ravel(), short)

    def test_uniform_bytes(self) -> None:
        mask = mask_from_seed(SEED, 50_000, b"uniform")
        assert _chi2_uniform(np.bincount(mask.view(np.uint8), minlength=256)) < CHI2_255_LOOSE
        top = (mask >> np.uint64(56)).astype(np.int64)
        assert _chi2_uniform(np.bincount(top, minlength=256)) < CHI2_255_LOOSE

    def test_shapes(self) -> None:
        assert mask_from_seed(SEED, (), b"s").shape == ()
        assert mask_from_seed(SEED, 0, b"s").shape == (0,)
        assert mask_from_seed(SEED, np.int64(3), b"s").shape == (3,)
        assert mask_from_seed(SEED, (2, 0, 3), b"s").shape == (2, 0, 3)

    def test_validation(self) -> None:
        with pytest.raises(ValueError, match=f"{MASK_SEED_BYTES} bytes"):
            mask_from_seed(SEED[:16], 3, b"x")
        with pytest.raises(ValueError, match="all zero"):
            mask_from_seed(bytes(32), 3, b"x")
        with pytest.raises(TypeError, match="seed"):
            mask_from_seed("a" * 32, 3, b"x")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="label"):
            mask_from_seed(SEED, 3, "x")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="non-negative"):
            mask_from_seed(SEED, (2, -1), b"x")
        with pytest.raises(TypeError, match="shape"):
            mask_from_seed(SEED, (2.0, 3), b"x")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="shape"):
            mask_from_seed(SEED, "23", b"x")  # type: ignore[arg-type]

    def test_errors_do_not_leak_seed(self) -> None:
        with pytest.raises(ValueError) as info:
            mask_from_seed(SEED[:31], 3, b"x")
        assert SEED[:31].hex() not in str(info.value) and repr(SEED[:31]) not in str(info.value)


# --- pair_clients -----------------------------------------------------------------------------------------


class TestPairClients:
    @pytest.mark.parametrize("n", [2, 3, 5, 20, 101])
    def test_permutation_without_fixed_points_single_cycle(self, n: int) -> None:
        dest = pair_clients(n, np.random.default_rng(n))
        assert dest.dtype == np.int64 and dest.shape == (n,)
        assert sorted(dest.tolist()) == list(range(n))
        assert np.all(dest != np.arange(n))
        seen, node = set(), 0
        while node not in seen:
            seen.add(node)
            node = int(dest[node])
        assert len(seen) == n  # one cycle through every client

    def test_two_clients_swap(self) -> None:
        assert pair_clients(2, np.random.default_rng(0)).tolist() == [1, 0]

    def test_deterministic_given_rng_and_varies(self) -> None:
        a = pair_clients(30, np.random.default_rng(123))
        np.testing.assert_array_equal(a, pair_clients(30, np.random.default_rng(123)))
        others = {tuple(pair_clients(30, np.random.default_rng(s)).tolist()) for s in range(20)}
        assert len(others) == 20

    def test_validation(self) -> None:
        rng = np.random.default_rng(0)
        for bad in (0, 1, -3):
            with pytest.raises(ValueError, match="at least 2"):
                pair_clients(bad, rng)
        with pytest.raises(TypeError):
            pair_clients(3.0, rng)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="Generator"):
            pair_clients(3, 0)  # type: ignore[arg-type]


# --- the GNN4FR two-share upload scheme -------------------------------------------------------------------


def _simulate_uploads(
    enc: np.ndarray, dest: np.ndarray, random_shares: list[np.ndarray]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each client keeps k_i - r_i, sends r_i to dest[i], uploads kept + received."""
    kept = [k - r for k, r in zip(enc, random_shares, strict=True)]
    received: list[np.ndarray | None] = [None] * len(enc)
    for i, target in enumerate(dest.tolist()):
        assert received[target] is None
        received[target] = random_shares[i]
    uploads = [k + r for k, r in zip(kept, received, strict=True) if r is not None]
    assert len(uploads) == len(enc)
    return kept, uploads


class TestGnn4frUploadScheme:
    N_CLIENTS = 20
    DIM = 500

    def _check_aggregate(
        self, fp: FixedPoint, x: np.ndarray, enc: np.ndarray, uploads: list[np.ndarray]
    ) -> None:
        aggregate = reconstruct(uploads)
        np.testing.assert_array_equal(aggregate, _ring_sum(enc))
        assert aggregate.view(np.int64).astype(object).tolist() == _exact_int_sum(enc).tolist()
        err = np.abs(fp.decode(aggregate) - x.sum(axis=0))
        assert np.max(err) <= fp.resolution * self.N_CLIENTS

    def test_split_based_scheme(self) -> None:
        fp = FixedPoint()
        rng = np.random.default_rng(2023)
        x = rng.standard_normal((self.N_CLIENTS, self.DIM)) * 0.1
        enc = fp.encode(x)
        dest = pair_clients(self.N_CLIENTS, rng)
        pieces = [split(k, 2) for k in enc]
        sent = [p[0] for p in pieces]
        kept, uploads = _simulate_uploads(enc, dest, sent)
        for k, p in zip(kept, pieces, strict=True):
            np.testing.assert_array_equal(k, p[1])
        self._check_aggregate(fp, x, enc, uploads)
        for i, upload in enumerate(uploads):
            assert np.count_nonzero(upload == enc[i]) == 0
            assert np.count_nonzero(upload == kept[i]) == 0
            assert np.max(np.abs(fp.decode(upload) - x[i])) > 1.0  # the upload does not decode to g_i

    def test_seeded_mask_scheme(self) -> None:
        fp = FixedPoint()
        rng = np.random.default_rng(7)
        x = rng.uniform(-5, 5, size=(self.N_CLIENTS, self.DIM))
        enc = fp.encode(x)
        dest = pair_clients(self.N_CLIENTS, rng)
        seeds = [bytes(rng.integers(1, 256, size=32, dtype=np.uint8)) for _ in range(self.N_CLIENTS)]
        sent = [mask_from_seed(s, self.DIM, f"epoch-0/client-{i}".encode()) for i, s in enumerate(seeds)]
        _, uploads = _simulate_uploads(enc, dest, sent)
        self._check_aggregate(fp, x, enc, uploads)

    def test_uploads_look_uniform_and_subsets_hide(self) -> None:
        """Uploads of an all-zero gradient are uniform; any proper subset's sum is uniform too.

        Statistical sanity check of the scheme's arithmetic (a share that cancelled or leaked the value
        would fail it); secrecy itself rests on the CSPRNG draw of :func:`split`.
        """
        fp = FixedPoint()
        rng = np.random.default_rng(11)
        n, dim = 8, 20_000
        enc = np.zeros((n, dim), dtype=np.uint64)
        dest = pair_clients(n, rng)
        _, uploads = _simulate_uploads(enc, dest, [split(k, 2)[0] for k in enc])
        assert np.all(reconstruct(uploads) == 0)
        assert fp.decode(reconstruct(uploads)).max() == 0.0
        for upload in uploads:
            assert _chi2_uniform(np.bincount(upload.view(np.uint8), minlength=256)) < CHI2_255_LOOSE
        half = reconstruct(uploads[: n // 2])
        assert _chi2_uniform(np.bincount(half.view(np.uint8), minlength=256)) < CHI2_255_LOOSE


def test_a_sum_that_would_wrap_is_refused_before_it_silently_decodes_wrong() -> None:
    """Without the check the ring sum wraps and decodes to a wrong value (the old behaviour)."""
    fp = FixedPoint(52)
    x = np.full(4, 1000.0)  # 4 × 1000 > 2^(63-52) = 2048: the exact sum leaves the decode range
    wrapped = fp.decode(reconstruct([fp.encode(x[:1]) for _ in range(4)]))
    assert wrapped[0] != 4000.0
    with pytest.raises(OverflowError, match="4 summands"):
        fp.check_sum(4, 1000.0, "aggregate")
    fp.check_sum(2, 1000.0, "aggregate")  # 2000 < 2048 fits
