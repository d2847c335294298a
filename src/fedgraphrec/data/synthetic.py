"""Synthetic datasets with realistic shape and a learnable signal.

The generator plants *topics*: every user and every item has one of ``n_topics`` topics, and a user
picks items of its own topic ``e^affinity`` times more readily than others. On top of that, item
popularity follows a power law (Zipf-like: the item of popularity rank ``r`` has weight
``(r + 1) ** -exponent``) and user activity is Pareto-distributed, so the degree distributions
look like those of real check-in and rating data. A model that learns the topic structure beats
a popularity baseline, which makes these datasets useful for tests and demos.

Everything is deterministic by ``seed``: each random choice draws from its own named child stream.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fedgraphrec.data._arrays import sorted_unique
from fedgraphrec.data.splits import DEFAULT_FRACTIONS, split_ratings
from fedgraphrec.data.types import Interactions, ItemTags, Ratings, SocialGraph, binary_csr
from fedgraphrec.seeding import numpy_rng

_BLOCK_CELLS = 4_000_000
# Share of ratings at or below each of 1, 2, 3, 4 stars (close to MovieLens-100K's distribution).
_RATING_QUANTILES = np.array([0.06, 0.17, 0.44, 0.78])


def _mean_degree(n_items: int, mean_degree: float | None, density: float | None) -> float:
    if mean_degree is not None and density is not None:
        raise ValueError("give either mean_degree or density, not both")
    if density is not None:
        if not 0 < density <= 1:
            raise ValueError(f"density must be in (0, 1], got {density}")
        return density * n_items
    return 20.0 if mean_degree is None else float(mean_degree)


def _test_only_counts(
    train_users: np.ndarray, train_items: np.ndarray, held_users: np.ndarray, held_items: np.ndarray
) -> dict[str, object]:
    """Held-out users/items without a training row; generated data keeps their rows (reported only).

    The generator declares its whole id space (``0..n-1``), so ids are never compacted here.
    """
    return {
        "test_only_users": len(np.setdiff1d(held_users, train_users)),
        "test_only_items": len(np.setdiff1d(held_items, train_items)),
        "test_only_rows_dropped": 0,
        "test_only": "keep",
    }


def _round_half_up(x: np.ndarray) -> np.ndarray:
    return np.floor(x + 0.5).astype(np.int64)


def _degrees(
    seed: int, n_users: int, n_items: int, mean: float, activity_exponent: float, minimum: int
) -> np.ndarray:
    """Pareto-distributed user degrees with about the requested mean, clipped to ``[minimum, cap]``.

    The cap (20 × the mean, at most ``n_items``) bounds the memory of the sampler; it trims only
    the far tail of the distribution.
    """
    if activity_exponent <= 1:
        raise ValueError("activity_exponent must be > 1 (otherwise the mean degree is infinite)")
    rng = numpy_rng(seed, "data.synthetic.degrees")
    scale = mean * (activity_exponent - 1) / activity_exponent
    raw = scale * (1.0 - rng.random(n_users)) ** (-1.0 / activity_exponent)
    cap = min(n_items, max(minimum, int(20 * mean)))
    return np.clip(_round_half_up(raw), minimum, cap)


def _topics(seed: int, n_users: int, n_items: int, n_topics: int) -> tuple[np.ndarray, np.ndarray]:
    rng = numpy_rng(seed, "data.synthetic.topics")
    return rng.integers(0, n_topics, n_users), rng.integers(0, n_topics, n_items)


def _item_log_popularity(seed: int, n_items: int, exponent: float) -> np.ndarray:
    """Log of power-law popularity weights, assigned to items in a random order."""
    rng = numpy_rng(seed, "data.synthetic.popularity")
    ranks = rng.permutation(n_items)
    return -exponent * np.log(ranks + 1.0)


def _sample_items(
    seed: int,
    degrees: np.ndarray,
    user_topic: np.ndarray,
    item_topic: np.ndarray,
    log_pop: np.ndarray,
    affinity: float,
) -> tuple[np.ndarray, np.ndarray]:
    """For every user, ``degrees[u]`` distinct items drawn by popularity × topic affinity.

    Uses the Gumbel-top-k trick (sampling without replacement in proportion to the weights),
    vectorised over blocks of users.

    Returns:
        ``(items, slot)``: an ``(n_users, max_degree)`` array of items in draw order, and its valid
        mask (``slot[u, j]`` is true for ``j < degrees[u]``).
    """
    rng = numpy_rng(seed, "data.synthetic.items")
    n_users, n_items = len(degrees), len(log_pop)
    k_max = int(degrees.max())
    chosen = np.zeros((n_users, k_max), dtype=np.int64)
    block = max(1, _BLOCK_CELLS // n_items)
    for start in range(0, n_users, block):
        stop = min(start + block, n_users)
        same = user_topic[start:stop, None] == item_topic[None, :]
        keys = log_pop[None, :] + affinity * same + rng.gumbel(size=(stop - start, n_items))
        if k_max < n_items:
            top = np.argpartition(-keys, k_max - 1, axis=1)[:, :k_max]
        else:
            top = np.broadcast_to(np.arange(n_items), keys.shape).copy()
        order = np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1)
        chosen[start:stop] = np.take_along_axis(top, order, axis=1)
    slot = np.arange(k_max)[None, :] < degrees[:, None]
    return chosen, slot


def synthetic_interactions(
    n_users: int = 300,
    n_items: int = 500,
    *,
    mean_degree: float | None = None,
    density: float | None = None,
    seed: int = 0,
    exponent: float = 0.8,
    activity_exponent: float = 2.5,
    test_fraction: float = 0.2,
    valid_fraction: float = 0.0,
    n_topics: int = 8,
    affinity: float = 2.0,
    name: str = "synthetic",
) -> Interactions:
    """Generate implicit feedback with power-law popularity and a planted topic structure.

    Every user gets ``round_half_up(d * test_fraction)`` test items (at least one when the fraction
    is positive), likewise validation items, and at least two training items; ``d`` is raised when
    needed to make that possible.

    Args:
        n_users: number of users.
        n_items: number of items.
        mean_degree: mean number of interactions per user (default 20).
        density: alternatively, the fraction of the user×item matrix that is filled.
        seed: seed; the same arguments give identical data.
        exponent: power-law exponent of item popularity.
        activity_exponent: Pareto shape of user activity (> 1; smaller is more skewed).
        test_fraction: per-user share of interactions held out for test.
        valid_fraction: per-user share for validation (``valid`` is ``None`` when 0).
        n_topics: number of planted topics.
        affinity: log-odds boost for items of the user's own topic.
        name: dataset name.

    Returns:
        An :class:`Interactions` with train/test (and valid) matrices.
    """
    if n_users < 1 or n_items < 1:
        raise ValueError("n_users and n_items must be positive")
    if test_fraction < 0 or valid_fraction < 0 or test_fraction + valid_fraction >= 1:
        raise ValueError("test_fraction and valid_fraction must be non-negative and sum to less than 1")
    needed = 2 + (test_fraction > 0) + (valid_fraction > 0)
    if n_items < needed + 1:
        raise ValueError(f"n_items must be at least {needed + 1}")
    mean = _mean_degree(n_items, mean_degree, density)
    deg = _degrees(seed, n_users, n_items, mean, activity_exponent, needed)
    n_test = _round_half_up(deg * test_fraction)
    n_valid = _round_half_up(deg * valid_fraction)
    if test_fraction > 0:
        n_test = np.maximum(n_test, 1)
    if valid_fraction > 0:
        n_valid = np.maximum(n_valid, 1)
    deg = np.minimum(np.maximum(deg, n_test + n_valid + 2), n_items)
    n_valid = np.minimum(n_valid, deg - 2 - int(test_fraction > 0))
    n_test = np.minimum(n_test, deg - n_valid - 2)

    user_topic, item_topic = _topics(seed, n_users, n_items, n_topics)
    log_pop = _item_log_popularity(seed, n_items, exponent)
    chosen, slot = _sample_items(seed, deg, user_topic, item_topic, log_pop, affinity)

    # Roles are assigned in a random order, independent of the draw order (which favours popular items).
    rng = numpy_rng(seed, "data.synthetic.roles")
    keys = np.where(slot, rng.random(slot.shape), np.inf)
    rank = np.argsort(np.argsort(keys, axis=1), axis=1)
    is_test = rank < n_test[:, None]
    is_valid = (rank >= n_test[:, None]) & (rank < (n_test + n_valid)[:, None])
    is_train = slot & ~is_test & ~is_valid
    users = np.broadcast_to(np.arange(n_users)[:, None], slot.shape)

    def mat(mask: np.ndarray) -> sp.csr_matrix:
        return binary_csr(users[mask], chosen[mask], n_users, n_items)

    held = is_test | is_valid if valid_fraction > 0 else is_test
    return Interactions(
        name=name,
        n_users=n_users,
        n_items=n_items,
        train=mat(is_train),
        test=mat(is_test & slot),
        valid=mat(is_valid & slot) if valid_fraction > 0 else None,
        user_ids=np.arange(n_users, dtype=np.int64),
        item_ids=np.arange(n_items, dtype=np.int64),
        info={
            **_test_only_counts(users[is_train], chosen[is_train], users[held & slot], chosen[held & slot]),
            "format": "synthetic",
            "seed": seed,
            "mean_degree": mean,
            "exponent": exponent,
            "activity_exponent": activity_exponent,
            "n_topics": n_topics,
            "affinity": affinity,
            "user_topic": user_topic,
            "item_topic": item_topic,
        },
    )


def _social(seed: int, user_topic: np.ndarray, mean_links: float, homophily: float) -> tuple[np.ndarray, ...]:
    """Directed trust links; a share ``homophily`` of them stays within the truster's topic."""
    rng = numpy_rng(seed, "data.synthetic.social")
    n_users = len(user_topic)
    out_deg = rng.poisson(mean_links, n_users)
    src = np.repeat(np.arange(n_users), out_deg)
    members = np.argsort(user_topic, kind="stable")
    group_size = np.bincount(user_topic, minlength=int(user_topic.max()) + 1)
    group_start = np.concatenate([[0], np.cumsum(group_size)[:-1]])
    t = user_topic[src]
    within = members[group_start[t] + (rng.random(len(src)) * group_size[t]).astype(np.int64)]
    anyone = rng.integers(0, n_users, len(src))
    dst = np.where(rng.random(len(src)) < homophily, within, anyone)
    keep = src != dst
    key = sorted_unique(src[keep] * n_users + dst[keep])
    return key // n_users, key % n_users


def synthetic_ratings(
    n_users: int = 300,
    n_items: int = 500,
    *,
    mean_degree: float | None = None,
    density: float | None = None,
    seed: int = 0,
    exponent: float = 0.8,
    activity_exponent: float = 2.5,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    social: bool = True,
    tags: bool = True,
    n_topics: int = 8,
    n_factors: int = 8,
    noise: float = 0.5,
    mean_links: float = 8.0,
    homophily: float = 0.8,
    name: str = "synthetic-ratings",
) -> Ratings:
    """Generate explicit 1..5 ratings from a latent factor model, with a social graph and item tags.

    Which items a user rates is drawn as in :func:`synthetic_interactions`. The rating comes from
    ``score = <p_u, q_i> + b_u + b_i + noise``, where the factors ``p_u``/``q_i`` are the user's/item's
    topic vector plus individual noise, so ratings are high when topics match; scores are cut into
    1..5 stars at fixed quantiles (about 6/11/27/34/22 %, like MovieLens-100K).
    Trust links prefer users of the same topic (``homophily``), and every item is tagged with its
    topic (10 % of the items get one more random tag), so side information carries signal too.

    Args:
        n_users: number of users.
        n_items: number of items.
        mean_degree: mean number of ratings per user (default 20).
        density: alternatively, the fraction of the matrix that is rated.
        seed: seed; the same arguments give identical data.
        exponent: power-law exponent of item popularity.
        activity_exponent: Pareto shape of user activity.
        fractions: per-user (train, valid, test) shares.
        social: generate a directed trust graph.
        tags: generate item tags (one per topic).
        n_topics: number of planted topics (= number of tags).
        n_factors: latent dimension of the rating model.
        noise: standard deviation of the rating noise (in score units).
        mean_links: mean out-degree of the trust graph.
        homophily: share of trust links within the truster's topic.
        name: dataset name.

    Returns:
        A :class:`Ratings` with ``rating_range == (1.0, 5.0)``.
    """
    if n_users < 2 or n_items < 4:
        raise ValueError("need at least 2 users and 4 items")
    mean = _mean_degree(n_items, mean_degree, density)
    deg = _degrees(seed, n_users, n_items, mean, activity_exponent, 3)
    user_topic, item_topic = _topics(seed, n_users, n_items, n_topics)
    log_pop = _item_log_popularity(seed, n_items, exponent)
    chosen, slot = _sample_items(seed, deg, user_topic, item_topic, log_pop, 2.0)
    users = np.broadcast_to(np.arange(n_users)[:, None], slot.shape)[slot]
    items = chosen[slot]

    rng = numpy_rng(seed, "data.synthetic.ratings")
    centers = rng.normal(0.0, 1.0, (n_topics, n_factors))
    p = centers[user_topic] + rng.normal(0.0, 0.5, (n_users, n_factors))
    q = centers[item_topic] + rng.normal(0.0, 0.5, (n_items, n_factors))
    b_u = rng.normal(0.0, 0.5, n_users)
    b_i = rng.normal(0.0, 0.5, n_items)
    score = np.einsum("ij,ij->i", p[users], q[items]) / np.sqrt(n_factors) + b_u[users] + b_i[items]
    score = score + rng.normal(0.0, noise, len(score))
    cuts = np.quantile(score, _RATING_QUANTILES)
    ratings = (1 + np.searchsorted(cuts, score)).astype(np.float64)
    train, valid, test = split_ratings(users, items, ratings, fractions=fractions, seed=seed)

    graph = None
    if social:
        src, dst = _social(seed, user_topic, mean_links, homophily)
        graph = SocialGraph(n_users, src, dst, directed=True)
    item_tags = None
    if tags:
        trng = numpy_rng(seed, "data.synthetic.tags")
        extra = np.flatnonzero(trng.random(n_items) < 0.1)
        tag_items = np.concatenate([np.arange(n_items), extra])
        tag_ids = np.concatenate([item_topic, trng.integers(0, n_topics, len(extra))])
        item_tags = ItemTags(n_items, n_topics, tag_items, tag_ids)
    return Ratings(
        name=name,
        n_users=n_users,
        n_items=n_items,
        train=train,
        test=test,
        valid=valid,
        rating_range=(1.0, 5.0),
        social=graph,
        tags=item_tags,
        user_ids=np.arange(n_users, dtype=np.int64),
        item_ids=np.arange(n_items, dtype=np.int64),
        info={
            **_test_only_counts(
                train.users,
                train.items,
                np.concatenate([test.users, *([valid.users] if valid is not None else [])]),
                np.concatenate([test.items, *([valid.items] if valid is not None else [])]),
            ),
            "format": "synthetic",
            "seed": seed,
            "mean_degree": mean,
            "n_topics": n_topics,
            "n_factors": n_factors,
            "noise": noise,
            "user_topic": user_topic,
            "item_topic": item_topic,
        },
    )
