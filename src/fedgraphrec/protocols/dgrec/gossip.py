"""Algorithm 2: flooding encoded gradients through a sampled group for ``2H`` rounds.

Every member starts with its own message (a random per-iteration id, not its user id, with its one-bit
encoding) and in each synchronous round sends the set it holds to each sampled neighbour. All
traffic goes through :meth:`fedgraphrec.runtime.network.Network.transmit`, one batch per round, so
the ledger counts every link's bytes (a message costs ``ceil(n_s / 8)`` payload bytes plus an 8-byte
id) and, with transcripts on, each receiving user's transcript holds exactly the ``±1`` vectors it
got. Only messages the receiver does not already hold are sent (the union of Alg. 2 line 5 with
de-duplication by id); ``forward_all=True`` instead resends whole sets, the literal worst case.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from fedgraphrec.runtime.network import Network

__all__ = ["flood", "message_bytes"]

ID_BYTES = 8


def message_bytes(n_s: int) -> int:
    """Bytes of one encoded message: one bit per coordinate plus its id."""
    return (n_s + 7) // 8 + ID_BYTES


def flood(
    links: Mapping[int, set[int]],
    messages: Mapping[int, tuple[int, torch.Tensor]],
    hops: int,
    network: Network | None = None,
    *,
    phase: str = "dgrec/flood",
    forward_all: bool = False,
) -> dict[int, dict[int, torch.Tensor]]:
    """Run ``2·hops`` flooding rounds and return what every member holds, keyed by message id.

    Args:
        links: sampled neighbour sets ``N^s_v`` of the group (symmetric).
        messages: member → (message id, encoded ``±1`` vector); every member of ``links`` must have one.
        hops: H; the group's diameter is at most 2H, so 2H rounds deliver everything.
        network: transport that records the ledger and transcripts (``None``: no accounting).
        phase: ledger phase name.
        forward_all: resend the whole held set each round (literal Alg. 2) instead of only new messages.
    """
    members = sorted(links)
    missing = [v for v in members if v not in messages]
    if missing:
        raise ValueError(f"messages: no encoded vector for group members {missing[:5]}")
    held: dict[int, dict[int, torch.Tensor]] = {v: {messages[v][0]: messages[v][1]} for v in members}
    for r in range(2 * hops):
        snapshot = {v: dict(h) for v, h in held.items()}
        payloads: list[torch.Tensor] = []
        sizes: list[int] = []
        senders: list[int] = []
        receivers: list[int] = []
        for v in members:
            for w in sorted(links[v]):
                send = (
                    snapshot[v] if forward_all else {k: x for k, x in snapshot[v].items() if k not in held[w]}
                )
                for mid, vec in send.items():
                    payloads.append(vec)
                    sizes.append(message_bytes(vec.numel()))
                    senders.append(v)
                    receivers.append(w)
                    held[w].setdefault(mid, vec)
        if network is not None and sizes:
            network.transmit(
                f"{phase}/round={r}",
                "user",
                "user",
                np.asarray(sizes, dtype=np.int64),
                kind="one_bit_gradient",
                protected=False,
                payloads=payloads,
                senders=np.asarray(senders),
                receivers=np.asarray(receivers),
            )
    return held
