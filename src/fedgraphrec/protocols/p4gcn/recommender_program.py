"""The recommender organisation ``P1`` as a party program: ratings, every trainable parameter, the HE keys.

:class:`RecommenderProgram` hosts the model of :class:`~.recommender.Recommender` and answers the
coordinator's stages (:mod:`.roles`) of Algorithm 1 (spec §4.5): the set-up message ``[X]``, then per
iteration message 1 (its batch's user ids, from the schedule it fixed itself), message 3 (``[G]``,
after training its local parameters on the decrypted message 2) and message 5 (the re-encrypted
``[X_B]``, after applying the decrypted message 4); the evaluation release's rows (§4.6) and the
held-out metrics (only ``P1`` holds ratings).

It checks every request against its own state (:mod:`fedgraphrec.runtime.expect`): the stage order
(:func:`recommender_flow`), each part's phase, protection (``homomorphic``), origin role (the social
party) and kind, the batch the coordinator names (the next of its own schedule), and the shape of
every ciphertext matrix (the batch it sent, the embedding width), before decrypting anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.he.base import EncMatrix, HEBackend
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.protocols.base import ClientProgram
from fedgraphrec.protocols.p4gcn.recommender import Recommender
from fedgraphrec.protocols.p4gcn.roles import (
    PH_BWD,
    PH_CONTEXT,
    PH_EVAL,
    PH_FWD,
    PH_GRAD,
    PH_IDS,
    PH_SETUP_X,
    PH_SYNC,
    RECOMMENDER,
    SOCIAL,
    ST_EVALUATE,
    ST_HELLO,
    ST_IDS,
    ST_KEYS,
    ST_LOCAL,
    ST_ROWS,
    ST_UPDATE,
)
from fedgraphrec.protocols.p4gcn.schedule import batch_schedule, release_count
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.protocols.p4gcn.wire import he_part, ids_part, make_he, open_he
from fedgraphrec.runtime.expect import Expect, Expectation, StageFlow, flow
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.seeding import seeded_generator

__all__ = ["EVALUATE_REPEATS", "RecommenderData", "RecommenderProgram", "recommender_flow"]

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]
EVALUATE_REPEATS = 8
"""How often ``evaluate`` may run in one step (a split per run; the trainer asks for a few)."""


@dataclass(frozen=True)
class RecommenderData:
    """What ``P1`` knows from outside the protocol.

    Attributes:
        train: ``(users, items, ratings)`` training records.
        n_users: ``N`` (shared with ``P2``: the aligned user ids).
        n_items: ``N_V``.
        rating_range: ``(lo, hi)`` of the decoder.
        seed: the run seed; ``P1`` draws its schedule and its model's initial values from named child
            streams of it (the same ones in every engine).
        splits: held-out ``(users, items, ratings)`` by split name, for the ``evaluate`` stage.
    """

    train: Arrays
    n_users: int
    n_items: int
    rating_range: tuple[float, float]
    seed: int
    splits: dict[str, Arrays] = field(default_factory=dict)


def recommender_flow(n_chunks: int) -> StageFlow:
    """``P1``'s stage order: set-up, then iterations (ids → local → update), release chunks, evaluation."""
    after_iter = (ST_IDS, ST_ROWS, ST_EVALUATE)
    return flow(
        first=(ST_HELLO,),
        after={
            ST_HELLO: (ST_KEYS,),
            ST_KEYS: after_iter,
            ST_IDS: (ST_LOCAL,),
            ST_LOCAL: (ST_UPDATE,),
            ST_UPDATE: after_iter,
            ST_ROWS: (ST_ROWS, ST_EVALUATE),
            ST_EVALUATE: after_iter,
        },
        new_step=after_iter,
        repeats={ST_ROWS: n_chunks, ST_EVALUATE: EVALUATE_REPEATS},
    )


def _from_social(phase: str, kind: str) -> Expect:
    return Expect(phase, "homomorphic", kind=kind, shape="blobs", from_role=SOCIAL)


class RecommenderProgram(ClientProgram[None]):
    """``P1`` (module docstring).

    Args:
        settings: the run's :class:`~.settings.P4GCNSettings`.
        clients: ``[0]`` (the recommender's node hosts the one organisation).
        data: the recommender's own data (:class:`RecommenderData`).
        backend: the HE backend whose key pair ``P1`` owns (default: a fresh one from the settings).
        serialise: send ciphertexts as the backend's bytes (``real`` mode, other processes).
    """

    def __init__(
        self,
        settings: P4GCNSettings,
        clients: np.ndarray,
        data: RecommenderData,
        *,
        backend: HEBackend | None = None,
        serialise: bool = False,
    ) -> None:
        self.own, self.serialise = data, serialise
        self.backend = backend if backend is not None else make_he(settings.backend, settings.dim)
        super().__init__(settings, clients, None)

    def init_state(self) -> None:
        """The schedule (record indices per batch), the model, ``K`` and the iteration counter."""
        s, d = self.settings, self.own
        self.users, self.items, self.ratings = (np.asarray(a) for a in d.train)
        sched_ss, p1_ss, _ = np.random.SeedSequence(d.seed).spawn(3)
        self.schedule = batch_schedule(len(self.users), s.batch, s.epochs, np.random.default_rng(sched_ss))
        self.batches_per_epoch = -(-len(self.users) // s.batch)
        self.releases = release_count(self.schedule, self.users, d.n_users, s.sensitivity)
        binary = sp.csr_matrix(
            (np.ones(len(self.users)), (self.users, self.items)), shape=(d.n_users, d.n_items)
        )
        binary.data[:] = 1.0
        graph = NormalizedBipartite.from_train(binary, dtype=torch.float64)
        gen = seeded_generator(int(p1_ss.generate_state(1)[0]))
        self.model = Recommender(
            graph, s.backbone, s.dim, s.layers, s.beta, s.fusion, s.lr, s.social_lr, s.clip,
            self.backend, d.rating_range, gen, weight_decay=s.weight_decay,
        )  # fmt: skip
        self.done = 0  # iterations completed
        self.batch_users: np.ndarray | None = None  # the batch of the open iteration
        self.released = 0  # users of the evaluation release received
        self.n_chunks = -(-d.n_users // s.eval_chunk)

    # ------------------------------------------------------------------ what the node accepts
    def stage_flow(self) -> StageFlow:
        """:func:`recommender_flow`."""
        return recommender_flow(self.n_chunks)

    def expect(self, stage: str) -> Expectation | None:
        """The parts of ``stage``: the social party's sandwiches, relayed by the coordinator."""
        table: dict[str, Expectation] = {
            ST_HELLO: {},
            ST_KEYS: {},
            ST_IDS: {},
            ST_LOCAL: {"rows": _from_social(PH_FWD, "social_rows")},
            ST_UPDATE: {"delta": _from_social(PH_BWD, "social_update")},
            ST_ROWS: {"rows": _from_social(PH_EVAL, "social_rows")},
            ST_EVALUATE: {},
        }
        return table.get(stage)

    def _refuse(self, stage: str, why: str) -> IntegrityError:
        return IntegrityError(f"p4gcn recommender stage {stage!r}: {why}")

    def _open(self, stage: str, request: Message, name: str, rows: int) -> EncMatrix:
        where = f"p4gcn recommender stage {stage!r}: part {name!r}"
        return open_he(self.backend, request[name], rows, self.settings.dim, where)

    # ------------------------------------------------------------------ stages
    def stage_setup_hello(self, step: int, request: Message) -> Message:
        """Name this organisation (so the coordinator knows which node is which)."""
        return Message(fields={"organisation": RECOMMENDER})

    def stage_setup_keys(self, step: int, request: Message) -> Message:
        """Set-up: the public plan (batches, ``K``) and ``[X_soc / s_x]`` of every user.

        With ``context`` asked (the social party in another process), the public HE context too.
        """
        enc = self.model.encrypt_x()
        plan = {
            "n_users": self.own.n_users,
            "batches": len(self.schedule),
            "batches_per_epoch": self.batches_per_epoch,
            "releases": self.releases,
        }
        x = he_part(self.backend, enc, PH_SETUP_X, "embedding", RECOMMENDER, SOCIAL, serialise=self.serialise)
        out = Message({"x": x}, fields=plan)
        if request.fields.get("context") is True:  # P2 runs elsewhere: it needs the public context
            public = [self.backend.public_bytes()]
            out.add(
                "context", Part(PH_CONTEXT, "he_public_context", RECOMMENDER, SOCIAL, public, shape="blobs")
            )
        return out

    def stage_iter_ids(self, step: int, request: Message) -> Message:
        """Message 1: the distinct users of the next batch of the schedule (the coordinator names it)."""
        if request.fields.get("batch") != self.done:
            raise self._refuse(ST_IDS, f"the coordinator asked for batch {request.fields.get('batch')!r}; "
                               f"the next batch of this party's schedule is {self.done}")  # fmt: skip
        if self.done >= len(self.schedule):
            raise self._refuse(ST_IDS, f"the schedule has {len(self.schedule)} batches; all ran")
        self.batch_users = np.unique(self.users[self.schedule[self.done]])
        return Message({"ids": ids_part(self.batch_users, RECOMMENDER, SOCIAL, PH_IDS)})

    def stage_iter_local(self, step: int, request: Message) -> Message:
        """Message 2 in, local training, message 3 ``[G]`` out (with the batch loss, for the log)."""
        assert self.batch_users is not None  # the flow puts ids first
        idx = self.schedule[self.done]
        y_b = self.model.social_rows(self._open(ST_LOCAL, request, "rows", len(self.batch_users)))
        u, v, r = self.users[idx], self.items[idx], self.ratings[idx]
        loss, enc_g = self.model.local_step(self.batch_users, y_b, u, v, r)
        g = he_part(
            self.backend, enc_g, PH_GRAD, "social_gradient", RECOMMENDER, SOCIAL, serialise=self.serialise
        )
        return Message({"grad": g}, fields={"loss": loss})

    def stage_iter_update(self, step: int, request: Message) -> Message:
        """Message 4 in, ``X_soc[B]`` updated and re-clipped, message 5 ``[X_B]`` out."""
        assert self.batch_users is not None
        users = self.batch_users
        self.model.apply_social_update(self._open(ST_UPDATE, request, "delta", len(users)))
        self.batch_users = None
        self.done += 1
        enc = self.model.encrypt_x(users)
        x = he_part(self.backend, enc, PH_SYNC, "embedding", RECOMMENDER, SOCIAL, serialise=self.serialise)
        return Message({"x": x})

    def stage_eval_rows(self, step: int, request: Message) -> Message:
        """One chunk of the evaluation release: the next users in id order (§4.6)."""
        n, chunk = self.own.n_users, self.settings.eval_chunk
        lo = self.released % n
        users = np.arange(lo, min(n, lo + chunk))
        self.model.y_cache[users] = self.model.social_rows(self._open(ST_ROWS, request, "rows", len(users)))
        self.released = lo + len(users)
        return Message()

    def stage_evaluate(self, step: int, request: Message) -> Message:
        """Held-out metric sums of one split (``sse``, ``sae``, ``n``; predictions clipped to the range)."""
        split = request.fields.get("split")
        if split not in self.own.splits:
            raise self._refuse(ST_EVALUATE, f"no held-out split {split!r} on this node")
        users, items, truth = self.own.splits[split]
        lo, hi = self.own.rating_range
        err = np.clip(self.predict(users, items), lo, hi) - truth
        return Message(
            fields={"sse": float(np.sum(err**2)), "sae": float(np.sum(np.abs(err))), "n": len(err)}
        )

    # ------------------------------------------------------------------ state (between messages)
    def state_arrays(self) -> dict[str, np.ndarray]:
        """Everything that changes during the run, as arrays (a Flower node's ``context.state``).

        The schedule, the graph and the initial values are rebuilt from the data and the seed.
        """
        m = self.model
        out = {f"model.{k}": v.detach().numpy().copy() for k, v in m.state_dict().items()}
        for i, st in m.opt.state_dict()["state"].items():
            out.update({f"opt.{i}.{k}": torch.as_tensor(v).detach().numpy().copy() for k, v in st.items()})
        batch = np.zeros(0, np.int64) if self.batch_users is None else self.batch_users
        open_ = self.batch_users is not None
        counters = np.array([self.done, self.released, int(open_)], dtype=np.int64)
        pending = np.zeros(0) if m._pending is None else np.array([m._pending[2]])  # s_g of [G] in flight
        return {
            **out,
            "x_soc": m.x_soc.copy(),
            "y_cache": m.y_cache.copy(),
            "batch": batch,
            "counters": counters,
            "pending": pending,
            **self._secret(),
        }

    def _secret(self) -> dict[str, np.ndarray]:
        """The key set, where the backend can store it (a node rebuilds its program for each message)."""
        try:
            return {"he_secret": np.frombuffer(self.backend.secret_bytes(), dtype=np.uint8).copy()}
        except NotImplementedError:
            return {}

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state_arrays` into a program built from the same data, settings and seed.

        The key set (``he_secret``) is read by whoever builds the program (it needs the backend).
        """
        m = self.model
        m.load_state_dict(
            {k[6:]: torch.from_numpy(np.array(v)) for k, v in arrays.items() if k.startswith("model.")}
        )
        opt = m.opt.state_dict()
        state: dict[int, dict[str, torch.Tensor]] = {}
        for key, v in arrays.items():
            if key.startswith("opt."):
                _, i, name = key.split(".", 2)
                state.setdefault(int(i), {})[name] = torch.from_numpy(np.array(v))
        m.opt.load_state_dict({"state": state, "param_groups": opt["param_groups"]})
        m.x_soc[:] = arrays["x_soc"]
        m.y_cache[:] = arrays["y_cache"]
        self.done, self.released, open_ = (int(x) for x in arrays["counters"])
        self.batch_users = np.array(arrays["batch"], dtype=np.int64) if open_ else None
        pending = np.asarray(arrays["pending"])
        if len(pending) and self.batch_users is not None:
            m._pending = (self.batch_users, torch.zeros(0), float(pending[0]))

    @torch.no_grad()
    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Ratings from the cached social rows (post-processing of released rows)."""
        m = self.model
        y = torch.from_numpy(m.y_cache[users]).to(m.w2.dtype)
        return m.predict(torch.from_numpy(users), torch.from_numpy(items), y).numpy()
