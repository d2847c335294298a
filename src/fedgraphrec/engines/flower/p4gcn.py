"""P4GCN on Flower: each organisation on its own SuperNode, the coordinator in the ServerApp.

The ServerApp runs :class:`~fedgraphrec.protocols.p4gcn.server.P4GCNServer` over a
:class:`~fedgraphrec.runtime.flower.transport.FlowerTransport` and the same Trainer loop and run
folder as in process (:func:`~fedgraphrec.training.rating.train_rating`); the coordinator holds no
data (it does not load the dataset). Each SuperNode hosts one organisation's program
(:class:`~fedgraphrec.protocols.p4gcn.recommender_program.RecommenderProgram` or
:class:`~fedgraphrec.protocols.p4gcn.social_program.SocialProgram`) behind the same
:class:`~fedgraphrec.runtime.endpoint.NodeEndpoint` as in process
(:mod:`fedgraphrec.engines.flower.p4gcn_node`).

Which organisation a SuperNode is comes from its own configuration (``--node-config
"organisation='social'"``; in Flower's simulation runtime ``partition-id`` 0 is the recommender, 1
the social platform). Simulation shortcut: both nodes load the dataset the hello names (one file
holds both organisations' data); the recommender's program keeps the ratings only, the social
platform's the social graph only.

Between messages a node keeps its program's state in ``context.state`` (``state_arrays``), the
large public HE context in a node-local file named by its SHA-256
(:data:`~fedgraphrec.engines.flower.p4gcn_node.CACHE_DIR`). Backends:
``plain`` (float64, no keys) and ``ckks`` (TenSEAL): the recommender's node draws the key pair at its
first message and keeps it (TenSEAL's serialisation with the secret key); its public context goes to
the social node with the set-up (phase ``setup/context``). ``paillier`` and ``ckks-packed`` do not
serialise their keys yet and are refused with a clear error.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedgraphrec.engines.flower.learner import flower_summary
from fedgraphrec.engines.flower.p4gcn_node import PROTOCOL, make_p4gcn_client_app
from fedgraphrec.engines.flower.party_app import TRACE, submit, wait_for_nodes
from fedgraphrec.protocols.p4gcn.driver import privacy_record
from fedgraphrec.protocols.p4gcn.server import P4GCNServer
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.runtime.flower.records import Traffic
from fedgraphrec.runtime.flower.transport import ROUND_TIMEOUT_S, FlowerTransport
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.runtime.network import CryptoMode, Network
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.learner_base import BatchStats
from fedgraphrec.training.rating import NamedDataset, train_rating

__all__ = [
    "FlowerP4GCN",
    "deploy_p4gcn",
    "run_p4gcn_from_config",
    "run_p4gcn_on_grid",
    "run_request",
    "simulate_p4gcn",
]


class FlowerP4GCN:
    """The ServerApp's side of a P4GCN run: the coordinator over Flower, as a rating learner.

    Args:
        settings: the run's settings (a ``p4gcn*`` method, the ``plain`` backend).
        dataset: the dataset the nodes load (the coordinator itself loads nothing).
        seed: the run seed (sent to the nodes).
        grid: the ServerApp's grid.
        nodes: the two SuperNode ids.
        crypto: ``accounted`` or ``real`` (ciphertexts always cross as serialised bytes).
        timeout: bound on one round, in seconds.
    """

    transport_class: type[FlowerTransport] = FlowerTransport
    """The Flower transport (a test carries records over a stand-in grid)."""

    def __init__(
        self, settings: P4GCNSettings, dataset: str, seed: int, grid: Grid, nodes: list[int],
        crypto: CryptoMode = "accounted", timeout: float = ROUND_TIMEOUT_S,
        options: Mapping[str, Any] | None = None,
    ) -> None:  # fmt: skip
        if not settings.is_p4gcn:
            raise ValueError(f"flower p4gcn runs the p4gcn methods, not {settings.method!r}")
        self.settings = settings
        self.net = Network(0, crypto=crypto, protocol=PROTOCOL)
        self.traffic = Traffic()
        run = {
            "settings": json.dumps(dataclasses.asdict(settings)),
            "seed": seed,
            "dataset": dataset,
            "crypto": crypto,
            "options": json.dumps(dict(options or {}), sort_keys=True),
        }
        hello = {int(n): run for n in nodes}
        self.transport = self.transport_class(self.net, grid, sorted(nodes), hello, timeout, self.traffic)
        self.server = P4GCNServer(settings, self.transport, 2, 0)
        self.server.ship_context = settings.backend != "plain"  # the social node builds P1's public side
        self.server.setup()

    @property
    def ledger(self) -> Ledger:
        """What the coordinator relayed, each message booked once."""
        return self.net.ledger

    def train_round(self, epoch: int) -> BatchStats:
        """One epoch of iterations."""
        stats = self.server.train_round(epoch)
        return BatchStats(loss=stats.loss, bpr=0.0, reg=0.0)

    def evaluate_splits(self, splits: list[str], ks: list[int] | None = None) -> dict[str, dict[str, float]]:
        """RMSE and MAE per split, from the recommender node's sums."""
        return self.server.evaluate_ratings(list(splits))

    def pop_deviation(self) -> None:
        """P4GCN with DP noise has no lossless oracle."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """Nothing: the organisations' state lives on their SuperNodes."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A Flower P4GCN run keeps its state on the SuperNodes: it does not resume from a checkpoint."""
        raise ValueError("a P4GCN run on Flower keeps its state on the SuperNodes; it cannot resume")

    def run_summary(self) -> dict[str, Any]:
        """The social node's privacy accounting, the backend, the ciphertext traffic, Flower's own counts."""
        report = self.server.privacy_report()
        spent = report.get("epsilon_spent")
        privacy = privacy_record(
            self.settings, None if spent is None else float(spent), int(report["releases"]),
            report.get("noise_source"),
        )  # fmt: skip
        return {
            "privacy": privacy, "backend": self.settings.backend,
            "cipher_GB": self.ledger.total_bytes() / 1e9, "releases_K": int(report["releases"]),
            **flower_summary(self.traffic, 2),
        }  # fmt: skip


def run_p4gcn_on_grid(
    grid: Grid, settings: P4GCNSettings, dataset: str, seed: int, out: str | Path,
    crypto: CryptoMode = "accounted", timeout: float = ROUND_TIMEOUT_S,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Train over the two SuperNodes of ``grid`` and write the run folder ``out``; returns the summary.

    ``flower.json`` (every round's latency and Flower-counted bytes) is written last, as for every
    Flower run.
    """
    nodes = wait_for_nodes(grid, 2)
    built: list[FlowerP4GCN] = []

    def learner(cfg: TrainConfig, data: Any) -> FlowerP4GCN:
        bound = cfg.protocol_settings  # the settings with the run's fields (seed, epochs, patience)
        assert isinstance(bound, P4GCNSettings)
        built.append(FlowerP4GCN(bound, dataset, seed, grid, nodes[:2], crypto, timeout, options))
        return built[-1]

    summary = train_rating(
        NamedDataset(dataset), seed, settings, out, learner=learner, crypto=crypto, checkpoint_every=0
    )
    trace = {"nodes": nodes[:2], "rounds": [vars(r) for r in built[0].traffic.rounds]}
    (Path(out) / TRACE).write_text(json.dumps(trace, indent=1) + "\n")
    return summary


def run_request(
    settings: P4GCNSettings,
    dataset: str,
    seed: int,
    crypto: CryptoMode,
    options: Mapping[str, Any] | None = None,
) -> str:
    """The ``p4gcn`` run-config value of a deployed run (JSON): what :func:`run_p4gcn_from_config` reads.

    ``options``: the dataset's loading options (e.g. a synthetic generator's sizes).
    """
    req = {"settings": dataclasses.asdict(settings), "dataset": dataset, "seed": seed, "crypto": crypto}
    return json.dumps({**req, "options": dict(options or {})})


def run_p4gcn_from_config(grid: Grid, run_config: Mapping[str, Any]) -> dict[str, Any]:
    """The deployed ServerApp's P4GCN run: ``p4gcn`` (:func:`run_request`), ``out``, ``stage-timeout``.

    On failure, ``out/error.json`` says why.
    """
    out = Path(str(run_config.get("out") or "runs/flower"))
    try:
        req = json.loads(str(run_config["p4gcn"]))
        settings = P4GCNSettings(**req["settings"])
        timeout = float(run_config.get("stage-timeout", 0.0)) or ROUND_TIMEOUT_S
        crypto: CryptoMode = "real" if req["crypto"] == "real" else "accounted"
        dataset, seed, options = str(req["dataset"]), int(req["seed"]), req.get("options") or {}
        return run_p4gcn_on_grid(grid, settings, dataset, seed, out, crypto, timeout, options)
    except Exception as exc:
        out.mkdir(parents=True, exist_ok=True)
        (out / "error.json").write_text(json.dumps({"error": type(exc).__name__, "message": str(exc)}) + "\n")
        raise


def deploy_p4gcn(
    settings: P4GCNSettings, dataset: str, seed: int, out: str | Path, connection: str, *,
    crypto: CryptoMode = "accounted", app_dir: Path | None = None, env: Mapping[str, str] | None = None,
    timeout: float = ROUND_TIMEOUT_S, limit_s: float = 3600.0, options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Submit a P4GCN run to the SuperLink ``connection`` (two SuperNodes, one per organisation)."""
    out = Path(out).resolve()
    overrides = {
        "p4gcn": run_request(settings, dataset, seed, crypto, options), "out": str(out), "min-nodes": 2,
        "stage-timeout": float(timeout),
    }  # fmt: skip
    return submit(overrides, out, connection, app_dir=app_dir, env=env, limit_s=limit_s)


def simulate_p4gcn(
    settings: P4GCNSettings, dataset: str, seed: int, out: str | Path, crypto: CryptoMode = "accounted",
    timeout: float = ROUND_TIMEOUT_S,
) -> dict[str, Any]:  # fmt: skip
    """P4GCN in Flower's simulation runtime: two virtual SuperNodes (Ray backend); returns the summary."""
    from flwr.simulation import run_simulation

    sink: list[dict[str, Any]] = []
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        sink.append(run_p4gcn_on_grid(grid, settings, dataset, seed, out, crypto, timeout))

    backend = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}}
    run_simulation(server, make_p4gcn_client_app(), 2, "ray", backend)  # type: ignore[arg-type, unused-ignore]
    if not sink:
        raise RuntimeError("the Flower simulation ended without a result (see its log above)")
    return sink[0]
