"""``device_profile``: the sampled devices' replay matches the ledger, and 0 changes nothing."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from fedgraphrec.runtime.device_profile import LABEL, DeviceWatch
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.training.config import ConfigError
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.trainer import Trainer

TINY = [
    "dataset=synthetic",
    "dataset_options.n_users=60",
    "dataset_options.n_items=80",
    "dataset_options.seed=3",
    "dim=4",
    "n_layers=1",
    "batch_size=256",
    "epochs=2",
    "clients_per_round=20",
    "valid_fraction=0.0",
]
PARTY_PROTOCOLS = ["lpgcn", "gnn4fr", "fedgrec", "federank", "fcf", "fedmf", "fedncf", "pgcn", "fedpergnn"]


def config(protocol: str, *extra: str):
    return load_config(None, [f"protocol={protocol}", *extra], shared=TINY)


class Tally:
    """Every message ``Ledger.record`` is told about, per client and direction (an independent count)."""

    def __init__(self) -> None:
        self.messages: dict[tuple[int, int], int] = defaultdict(int)
        self.bytes: dict[tuple[int, int], int] = defaultdict(int)

    def spy(self, monkeypatch: pytest.MonkeyPatch) -> None:
        record = Ledger.record
        tally = self

        def counted(ledger, phase, sender, receiver, sizes, *, senders=None, receivers=None, count=None,
                    repeat=1, **kw):  # fmt: skip
            n = count if count is not None else len(np.atleast_1d(sizes))
            each = [int(sizes)] * n if count is not None else np.atleast_1d(sizes).tolist()
            for direction, ids in ((0, senders), (1, receivers)):
                if ids is None:
                    continue
                for cid, size in zip(np.asarray(ids).tolist(), each, strict=True):
                    tally.messages[(cid, direction)] += repeat
                    tally.bytes[(cid, direction)] += size * repeat
            record(ledger, phase, sender, receiver, sizes, senders=senders, receivers=receivers, count=count,
                   repeat=repeat, **kw)  # fmt: skip

        monkeypatch.setattr(Ledger, "record", counted)

    def copy(self) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
        return dict(self.messages), dict(self.bytes)


@pytest.mark.parametrize("protocol", PARTY_PROTOCOLS)
def test_replay_covers_exactly_the_messages_the_sampled_clients_sent_and_received(
    protocol, tmp_path, monkeypatch
):
    tally = Tally()
    tally.spy(monkeypatch)
    in_epochs: dict[tuple[str, int, int], int] = defaultdict(int)  # what the ledger booked in the epochs
    begin, end = DeviceWatch.begin_epoch, DeviceWatch.end_epoch
    start: list[tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]] = []

    def begun(watch: DeviceWatch) -> None:
        start.append(tally.copy())
        begin(watch)

    def ended(watch: DeviceWatch) -> np.ndarray:
        messages, sizes = start.pop()
        for key in tally.messages:
            in_epochs[("messages", *key)] += tally.messages[key] - messages.get(key, 0)
            in_epochs[("bytes", *key)] += tally.bytes[key] - sizes.get(key, 0)
        return end(watch)

    monkeypatch.setattr(DeviceWatch, "begin_epoch", begun)
    monkeypatch.setattr(DeviceWatch, "end_epoch", ended)
    summary = Trainer(config(protocol, "device_profile=3"), tmp_path / "run", progress=False).fit().summary
    device = summary["communication"]["per_device"]
    assert device["label"] == LABEL and device["devices"] == 3 and device["epochs_replayed"] == 2
    assert device["ledger_agrees"]
    replayed_any = 0
    for row in device["clients"]:
        c = row["client"]
        for direction, name in ((0, "sent"), (1, "received")):
            messages, size = in_epochs[("messages", c, direction)], in_epochs[("bytes", c, direction)]
            assert row[f"messages_{name}"] * 2 == messages, (protocol, c, name)  # mean of two epochs
            assert row[f"bytes_{name}"] * 2 == size, (protocol, c, name)
            replayed_any += messages
    assert replayed_any > 0  # the sampled clients took part in something
    if protocol in ("lpgcn", "gnn4fr"):  # rows sealed under the group's per-step key: one HKDF per step
        assert device["key_derivations"]["max"] >= 1
    assert device["seconds"]["total"]["max"] > 0


def test_device_profile_zero_changes_nothing(tmp_path):
    off = Trainer(config("lpgcn"), tmp_path / "off", progress=False)
    assert off.learner.ledger.watch is None
    a = off.fit().summary
    b = Trainer(config("lpgcn", "device_profile=4"), tmp_path / "on", progress=False).fit().summary
    assert "per_device" not in a["communication"]
    assert set(b["communication"]) - set(a["communication"]) == {"per_device"}
    assert set(a) == set(b) and set(a["communication"]) <= set(b["communication"])
    assert a["test"] == b["test"]  # the replay draws nothing from the run's streams
    assert a["communication"]["total_bytes"] == b["communication"]["total_bytes"]


def test_device_profile_samples_from_the_seed_and_stops_at_the_client_count(tmp_path):
    a = Trainer(config("fedmf", "device_profile=5", "epochs=1"), tmp_path / "a", progress=False).fit().summary
    b = Trainer(config("fedmf", "device_profile=5", "epochs=1"), tmp_path / "b", progress=False).fit().summary
    ids = [r["client"] for r in a["communication"]["per_device"]["clients"]]
    assert ids == [r["client"] for r in b["communication"]["per_device"]["clients"]]
    assert len(set(ids)) == 5
    many = Trainer(config("fedmf", "device_profile=1000", "epochs=1"), tmp_path / "c", progress=False)
    assert many.fit().summary["communication"]["per_device"]["devices"] == 60


@pytest.mark.parametrize(
    ("value", "needle"), [("-1", "device_profile must be >= 0"), ("'eight'", "device_profile expects int")]
)
def test_bad_device_profile_is_a_config_error_naming_it(value, needle):
    with pytest.raises(ConfigError, match=needle):
        config("lpgcn", f"device_profile={value}")


def test_device_profile_with_central_is_refused():
    with pytest.raises(ConfigError, match="device_profile: protocol central"):
        config("central", "device_profile=2")


def test_dgrec_peers_are_replayed_one_aead_per_message():
    """DGREC (no server): every peer message is replayed; its per-link keys are not counted (documented)."""
    import scipy.sparse as sp

    from fedgraphrec.data.types import Interactions
    from fedgraphrec.protocols.dgrec.settings import DGRECSettings
    from fedgraphrec.training.device_profile import network_of
    from fedgraphrec.training.dgrec_learner import DGRECData, DGRECLearner

    rng = np.random.default_rng(0)
    train = (sp.random(30, 25, density=0.2, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    social = (sp.random(30, 30, density=0.2, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    inter = Interactions(name="toy", n_users=30, n_items=25, train=train, test=sp.csr_matrix((30, 25)))
    s = DGRECSettings.for_variant("dmf", d=4, centres_per_epoch=8).for_run(0, "accounted", None)
    learner = DGRECLearner(s, DGRECData(inter, social, sp.identity(25, format="csr")), transcripts=False)
    net = network_of(learner)
    assert net is not None
    watch = DeviceWatch(learner.ledger, [0, 5, 9], "dgrec", clock=lambda: net.step)
    booked = 0
    for epoch in range(2):
        watch.begin_epoch()
        before = learner.ledger.client_sent[[0, 5, 9]].sum() + learner.ledger.client_received[[0, 5, 9]].sum()
        learner.train_round(epoch)
        rows = watch.end_epoch()
        after = learner.ledger.client_sent[[0, 5, 9]].sum() + learner.ledger.client_received[[0, 5, 9]].sum()
        assert rows[:, 0].sum() + rows[:, 1].sum() == after - before
        booked += after - before
    assert booked > 0 and watch.ledger_agrees
    assert watch.summary()["messages"]["sent"]["max"] > 0
