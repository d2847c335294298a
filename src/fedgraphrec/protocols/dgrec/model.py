"""DGREC's local model, one copy per user, vectorised across users.

Storage: every parameter is one tensor with a leading user axis (``E: [n_users, n_items, d]``,
``W1: [n_users, d, d_i]``, …), not a Python object per user. A group's parameters are gathered with
``param[U]``, the per-user losses are summed (users share no parameters, so the gradient of the sum
w.r.t. the gathered copy is each user's own gradient), and updates are scattered back with
``param[U] -= …``. At Flixster scale (3,000 users × 3,000 items) with ``d = 16`` in float32 the item
tables take 3000·3000·16·4 B = 0.58 GB (2.3 GB at ``d = 64``); everything else is a few MB, so the
whole population fits well under 8 GB. All users start from the same initial model (one shared
seed), so the shared gradients refer to comparable parameters (spec §4.1).

Forward (spec §4): ``X = Ĥ_u E_u``; ``E' = X W1``; ``S = softmax(X W2)``; interests
``Ē = Sᵀ E'`` and interest graph ``Ā = Sᵀ Ĥ_u S``; Pearson loss = mean of the signed correlation
matrix of ``Ē``; interest attention ``P = Ē W3 + rowsum(Ã)⊙(Ē W4) − Ã(Ē W5)`` with ``Ã`` = ``Ā``
without its diagonal; ``e_u = softmax(P)ᵀ Ē``; score ``MLP(e_u ‖ e_i)``. Variants: ``item_graph=False``
gives ``e_u`` = mean of the node embeddings (no graph, no condensation, no Pearson);
``attention=False`` replaces interest attention by attention pooling with a learnable query;
``kind="mf"`` is the DMF baseline (private user vector, dot-product score); ``kind="lgn"`` is the
DLGNN baseline, a one-layer LightGCN-style local model on the user's ego graph (private user vector
averaged with the mean of the ``Ĥ_u``-propagated node embeddings; dot-product score).

Loss scale (spec §4.6, [A] negative sampling). The paper's Eq. 2 is
``(1/|I_u|) Σ_{i∈I_u, j∈I_u^-} −ln σ(ŷ_ui − ŷ_uj)``: a *sum* over every unobserved item ``j``, about
``|I_u^-|`` (≈ the number of items) times larger than a per-pair mean. With ``loss_scale="eq2"`` (the
default) a minibatch of ``B`` positives, each with one negative drawn uniformly from ``I_u^-``, is
averaged and multiplied by ``|I_u^-|``: an unbiased estimate of Eq. 2 itself. ``loss_scale="mean"``
keeps the plain per-pair mean (the spec's earlier [A] reading). The scale matters because DGREC clips
every gradient coordinate to ``[-δ, δ]`` with the paper's δ = 0.1 before the one-bit encoding: under
the mean, per-user coordinates are 1e-3–3e-3 and the decoded group mean is almost pure encoding
noise; under Eq. 2 they are of the order of δ, so δ and β keep the meaning the paper gives them. The
Pearson and L2 terms of Eq. 3 are not rescaled (they are not part of Eq. 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["LOSS_SCALES", "ModelConfig", "UserModels"]

LOSS_SCALES = ("eq2", "mean")
PRIVATE = ("user",)  # parameters that never leave the device (DMF's user vector)


@dataclass(frozen=True)
class ModelConfig:
    """Local-model shape and switches.

    Attributes:
        kind: ``"dgrec"``, ``"mf"`` (DMF baseline) or ``"lgn"`` (DLGNN baseline).
        d: item embedding size.
        n_interests: n_i.
        d_interest: d_i.
        hidden: MLP hidden sizes.
        item_graph: ``False`` = w/non-item-graph.
        attention: ``False`` = w/non-attention.
        pearson: ``False`` = w/non-pearson.
        l2: λ on the parameters touched in a step (squared norm).
        loss_scale: ``"eq2"`` (sampled estimate of the paper's Eq.-2 sum over negatives) or
            ``"mean"`` (per-pair mean); see the module docstring.
    """

    kind: str = "dgrec"
    d: int = 16
    n_interests: int = 6
    d_interest: int = 10
    hidden: tuple[int, int] = (32, 16)
    item_graph: bool = True
    attention: bool = True
    pearson: bool = True
    l2: float = 1e-3
    loss_scale: str = "eq2"

    def __post_init__(self) -> None:
        if self.loss_scale not in LOSS_SCALES:
            raise ValueError(f"loss_scale must be one of {LOSS_SCALES}, got {self.loss_scale!r}")
        if self.kind not in ("dgrec", "mf", "lgn"):
            raise ValueError(f"kind must be 'dgrec', 'mf' or 'lgn', got {self.kind!r}")
        for name in ("d", "n_interests", "d_interest"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @property
    def user_dim(self) -> int:
        """Size of ``e_u`` fed to the scorer."""
        return self.d_interest if self.item_graph else self.d


def _xavier(shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    bound = math.sqrt(6.0 / (shape[-2] + shape[-1]))
    return (torch.rand(shape, generator=g) * 2 - 1) * bound


class UserModels:
    """Every user's local model as batched tensors (see module docstring)."""

    def __init__(
        self, n_users: int, n_items: int, cfg: ModelConfig, generator: torch.Generator, n_extra: int = 0
    ) -> None:
        """``n_extra`` adds embedding rows after the items (tag nodes, w/non-item-hypergraph ablation)."""
        self.cfg = cfg
        self.n_users, self.n_items = n_users, n_items
        d, di, ni = cfg.d, cfg.d_interest, cfg.n_interests
        h1, h2 = cfg.hidden
        init: dict[str, torch.Tensor] = {"E": torch.randn(n_items + n_extra, d, generator=generator) * 0.1}
        if cfg.kind in ("mf", "lgn"):
            init["user"] = torch.randn(d, generator=generator) * 0.1
        else:
            init.update(
                W1=_xavier((d, di), generator),
                W2=_xavier((d, ni), generator),
                W3=_xavier((di, 1), generator)[:, 0],
                W4=_xavier((di, 1), generator)[:, 0],
                W5=_xavier((di, 1), generator)[:, 0],
                L1=_xavier((cfg.user_dim + d, h1), generator),
                b1=torch.zeros(h1),
                L2=_xavier((h1, h2), generator),
                b2=torch.zeros(h2),
                L3=_xavier((h2, 1), generator)[:, 0],
            )
        # identical start for everyone, then independent copies
        self.params = {k: v.unsqueeze(0).expand(n_users, *v.shape).clone() for k, v in init.items()}
        if cfg.kind in ("mf", "lgn"):
            self.params["user"] = torch.randn(n_users, d, generator=generator) * 0.1

    @property
    def shared_names(self) -> list[str]:
        """Parameters whose gradients are shared (everything but private user vectors)."""
        return [k for k in self.params if k not in PRIVATE]

    def n_shared(self) -> int:
        """n_s: coordinates of one shared gradient vector."""
        return sum(self.params[k][0].numel() for k in self.shared_names)

    def memory_bytes(self) -> int:
        """Bytes held by all users' parameters."""
        return sum(p.numel() * p.element_size() for p in self.params.values())

    # ------------------------------------------------------------------ forward
    def user_vectors(
        self, p: dict[str, torch.Tensor], items: torch.Tensor, mask: torch.Tensor, prop: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``e_u`` for a batch and its Pearson loss (``p`` holds the batch's parameters)."""
        b = torch.arange(items.shape[0]).unsqueeze(1)
        emb = p["E"][b, items] * mask.unsqueeze(-1)  # [B, V, d]
        if self.cfg.kind == "mf":
            return p["user"], emb.new_zeros(items.shape[0])
        if self.cfg.kind == "lgn":
            agg = (prop @ emb).sum(1) / mask.sum(1, keepdim=True).clamp_min(1.0)
            return 0.5 * (p["user"] + agg), emb.new_zeros(items.shape[0])
        if not self.cfg.item_graph:
            e_u = emb.sum(1) / mask.sum(1, keepdim=True).clamp_min(1.0)
            return e_u, emb.new_zeros(items.shape[0])
        x = prop @ emb
        ep = x @ p["W1"]
        s = torch.softmax(x @ p["W2"], dim=-1) * mask.unsqueeze(-1)
        ec = s.transpose(1, 2) @ ep  # [B, ni, di]
        ac = s.transpose(1, 2) @ prop @ s  # [B, ni, ni]
        pear = self._pearson(ec) if self.cfg.pearson else ec.new_zeros(ec.shape[0])
        if self.cfg.attention:
            at = ac - torch.diag_embed(torch.diagonal(ac, dim1=1, dim2=2))
            score = (
                ec @ p["W3"].unsqueeze(-1)
                + at.sum(2, keepdim=True) * (ec @ p["W4"].unsqueeze(-1))
                - at @ (ec @ p["W5"].unsqueeze(-1))
            ).squeeze(-1)
        else:
            score = (ec @ p["W3"].unsqueeze(-1)).squeeze(-1) / math.sqrt(self.cfg.d_interest)
        e_u = (torch.softmax(score, dim=-1).unsqueeze(1) @ ec).squeeze(1)
        return e_u, pear

    @staticmethod
    def _pearson(ec: torch.Tensor) -> torch.Tensor:
        xc = ec - ec.mean(-1, keepdim=True)
        cov = xc @ xc.transpose(1, 2) / ec.shape[-1]
        var = torch.diagonal(cov, dim1=1, dim2=2)
        corr = cov / torch.sqrt(var.unsqueeze(2) * var.unsqueeze(1) + 1e-8)
        return corr.mean((1, 2))

    def score(self, p: dict[str, torch.Tensor], e_u: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
        """Scores ``[B, k]`` of candidate items ``cand: [B, k]`` under each user's own model."""
        b = torch.arange(cand.shape[0]).unsqueeze(1)
        ei = p["E"][b, cand]
        if self.cfg.kind in ("mf", "lgn"):
            return (ei * e_u.unsqueeze(1)).sum(-1)
        z = torch.cat([e_u.unsqueeze(1).expand(-1, cand.shape[1], -1), ei], dim=-1)
        h = F.relu(z @ p["L1"] + p["b1"].unsqueeze(1))
        h = F.relu(h @ p["L2"] + p["b2"].unsqueeze(1))
        return (h * p["L3"].unsqueeze(1)).sum(-1)

    def losses(
        self,
        p: dict[str, torch.Tensor],
        items: torch.Tensor,
        mask: torch.Tensor,
        prop: torch.Tensor,
        pos: torch.Tensor,
        neg: torch.Tensor,
        has_pos: torch.Tensor,
        n_neg: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Per-user local loss (Eq. 3): BPR + Pearson + λ·‖touched params‖².

        ``n_neg``: each user's ``|I_u^-|``, the factor of the Eq.-2 scale (required when
        ``loss_scale == "eq2"``; ignored under ``"mean"``).
        """
        e_u, pear = self.user_vectors(p, items, mask, prop)
        sp_, sn = self.score(p, e_u, pos), self.score(p, e_u, neg)
        bpr = -F.logsigmoid(sp_ - sn).mean(1) * has_pos
        if self.cfg.loss_scale == "eq2":
            if n_neg is None:
                raise ValueError("loss_scale='eq2' needs n_neg, each user's number of unobserved items")
            bpr = bpr * n_neg.to(bpr.dtype)
        b = torch.arange(pos.shape[0]).unsqueeze(1)
        reg = p["E"][b, pos].pow(2).sum((1, 2)) + p["E"][b, neg].pow(2).sum((1, 2))
        reg = reg / pos.shape[1] + sum(
            (v.pow(2).flatten(1).sum(1) for k, v in p.items() if k != "E"), torch.zeros(pos.shape[0])
        )
        return bpr + pear + self.cfg.l2 * reg
