"""Evaluation: full-ranking top-K metrics and rating-prediction errors.

* :func:`evaluate_embeddings` / :func:`evaluate_scores` — Precision, Recall, NDCG and HitRate at
  several K with LightGCN's full-ranking protocol (train/valid items masked), as a
  :class:`RankingResult`.
* :func:`rmse` / :func:`mae` — explicit-rating error metrics.
"""
