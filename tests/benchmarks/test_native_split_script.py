"""``benchmarks/native_split.py``: which kind of code a py-spy sample's innermost frame is in.

The committed split of LP-GCN's minibatch (``results/benchmarks/lpgcn_ml100k_profile.md``, eleventh
round) rests on this classification of py-spy's raw stacks, and on counting only the samples taken
inside the training loop (not the set-up or the sleep before it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import native_split  # noqa: E402


@pytest.mark.parametrize(
    ("frame", "kind"),
    [
        ("mkl_sparse_s_csr_ng_n_mm_c_ker_i4_avx512 (libtorch_cpu.so)", "torch"),
        ("torch::FunctionSignature::parse (libtorch_python.so)", "torch"),
        ("c10::impl::OperatorEntry::lookup (libc10.so)", "torch"),
        ("mapiter_trivial_get (numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so)", "numpy"),
        ("malloc (libc.so.6)", "libc"),
        ("__tls_get_addr (ld-linux-x86-64.so.2)", "libc"),
        ("aes_gcm_encrypt (cryptography/hazmat/bindings/_rust.abi3.so)", "crypto"),
        ("time_sleep (libpython3.11.so.1.0)", "python"),
        ("Ledger.record (fedgraphrec/runtime/ledger.py:128)", "python"),
        ("csr_matvec (scipy/sparse/_sparsetools.cpython-311-x86_64-linux-gnu.so)", "other native"),
    ],
)
def test_a_frame_is_classified_by_its_library(frame: str, kind: str) -> None:
    assert native_split.kind_of(frame) == kind


def test_only_samples_inside_the_training_loop_count() -> None:
    loop = "<module> (x.py:1);ProtocolLearner.train_batch (fedgraphrec/training/protocol_learner.py:182)"
    raw = "\n".join(
        [
            f"{loop};addmm (libtorch_cpu.so) 6",
            f"{loop};Ledger.record (fedgraphrec/runtime/ledger.py:128) 3",
            f"{loop};malloc (libc.so.6) 1",
            "<module> (x.py:1);SetupRounds.setup (fedgraphrec/protocols/lpgcn/server_setup.py:125) 50",
            "<module> (x.py:1);time_sleep (libpython3.11.so.1.0) 7",
        ]
    )
    shares, samples = native_split.split(raw)
    assert samples == 10
    assert shares == pytest.approx(
        {"torch": 0.6, "numpy": 0.0, "libc": 0.1, "crypto": 0.0, "python": 0.3, "other native": 0.0}
    )
