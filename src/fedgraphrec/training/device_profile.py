"""The ``device_profile`` run option: which clients' work is replayed per message, and on what.

``device_profile = N`` (``[eval]``, :class:`~fedgraphrec.training.config.EvalSettings`) samples
``N`` clients from the run's seed (stream ``"device_profile"``, so the same clients every time the
run is repeated), attaches a :class:`~fedgraphrec.runtime.device_profile.DeviceWatch` to the
learner's ledger and lets the training loop replay their epochs one AEAD per message. It lives in
the ``[eval]`` table, not in a protocol's settings, because it measures the run and changes nothing
the protocol's programs compute; ``--set device_profile=8`` is its shorthand.
"""

from __future__ import annotations

from typing import Any

from fedgraphrec.runtime.device_profile import LABEL, DeviceWatch
from fedgraphrec.runtime.network import Network
from fedgraphrec.seeding import numpy_rng
from fedgraphrec.training.config import TrainConfig

__all__ = ["device_watch", "network_of", "no_devices"]


def network_of(learner: Any) -> Network | None:
    """The learner's :class:`Network` (party programs, round protocols, DGREC, P4GCN, Flower)."""
    for path in (("net",), ("protocol", "net"), ("rec", "network"), ("run", "net")):
        obj: Any = learner
        for name in path:
            obj = getattr(obj, name, None)
        if isinstance(obj, Network):
            return obj
    return None


def device_watch(cfg: TrainConfig, learner: Any) -> DeviceWatch | None:
    """A watch over ``min(device_profile, clients)`` seeded clients; ``None`` when off or clientless.

    Keys rotate with the network's step (:meth:`Network.begin_step`), which the watch reads at
    every booked batch.
    """
    ledger = getattr(learner, "ledger", None)
    if not cfg.eval.device_profile or ledger is None or not ledger.n_clients:
        return None
    n = min(cfg.eval.device_profile, ledger.n_clients)
    clients = sorted(
        numpy_rng(cfg.seed, "device_profile").choice(ledger.n_clients, n, replace=False).tolist()
    )
    net = network_of(learner)
    clock = (lambda: net.step) if net is not None else None
    return DeviceWatch(ledger, clients, net.protocol if net is not None else cfg.protocol, clock)


def no_devices(cfg: TrainConfig) -> dict[str, Any]:
    """The ``per_device`` entry of a run whose ledger has no client id space (P4GCN's organisations)."""
    return {
        "label": LABEL,
        "devices": 0,
        "note": f"{cfg.protocol}: the ledger books no per-client messages (no devices to replay)",
    }
