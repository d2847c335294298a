"""The group-key agreement's client steps (crypto.group_key), shared by GNN4FR and FedPerGNN."""

from __future__ import annotations

import pytest

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.group_key import WRAPPED_KEY_BYTES, client_keys, unwrap_all, wrap_for_all


def test_every_client_unwraps_the_key_the_holder_drew():
    private, public = client_keys(3, real=True)
    raw, wrapped = wrap_for_all(b"".join(public), real=True)
    assert len(raw) == 32 and [len(w) for w in wrapped] == [WRAPPED_KEY_BYTES] * 3
    assert unwrap_all(wrapped, private, True, phase="p", clients=[4, 5, 6]) == raw


def test_accounted_mode_books_the_exact_sizes_and_draws_nothing():
    private, public = client_keys(2, real=False)
    raw, wrapped = wrap_for_all(b"".join(public), real=False)
    assert private == raw == b"" and public == [bytes(32)] * 2 and wrapped == [bytes(WRAPPED_KEY_BYTES)] * 2
    assert unwrap_all(wrapped, private, False, phase="p", clients=[0, 1]) is None


def test_a_missing_or_foreign_wrapped_key_is_refused_naming_phase_and_client():
    private, public = client_keys(2, real=True)
    _, wrapped = wrap_for_all(b"".join(public), real=True)
    with pytest.raises(IntegrityError, match=r"setup/wrapped: the wrapped key for client:8 never arrived"):
        unwrap_all([wrapped[0], None], private, True, phase="setup/wrapped", clients=[7, 8])
    _, other = wrap_for_all(b"".join(public), real=True)  # a second S for the second client
    with pytest.raises(IntegrityError, match=r"setup/wrapped: .* unwrapped 2 different shared keys"):
        unwrap_all([wrapped[0], other[1]], private, True, phase="setup/wrapped", clients=[7, 8])
