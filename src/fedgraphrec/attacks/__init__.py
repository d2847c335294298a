"""Privacy audits that read what a party actually received (runtime transcripts).

* :func:`query_intersection` — FedGRec's server intersects each user's queried item sets across
  rounds: positives are in every query, negatives are resampled, so the intersection converges to
  the user's private interactions (spec ``fedgrec.md`` §1.4, implementer note).
"""

from fedgraphrec.attacks.query_intersection import IntersectionResult, query_intersection

__all__ = ["IntersectionResult", "query_intersection"]
