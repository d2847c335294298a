"""The Laplace mechanism on clipped coordinates: ε ↔ λ in one place (FedPerGNN's uploads, DGREC's baselines).

A coordinate clipped to ``[-δ, δ]`` has sensitivity ``2δ``; Laplace noise of scale ``λ`` makes each
upload of it ``ε = 2δ/λ``-LDP. The draws themselves come from a
:class:`~fedgraphrec.privacy.noise_source.NoiseSource`.
"""

from __future__ import annotations

import math

__all__ = ["laplace_ldp_epsilon", "laplace_scale_for"]


def laplace_ldp_epsilon(clip: float, scale: float) -> float:
    r"""The upload's :math:`\varepsilon = 2\delta/\lambda` per coordinate and upload; ``inf`` without noise.

    A coordinate clipped to :math:`[-\delta,\delta]` has sensitivity :math:`2\delta`.
    """
    return math.inf if scale == 0 else 2.0 * clip / scale


def laplace_scale_for(epsilon: float, clip: float) -> float:
    r"""The Laplace scale :math:`\lambda = 2\delta/\varepsilon` that gives ``epsilon`` (0 for ``inf``).

    Raises:
        ValueError: ``epsilon`` or ``clip`` is not positive.
    """
    if not epsilon > 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}")
    if not clip > 0:
        raise ValueError(f"clip must be positive, got {clip}")
    return 0.0 if math.isinf(epsilon) else 2.0 * clip / epsilon
