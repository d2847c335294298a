"""fedgraphrec: privacy-preserving graph recommendation.

Federated (horizontal), vertical and decentralized training of LightGCN-style recommenders,
with centralized oracle models that every lossless protocol is tested against.

The public API is small and stable::

    import fedgraphrec as fgr

    run = fgr.train("lpgcn", "synthetic", epochs=2)   # -> fgr.Run
    run = fgr.load_run("runs/my-run")                 # the selected epoch's model
    run.recommend(["u1", "u2"], k=20)                 # -> fgr.Recommendations, original ids
    users, items = run.embeddings()                   # -> fgr.EmbeddingTable each
    run.evaluate("test")                              # -> {metric: value}

Everything else stays importable from its module but is not part of this promise. The names are
loaded on first use (PEP 562), so ``import fedgraphrec`` and the command line stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedgraphrec.training.recommendations import EmbeddingTable, Recommendations
    from fedgraphrec.training.run import Run, load_run, train

__version__ = "0.1.0"

__all__ = ["EmbeddingTable", "Recommendations", "Run", "__version__", "load_run", "train"]

_PUBLIC = {
    "EmbeddingTable": "fedgraphrec.training.recommendations",
    "Recommendations": "fedgraphrec.training.recommendations",
    "Run": "fedgraphrec.training.run",
    "load_run": "fedgraphrec.training.run",
    "train": "fedgraphrec.training.run",
}


def __getattr__(name: str) -> Any:
    """Load a public name from its defining module on first use."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'fedgraphrec' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (the lazy ones included)."""
    return sorted(__all__)
