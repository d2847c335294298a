"""Deterministic item-ID tokens S(ID_i) (LP-GCN §3, Algorithm 2 lines 12-14)."""

from __future__ import annotations

import hmac

import numpy as np
import pytest

from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.crypto.tokens import TOKEN_BYTES, ItemTokenizer

KEY = SharedKey.from_bytes(bytes(range(1, 33)))


def _oracle_token(key: SharedKey, item_id: int) -> bytes:
    """HMAC-SHA256 of the 8-byte big-endian id under the "item-token" sub-key, via the stdlib."""
    return hmac.digest(key.subkey("item-token"), item_id.to_bytes(8, "big"), "sha256")[:16]


def test_token_matches_stdlib_hmac_oracle() -> None:
    tokenizer = ItemTokenizer(KEY)
    for item_id in (0, 1, 2, 255, 256, 10**6, 2**32 + 7, 2**63 - 1):
        assert tokenizer.token(item_id) == _oracle_token(KEY, item_id)


def test_token_known_answer() -> None:
    # Pins the wire format: a change here breaks interoperability between versions.
    assert ItemTokenizer(KEY).token(42).hex() == "e9d117a973d57cac275916b2fea9e4f2"


def test_tokens_are_deterministic_across_instances() -> None:
    ids = np.arange(1000)
    assert ItemTokenizer(KEY).tokens(ids) == ItemTokenizer(SharedKey.from_bytes(KEY.to_bytes())).tokens(ids)


def test_tokens_depend_on_the_key() -> None:
    ids = np.arange(1000)
    ours = ItemTokenizer(KEY).tokens(ids)
    theirs = ItemTokenizer(SharedKey.generate()).tokens(ids)
    assert not set(ours) & set(theirs)


def test_distinct_ids_get_distinct_tokens() -> None:
    tokens = ItemTokenizer(KEY).tokens(np.arange(20_000))
    assert len(set(tokens)) == 20_000
    assert all(isinstance(t, bytes) and len(t) == TOKEN_BYTES for t in tokens)


def test_equal_ids_get_equal_tokens_in_a_batch() -> None:
    tokens = ItemTokenizer(KEY).tokens([5, 9, 5, 5, 9])
    assert tokens[0] == tokens[2] == tokens[3] and tokens[1] == tokens[4] and tokens[0] != tokens[1]


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16, np.uint64])
def test_batch_equals_scalar_for_every_integer_dtype(dtype: type) -> None:
    tokenizer = ItemTokenizer(KEY)
    ids: np.ndarray = np.array([0, 3, 17, 1000, 65535], dtype=dtype)
    assert tokenizer.tokens(ids) == [tokenizer.token(int(i)) for i in ids]
    assert tokenizer.tokens(list(ids)) == tokenizer.tokens(ids)
    assert tokenizer.token(ids[2]) == tokenizer.token(17)


def test_tokens_ending_in_nul_bytes_are_kept_whole() -> None:
    tokenizer = ItemTokenizer(KEY)
    tokens = tokenizer.tokens(np.arange(5000))
    with_nul = [t for t in tokens if t.endswith(b"\x00")]
    assert with_nul, "expected some of 5000 tokens to end in 0x00"
    assert all(len(t) == TOKEN_BYTES for t in with_nul)


def test_token_ints_are_the_big_endian_prefix() -> None:
    tokenizer = ItemTokenizer(KEY)
    ids = np.arange(2000)
    ints = tokenizer.token_ints(ids)
    assert ints.dtype == np.int64 and ints.shape == (2000,)
    expected = [int.from_bytes(t[:8], "big", signed=True) for t in tokenizer.tokens(ids)]
    assert ints.tolist() == expected
    assert len(np.unique(ints)) == 2000
    assert (ints < 0).any() and (ints > 0).any()


def test_empty_batch() -> None:
    tokenizer = ItemTokenizer(KEY)
    assert tokenizer.tokens([]) == []
    assert tokenizer.tokens(np.array([], dtype=np.int64)) == []
    assert tokenizer.token_ints([]).dtype == np.int64 and tokenizer.token_ints([]).size == 0


@pytest.mark.parametrize("bad", [-1, 2**63, -(2**40)])
def test_out_of_range_scalar_is_rejected(bad: int) -> None:
    with pytest.raises(ValueError, match=r"item_id must be in \[0, 2\*\*63 - 1\]"):
        ItemTokenizer(KEY).token(bad)


@pytest.mark.parametrize("bad", [True, 1.0, "7", b"7"])
def test_non_integer_scalar_is_rejected(bad: object) -> None:
    with pytest.raises(TypeError, match="item_id must be an integer"):
        ItemTokenizer(KEY).token(bad)  # type: ignore[arg-type]


def test_invalid_batches_are_rejected() -> None:
    tokenizer = ItemTokenizer(KEY)
    with pytest.raises(ValueError, match="non-negative"):
        tokenizer.tokens(np.array([3, -2]))
    with pytest.raises(ValueError, match=r"at most 2\*\*63 - 1"):
        tokenizer.tokens(np.array([2**63], dtype=np.uint64))
    with pytest.raises(TypeError, match="integer dtype"):
        tokenizer.tokens(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="one-dimensional"):
        tokenizer.token_ints(np.zeros((2, 2), dtype=np.int64))


def test_tokenizer_requires_a_shared_key() -> None:
    with pytest.raises(TypeError, match="shared_key must be a SharedKey"):
        ItemTokenizer(KEY.to_bytes())  # type: ignore[arg-type]


def test_tokenizer_repr_hides_the_key() -> None:
    text = repr(ItemTokenizer(KEY))
    assert KEY.to_bytes().hex() not in text
    assert KEY.subkey("item-token").hex() not in text
