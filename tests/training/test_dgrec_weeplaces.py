"""DGREC's Weeplaces data: the paper's core and 80/20 split, GroupIM groups as side information.

The hyperedge rule is the one that keeps held-out pairs out of the side information: a group's POI
joins its hyperedge only if some member has it among its *training* items and no member in test.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from fedgraphrec.training.dgrec import load_data, load_side, weeplaces_side

N_USERS, N_ITEMS, N_GROUPS = 30, 25, 12


@pytest.fixture
def weeplaces_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, dict[int, set[int]], dict[int, set[int]]]:
    """A data root with a small GroupIM-style Weeplaces copy (raw ids offset, so compaction shows)."""
    rng = np.random.default_rng(7)
    folder = tmp_path / "weeplaces"
    folder.mkdir()
    splits = ("train", "val_foldin", "val_heldout", "test_foldin", "test_heldout")
    lines = []
    for u in range(N_USERS):
        n = 2 if u == 0 else int(rng.integers(6, 12))  # user 0 falls out of the 3-core
        for i in rng.choice(N_ITEMS, size=n, replace=False):
            lines.append(f"{100 + u}\t{500 + i}\t{splits[int(rng.integers(0, 5))]}")
    with gzip.open(folder / "interactions.tsv.gz", "wt") as f:
        f.write("\n".join(lines) + "\n")
    members = {g: {int(u) for u in rng.choice(N_USERS, size=3, replace=False)} for g in range(N_GROUPS)}
    visits = {g: {int(i) for i in rng.choice(N_ITEMS, size=4, replace=False)} for g in range(N_GROUPS)}
    (folder / "group_users.tsv").write_text("".join(f"{g}\t{100 + u}\n" for g in members for u in members[g]))
    (folder / "group_items.tsv").write_text(
        "".join(f"{g}\t{500 + i}\ttrain\n" for g in visits for i in visits[g])
    )
    monkeypatch.setenv("FEDGRAPHREC_DATA", str(tmp_path))
    load_data.cache_clear()
    return folder, members, visits


def test_weeplaces_side_is_the_core_split_80_20_with_group_links_and_training_only_hyperedges(
    weeplaces_root: tuple[Path, dict[int, set[int]], dict[int, set[int]]],
) -> None:
    folder, members, visits = weeplaces_root
    train, test, social, tags = weeplaces_side(min_user=3, min_item=3)
    with gzip.open(folder / "interactions.tsv.gz", "rt") as f:
        pairs = [line.split("\t")[:2] for line in f.read().split("\n") if line]
    raw = {(int(u) - 100, int(i) - 500) for u, i in pairs}
    # the iterated 3-core of every pair: user 0 (2 items) is gone; ids compact in raw order
    users = sorted({u for u, _ in raw} - {0})
    assert train.shape == test.shape == (len(users), train.shape[1])
    items_left = sorted({i for u, i in raw if u in users})
    kept_users, kept_items = users, [i for i in items_left if sum((u, i) in raw for u in users) >= 3]
    assert train.shape[1] == len(kept_items)
    both = train + test
    assert train.multiply(test).nnz == 0
    got = {(kept_users[r], kept_items[c]) for r, c in zip(*both.nonzero(), strict=True)}
    assert got == {(u, i) for u, i in raw if u in kept_users and i in kept_items}
    per_user_train, per_user_all = np.diff(train.indptr), np.diff(both.tocsr().indptr)
    assert (per_user_train >= 1).all()
    assert np.array_equal(per_user_all - per_user_train, np.diff(test.indptr))
    assert 0.1 < test.nnz / both.nnz < 0.3  # the paper's 20 % held out per user
    # users sharing a group are linked, others are not; no self links
    index = {u: k for k, u in enumerate(kept_users)}
    expected_links = {
        (index[a], index[b])
        for g in members
        for a in members[g]
        for b in members[g]
        if a != b and a in index and b in index
    }
    assert set(zip(*social.nonzero(), strict=True)) == expected_links
    # hyperedge g: the POIs group g visited that some member holds in training and none in test
    item_index = {i: k for k, i in enumerate(kept_items)}
    train_items = {
        index[u]: set(train.indices[train.indptr[index[u]] : train.indptr[index[u] + 1]]) for u in kept_users
    }
    expected_edges = set()
    test_items = {
        index[u]: set(test.indices[test.indptr[index[u]] : test.indptr[index[u] + 1]]) for u in kept_users
    }
    for g in members:
        held = set().union(*(train_items[index[u]] for u in members[g] if u in index))
        out = set().union(*(test_items[index[u]] for u in members[g] if u in index))
        edge = frozenset(item_index[i] for i in visits[g] if i in item_index and item_index[i] in held - out)
        if edge:
            expected_edges.add(edge)
    csc = tags.tocsc()
    got_edges = {frozenset(csc.indices[csc.indptr[k] : csc.indptr[k + 1]]) for k in range(tags.shape[1])}
    assert got_edges == expected_edges
    assert tags.shape[0] == len(kept_items)


def test_dgrec_data_for_weeplaces_goes_through_load_side_with_the_paper_core_by_default(
    weeplaces_root: tuple[Path, dict[int, set[int]], dict[int, set[int]]],
) -> None:
    with pytest.raises(ValueError, match="keeps no interaction"):
        load_side("weeplaces")  # every toy user has < 10 interactions: the paper's 10-core is empty
    sizes = load_data("weeplaces", min_user=3, min_item=3).sizes()
    assert sizes["users"] == N_USERS - 1 and sizes["test"] > 0 and sizes["social_links"] > 0
