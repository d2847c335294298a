"""The social platform ``P2`` as a party program: the social graph, the frozen ``W1``, the DP noise.

:class:`SocialProgram` hosts :class:`~.social.SocialParty` and answers the coordinator's stages of
Algorithm 1 (spec §4.5): it stores ``[X]`` at set-up and calibrates its noise to the plan's release
count ``K``; per iteration it answers message 1 (the batch ids) with message 2, message 3 (``[G]``)
with message 4, and stores message 5; it answers the chunks of the evaluation release (§4.6). It
sees ciphertexts under ``P1``'s key and the public batch ids only.

Besides the stage order and each part's phase, protection, origin role and kind
(:mod:`fedgraphrec.runtime.expect`), it checks what it knows itself: the plan (``K`` must be the one
its own sensitivity rule gives for the announced number of batches, so ``P1`` cannot talk it into
weaker noise), the batch ids (distinct, sorted, in range, at most a batch), that no iteration runs
beyond the plan (its budget), that a gradient or re-sync is for the batch it forwarded in that
step, the shape of every ciphertext matrix, and that the evaluation release covers every user once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.he.base import EncMatrix, HEBackend
from fedgraphrec.privacy.noise_source import SecureNoise
from fedgraphrec.protocols.base import ClientProgram
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
    ST_BACKWARD,
    ST_FORWARD,
    ST_HELLO,
    ST_RELEASE,
    ST_REPORT,
    ST_RESYNC,
    ST_SETUP,
)
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.protocols.p4gcn.social import SocialParty
from fedgraphrec.protocols.p4gcn.wire import he_from_context, he_part, open_he, open_ids
from fedgraphrec.runtime.expect import Expect, Expectation, StageFlow, flow
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["REPORT_REPEATS", "SocialData", "SocialProgram", "social_flow"]

REPORT_REPEATS = 8
"""How often the privacy report may be asked in one step (it releases nothing about the graph)."""


@dataclass(frozen=True)
class SocialData:
    """What ``P2`` knows from outside the protocol.

    Attributes:
        adjacency: the social graph (binary user × user; symmetrised by :class:`~.social.SocialParty`).
        seed: the run seed; with ``reproducible`` draws ``P2`` takes ``W1`` and the noise from a named
            child stream of it.
    """

    adjacency: sp.spmatrix
    seed: int


def social_flow(n_chunks: int) -> StageFlow:
    """``P2``'s stage order: set-up, then iterations (forward → backward → re-sync), then the release."""
    return flow(
        first=(ST_HELLO,),
        after={
            ST_HELLO: (ST_SETUP,),
            ST_SETUP: (ST_FORWARD, ST_RELEASE, ST_REPORT),
            ST_FORWARD: (ST_BACKWARD,),
            ST_BACKWARD: (ST_RESYNC,),
            ST_RESYNC: (ST_FORWARD, ST_RELEASE, ST_REPORT),
            ST_RELEASE: (ST_RELEASE, ST_REPORT),
            ST_REPORT: (ST_FORWARD, ST_RELEASE, ST_REPORT),
        },
        new_step=(ST_FORWARD, ST_RELEASE, ST_REPORT),
        repeats={ST_RELEASE: n_chunks, ST_REPORT: REPORT_REPEATS},
    )


def _from_recommender(phase: str, kind: str, protection: str = "homomorphic") -> Expect:
    shape = "blobs" if protection == "homomorphic" else "broadcast"
    return Expect(phase, protection, kind=kind, shape=shape, from_role=RECOMMENDER)  # type: ignore[arg-type]


class SocialProgram(ClientProgram[None]):
    """``P2`` (module docstring).

    Args:
        settings: the run's :class:`~.settings.P4GCNSettings`.
        clients: ``[1]`` (the social platform's node hosts the one organisation).
        data: the social platform's own data (:class:`SocialData`).
        backend: the HE backend's public side (``P2`` never decrypts: only sandwiches and row edits);
            ``None``: the recommender's public context comes with the set-up (another process).
        serialise: send ciphertexts as the backend's bytes (``real`` mode, other processes).
    """

    def __init__(
        self,
        settings: P4GCNSettings,
        clients: np.ndarray,
        data: SocialData,
        *,
        backend: HEBackend | None = None,
        serialise: bool = False,
    ) -> None:
        self.own, self.serialise = data, serialise
        self._backend = backend
        self.context = b""  # the recommender's public context, when it came with the set-up
        super().__init__(settings, clients, None)

    def init_state(self) -> None:
        """Nothing is calibrated before the plan arrives (set-up); the graph is this party's own."""
        self.n = int(self.own.adjacency.shape[0])
        self.party: SocialParty | None = None
        self.releases = 0  # K, from the plan
        self.planned = 0  # training iterations the plan allows
        self.done = 0  # training iterations forwarded
        self.batch: np.ndarray | None = None  # the batch forwarded in the open iteration
        self.stage_done = ""  # the last iteration stage of the open batch
        self.released = 0  # users of the evaluation release answered
        self.n_chunks = -(-self.n // self.settings.eval_chunk)

    # ------------------------------------------------------------------ what the node accepts
    def stage_flow(self) -> StageFlow:
        """:func:`social_flow`."""
        return social_flow(self.n_chunks)

    def expect(self, stage: str) -> Expectation | None:
        """The parts of ``stage``: the recommender's messages, relayed by the coordinator."""
        table: dict[str, Expectation] = {
            ST_HELLO: {},
            ST_REPORT: {},
            ST_SETUP: {
                "x": _from_recommender(PH_SETUP_X, "embedding"),
                "context": Expect(
                    PH_CONTEXT, kind="he_public_context", shape="blobs", from_role=RECOMMENDER, optional=True
                ),
            },
            ST_FORWARD: {"ids": _from_recommender(PH_IDS, "batch_user_ids", "plain")},
            ST_BACKWARD: {"grad": _from_recommender(PH_GRAD, "social_gradient")},
            ST_RESYNC: {"x": _from_recommender(PH_SYNC, "embedding")},
            ST_RELEASE: {},
        }
        return table.get(stage)

    def _refuse(self, stage: str, why: str) -> IntegrityError:
        return IntegrityError(f"p4gcn social stage {stage!r}: {why}")

    def _ready(self, stage: str) -> SocialParty:
        if self.party is None:  # the flow opens with set-up; kept for a clear error all the same
            raise self._refuse(stage, "no set-up yet")
        return self.party

    @property
    def backend(self) -> HEBackend:
        """The public side of the recommender's HE backend (given, or from the set-up's context)."""
        if self._backend is None:
            raise IntegrityError("p4gcn social: no HE context yet (the set-up brings the recommender's)")
        return self._backend

    def _party(self, k: int) -> SocialParty:
        """The sandwich and noise state, calibrated to ``K = k`` releases (``W1`` drawn here)."""
        s = self.settings
        _, _, p2_ss = np.random.SeedSequence(self.own.seed).spawn(3)
        return SocialParty(
            self.own.adjacency, s.dim, s.clip, k, s.eps, s.delta, self.backend, np.random.default_rng(p2_ss),
            noise=s.noise, sensitivity=s.sensitivity,
            noise_source=SecureNoise() if s.hides("secure_noise") else None,
            weight_source=SecureNoise() if s.hides() else None,
        )  # fmt: skip

    # ------------------------------------------------------------------ stages
    def stage_setup_hello(self, step: int, request: Message) -> Message:
        """Name this organisation (so the coordinator knows which node is which)."""
        return Message(fields={"organisation": SOCIAL})

    def stage_setup_x(self, step: int, request: Message) -> Message:
        """Set-up: check the plan, calibrate the noise to its ``K``, store ``[X]``."""
        s, f = self.settings, request.fields
        try:
            n_users, batches = int(f["n_users"]), int(f["batches"])
            per_epoch, k = int(f["batches_per_epoch"]), int(f["releases"])
        except (KeyError, TypeError, ValueError) as exc:
            raise self._refuse(
                ST_SETUP, "the plan must name n_users, batches, batches_per_epoch, releases"
            ) from exc
        if n_users != self.n:
            raise self._refuse(ST_SETUP, f"the plan is for {n_users} users; this social graph has {self.n}")
        if per_epoch < 1 or batches != per_epoch * s.epochs:
            raise self._refuse(
                ST_SETUP, f"{batches} batches is not {per_epoch} per epoch × {s.epochs} epochs"
            )
        most = 2 * batches + 1
        if (s.sensitivity == "global" and k != most) or not 1 <= k <= most:
            allowed = f"exactly {most}" if s.sensitivity == "global" else f"1 to {most}"
            raise self._refuse(ST_SETUP, f"K = {k} releases; the {s.sensitivity} rule allows {allowed}")
        if "context" in request:
            self.context = bytes(request["context"].value[0])
            if self._backend is None:
                try:
                    self._backend = he_from_context(s.backend, self.context)
                except (ValueError, RuntimeError) as exc:
                    raise self._refuse(ST_SETUP, f"the recommender's {s.backend} context: {exc}") from exc
        self.party = self._party(k)
        where = f"p4gcn social stage {ST_SETUP!r}: part 'x'"
        self.party.receive_x(open_he(self.backend, request["x"], self.n, s.dim, where))
        self.planned, self.releases = batches, k
        return Message()

    def stage_iter_forward(self, step: int, request: Message) -> Message:
        """Message 1 in (a batch of the plan), message 2 ``[(B L̃)[X] W1 + E_fwd]`` out."""
        party = self._ready(ST_FORWARD)
        if self.done >= self.planned:
            raise self._refuse(ST_FORWARD, f"all {self.planned} planned iterations ran (the noise budget)")
        where = f"p4gcn social stage {ST_FORWARD!r}: part 'ids'"
        self.batch = open_ids(request["ids"], self.n, self.settings.batch, where)
        self.done += 1
        enc = party.forward(self.batch)
        return Message({"rows": self._send(enc, PH_FWD, "social_rows")})

    def stage_iter_backward(self, step: int, request: Message) -> Message:
        """Message 3 in (for the batch forwarded in this step), message 4 out."""
        party = self._ready(ST_BACKWARD)
        if self.batch is None:
            raise self._refuse(ST_BACKWARD, "a gradient for a batch this party did not forward")
        where = f"p4gcn social stage {ST_BACKWARD!r}: part 'grad'"
        enc_g = open_he(self.backend, request["grad"], len(self.batch), self.settings.dim, where)
        return Message({"delta": self._send(party.backward(self.batch, enc_g), PH_BWD, "social_update")})

    def stage_iter_resync(self, step: int, request: Message) -> Message:
        """Message 5 in: the re-clipped ``[X_B]`` of the batch forwarded in this step replaces its rows."""
        party = self._ready(ST_RESYNC)
        if self.batch is None:
            raise self._refuse(ST_RESYNC, "a re-sync for a batch this party did not forward")
        where = f"p4gcn social stage {ST_RESYNC!r}: part 'x'"
        party.resync(
            self.batch, open_he(self.backend, request["x"], len(self.batch), self.settings.dim, where)
        )
        self.batch = None
        return Message()

    def stage_eval_release(self, step: int, request: Message) -> Message:
        """One chunk of the evaluation release: the next users in id order, each once (§4.6)."""
        party = self._ready(ST_RELEASE)
        if self.released >= self.n:
            raise self._refuse(
                ST_RELEASE, "every user's row was released already (one release, counted in K)"
            )
        users = np.arange(self.released, min(self.n, self.released + self.settings.eval_chunk))
        self.released = int(users[-1]) + 1
        return Message({"rows": self._send(party.forward(users, evaluation=True), PH_EVAL, "social_rows")})

    def stage_report(self, step: int, request: Message) -> Message:
        """The privacy accounting of the releases so far (what the run folder reports)."""
        party, s = self._ready(ST_REPORT), self.settings
        spent = party.accountant.epsilon(s.delta) if s.noise else None
        return Message(fields={
            "epsilon_spent": spent, "releases": self.releases, "mean_sigma": float(np.mean(party.sigma)),
            "noise_source": party.source.name if s.noise else None,
        })  # fmt: skip

    # ------------------------------------------------------------------ state (between messages)
    def state_arrays(self) -> dict[str, np.ndarray]:
        """Everything that changes during the run, as arrays (a Flower node's ``context.state``).

        ``[X]`` as the backend's serialised bytes; ``W1`` (drawn from the CSPRNG unless
        reproducible) and the noise stream's position, so the next message continues the same run.
        """
        counters = np.array(
            [self.releases, self.planned, self.done, self.released, int(self.batch is not None)]
        )
        out = {
            "counters": counters.astype(np.int64),
            "batch": np.zeros(0, np.int64) if self.batch is None else self.batch,
        }
        if self.context:  # the recommender's public HE context (another process's backend)
            out["he_public"] = np.frombuffer(self.context, dtype=np.uint8).copy()
        if self.party is None:
            return out
        p = self.party
        assert p.enc_x is not None
        blobs = self.backend.to_bytes(p.enc_x)
        rng = json.dumps(p.rng.bit_generator.state).encode()
        return {
            **out, "w1": p.w1.copy(), "rho": p.accountant.rho.copy(),
            "x_scale_bits": np.array([p.enc_x.scale_bits]),
            "x_blobs": np.frombuffer(b"".join(blobs), dtype=np.uint8).copy(),
            "x_lengths": np.array([len(b) for b in blobs], dtype=np.int64),
            "rng": np.frombuffer(rng, dtype=np.uint8).copy(),
        }  # fmt: skip

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state_arrays` into a program built from the same data, settings and seed."""
        self.releases, self.planned, self.done, self.released, open_ = (int(x) for x in arrays["counters"])
        self.batch = np.array(arrays["batch"], dtype=np.int64) if open_ else None
        if "he_public" in arrays:
            self.context = bytes(np.asarray(arrays["he_public"], np.uint8))
            if self._backend is None:
                self._backend = he_from_context(self.settings.backend, self.context)
        if "w1" not in arrays:
            return
        p = self.party = self._party(self.releases)
        p.w1 = np.array(arrays["w1"], dtype=np.float64)
        p.accountant.rho[:] = arrays["rho"]
        p.rng.bit_generator.state = json.loads(bytes(np.asarray(arrays["rng"], np.uint8)).decode())
        raw, at, blobs = bytes(np.asarray(arrays["x_blobs"], np.uint8)), 0, []
        for n in arrays["x_lengths"].tolist():
            blobs.append(raw[at : at + n])
            at += n
        p.receive_x(
            self.backend.from_bytes(blobs, (self.n, self.settings.dim), int(arrays["x_scale_bits"][0]))
        )

    def _send(self, enc: EncMatrix, phase: str, kind: str) -> Part:
        return he_part(self.backend, enc, phase, kind, SOCIAL, RECOMMENDER, serialise=self.serialise)
