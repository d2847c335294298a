"""fedgraphrec: privacy-preserving graph recommendation.

Federated (horizontal), vertical and decentralized training of LightGCN-style recommenders,
with centralized oracle models that every lossless protocol is tested against.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
