"""Flower records and the older job's run config (the secure-aggregation and FedGRec engine tests are
in ``test_flower_secagg.py``, on the generic party-program engine)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")

from fedgraphrec.engines.flower.job import FlowerJob
from fedgraphrec.runtime.flower import content_bytes, pack, unpack


def test_records_round_trip_and_flower_counts_at_least_the_payload() -> None:
    vec = {3: np.arange(1000, dtype=np.uint64) * np.uint64(2**40)}
    content = pack({"op": "mask", "label": b"x", "ids": [1, 2]}, vec)
    fields, vectors = unpack(content)
    assert fields["op"] == "mask" and fields["label"] == b"x" and list(fields["ids"]) == [1, 2]
    assert np.array_equal(vectors[3], vec[3])
    assert content_bytes(content) > 8000  # Flower's serialised size covers the 8,000-byte vector


def test_run_config_round_trip_and_unknown_key_named() -> None:
    job = FlowerJob(users=24, items=30, batches=3)
    assert FlowerJob.from_config(job.to_config()) == job
    assert FlowerJob.from_config({"batches": "3"}).batches == 3
    with pytest.raises(ValueError, match="'bogus-key'"):
        FlowerJob.from_config({"bogus-key": 1})
    with pytest.raises(ValueError, match="flower simulate PROTOCOL"):
        FlowerJob(protocol="fedgrec")
