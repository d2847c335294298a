"""A trained run, loaded: recommend, export embeddings, evaluate, read its record.

:func:`train` trains and returns a :class:`Run`; :func:`load_run` opens a run folder written by any
``fedgraphrec train`` (or :func:`train`). The model is the one ``summary.json`` reports
(``best.pt``: the selected epoch), or the last evaluated one with ``which="last"``. Everything a
:class:`Run` hands out speaks the dataset's original ids (the folder's ``ids/users.tsv`` and
``ids/items.tsv``); the guide page "Using a trained model" shows it at work.

Who holds what: a run simulated in one process (every protocol's ``train``) keeps every party's
state in its folder, clients' embeddings included — in a deployment a user's embedding stays on its
client (:attr:`Run.note`). A Flower run's folder holds what the server may hold and no user rows:
:meth:`Run.recommend` and :meth:`Run.embeddings` refuse it and say where the rows are.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.data.idmap import IdMap, read_id_map
from fedgraphrec.data.types import Interactions, Ratings, binary_csr
from fedgraphrec.evaluation.ranking import evaluate_embeddings, evaluate_scores
from fedgraphrec.evaluation.rating import mae, rmse
from fedgraphrec.evaluation.recommend import ScoreRows, top_k
from fedgraphrec.runtime.ledger import read_saved
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.p4gcn_learner import rating_splits
from fedgraphrec.training.recommendations import EmbeddingTable, Recommendations, id_array, read_pairs
from fedgraphrec.training.rundir import RunDir, default_run_dir
from fedgraphrec.training.scoring import FLOWER_NOTE, split_target
from fedgraphrec.training.snapshot import Snapshot, load_snapshot

__all__ = ["Run", "load_run", "train"]

UserIds = Sequence[str | int] | np.ndarray | str | int


class Run:
    """A run folder and the model it reports (module docstring).

    Args:
        path: the run folder.
        which: ``best`` (the selected epoch's model, what ``summary.json`` reports) or ``last``
            (the last evaluated epoch's).

    Raises:
        FileNotFoundError: ``path`` is not a run folder.
        ValueError: ``which`` is neither ``best`` nor ``last``.
    """

    def __init__(self, path: str | Path, which: str = "best") -> None:
        if which not in ("best", "last"):
            raise ValueError(f"which must be 'best' or 'last', got {which!r}")
        self.path = Path(path)
        self.which = which
        self._dir = RunDir(self.path)
        if not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: no such run folder")
        if not self._dir.config_path.exists():
            raise FileNotFoundError(f"{self.path}: not a run folder (no config.toml)")

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, which={self.which!r})"

    # ------------------------------------------------------------------ the record
    @cached_property
    def config(self) -> TrainConfig:
        """The resolved configuration of the run (``config.toml``)."""
        return self._dir.load_config()

    @cached_property
    def summary(self) -> dict[str, Any]:
        """``summary.json``: the selected epoch's metrics, ``selected_epoch``, ``last_epoch``, timings."""
        if not self._dir.summary_path.exists():
            raise FileNotFoundError(
                f"{self.path}: no summary.json; the run has not finished "
                f"(fedgraphrec train --resume {self.path})"
            )
        return self._dir.read_summary()

    @property
    def metrics(self) -> list[dict[str, Any]]:
        """Every record of ``metrics.jsonl`` (one per logged epoch)."""
        return self._dir.read_metrics()

    @property
    def ledger(self) -> dict[str, Any] | None:
        """The saved ledger: ``ledger.json`` with ``rows`` from ``ledger.csv`` (``None`` when absent)."""
        return read_saved(self.path)

    @property
    def on_flower(self) -> bool:
        """Whether the run trained on Flower (its users' rows live on the SuperNodes)."""
        return self.summary.get("engine") == "flower"

    @property
    def note(self) -> str:
        """Who holds which part of this model, in one plain statement."""
        protocol = self.config.protocol
        if self.on_flower:
            return f"This run trained on Flower: {FLOWER_NOTE}."
        if protocol == "central":
            return "A centralized model: one party holds every table, as in this folder."
        if protocol == "p4gcn":
            return (
                "The organisations were simulated in one process, so this folder holds the state of both "
                "(the recommender's model and the social party's released rows); in a deployment each "
                "organisation keeps its own part."
            )
        return (
            f"{protocol} was simulated in one process, so this folder holds every client's state, the "
            "users' embeddings included; in a deployment a user's embedding stays on its own client."
        )

    # ------------------------------------------------------------------ the model
    @cached_property
    def model(self) -> Snapshot:
        """The snapshot (``best.pt`` or ``last.pt``), read with ``weights_only=True``.

        Raises:
            ValueError: a Flower run (its users' rows are on the SuperNodes).
            FileNotFoundError: the folder holds no such model (``summary.json``'s ``model_note`` says why).
        """
        if self.on_flower:
            raise ValueError(f"{self.path}: {FLOWER_NOTE}")
        path = self._dir.best_path if self.which == "best" else self._dir.last_path
        if not path.exists():
            why = self.summary.get("model_note") or "it was trained before runs kept their models"
            raise FileNotFoundError(f"{path}: the run folder holds no {self.which} model ({why})")
        return load_snapshot(path)

    @property
    def epoch(self) -> int:
        """The epoch of the loaded model."""
        return self.model.epoch

    def _ids(self, path: Path, n: int) -> IdMap:
        return read_id_map(path) if path.exists() else IdMap.identity(n)

    @cached_property
    def user_ids(self) -> IdMap:
        """Original user id of each compact index (``ids/users.tsv``)."""
        return self._ids(self._dir.user_ids_path, self.model.shape[0])

    @cached_property
    def item_ids(self) -> IdMap:
        """Original item id of each compact index (``ids/items.tsv``)."""
        return self._ids(self._dir.item_ids_path, self.model.shape[1])

    @cached_property
    def dataset(self) -> Interactions | Ratings:
        """The run's dataset, re-loaded from its config (data_dir, dataset_options, the same splits)."""
        from fedgraphrec.training.data import prepare_data

        return prepare_data(self.config)

    def seen(self) -> sp.csr_matrix:
        """Each user's train and validation items (what ``recommend`` excludes and ``evaluate`` masks)."""
        data = self.dataset
        if isinstance(data, Ratings):
            n_users, n_items = data.n_users, data.n_items
            parts = [s for s in (data.train, data.valid) if s is not None]
            users = np.concatenate([np.asarray(s.users) for s in parts])
            items = np.concatenate([np.asarray(s.items) for s in parts])
            return binary_csr(users, items, n_users, n_items)
        seen = data.train if data.valid is None else data.train + data.valid
        return sp.csr_matrix((seen > 0).astype(np.float32))

    # ------------------------------------------------------------------ use
    def user_index(self, users: UserIds) -> np.ndarray:
        """Compact indices of original user ids.

        Raises:
            ValueError: an id that is not one of the run's users (the message names it).
        """
        ids = [str(users)] if isinstance(users, str | int) else [str(u) for u in users]
        index, known = self.user_ids.find(ids)
        if not known.all():
            bad = ids[int(np.flatnonzero(~known)[0])]
            raise ValueError(
                f"unknown user id {bad!r}: not among the run's users ({self._dir.user_ids_path})"
            )
        return index

    def recommend(
        self, users: UserIds | None = None, k: int = 20, exclude_seen: bool = True
    ) -> Recommendations:
        """Each user's top-``k`` items, best first, in original ids.

        Args:
            users: original user ids (default: every user).
            k: list length.
            exclude_seen: never recommend an item the user has in train or validation.

        Returns:
            A :class:`~fedgraphrec.training.recommendations.Recommendations` table; a user with fewer
            than ``k`` rankable items gets a shorter list.
        """
        model = self.model
        n_users, n_items = model.shape
        index = np.arange(n_users, dtype=np.int64) if users is None else self.user_index(users)
        items, scores = top_k(model.score_rows(), index, k, n_items, self.seen() if exclude_seen else None)
        width = items.shape[1]
        keep = (items >= 0).ravel()
        return Recommendations(
            user=id_array(self.user_ids.original(np.repeat(index, width)))[keep],
            rank=np.tile(np.arange(1, width + 1, dtype=np.int64), len(index))[keep],
            item=id_array(self.item_ids.original(np.where(items < 0, 0, items).ravel()))[keep],
            score=scores.ravel()[keep],
        )

    def embeddings(self) -> tuple[EmbeddingTable, EmbeddingTable]:
        """The user and item tables with their original ids.

        Raises:
            ValueError: the model is scored by a network or holds predicted ratings, not embeddings.
        """
        model = self.model
        if model.users is None or model.items is None:
            raise ValueError(
                f"{self.path}: the {self.config.protocol} model has no embedding tables (it is scored by a "
                "network or stores its scores); use recommend"
            )
        return (
            EmbeddingTable(id_array(self.user_ids.ids), model.users.numpy()),
            EmbeddingTable(id_array(self.item_ids.ids), model.items.numpy()),
        )

    def export(self, out: str | Path, format: str = "npz") -> list[Path]:
        """Write the embeddings with their ids; returns the files written.

        ``npz``: one ``embeddings.npz`` with ``user_ids``, ``user_embeddings``, ``item_ids``,
        ``item_embeddings`` (ids as unicode strings: ``np.load(path, allow_pickle=False)`` reads it).
        ``parquet``: ``users.parquet`` and ``items.parquet`` with columns ``id`` and ``embedding``.
        """
        if format not in ("npz", "parquet"):
            raise ValueError(f"format must be npz or parquet, got {format!r}")
        users, items = self.embeddings()
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        if format == "parquet":
            return [users.to_parquet(folder / "users.parquet"), items.to_parquet(folder / "items.parquet")]
        path = folder / "embeddings.npz"
        np.savez(
            path,
            user_ids=np.asarray([str(v) for v in users.ids.tolist()], dtype=str),
            user_embeddings=users.vectors,
            item_ids=np.asarray([str(v) for v in items.ids.tolist()], dtype=str),
            item_embeddings=items.vectors,
        )
        return [path]

    def evaluate(
        self, on: str | Path = "test", ks: Sequence[int] | None = None, split: str = "test"
    ) -> dict[str, Any]:
        """Metrics of the model on ``test``, ``valid``, or interactions in a file or dataset folder.

        A split of the run's own dataset scores exactly as the training loop did (``summary.json``'s
        ``test`` for the selected model). A path holds (user, item) interactions in original ids (a
        file: :func:`~fedgraphrec.training.recommendations.read_pairs`; a folder: a dataset whose
        ``split`` is used); users and items the run does not know are dropped, and so are pairs
        the user already has in train or validation; the result counts them (``rows_used``,
        ``rows_unknown``, ``rows_seen``). Rating runs report ``rmse``/``mae`` on their splits.
        """
        ks = list(ks or self.config.eval.ks)
        model = self.model
        if isinstance(self.dataset, Ratings):
            return self._evaluate_ratings(str(on))
        counts: dict[str, int] = {}
        if str(on) in ("test", "valid"):  # the run's own split, masked as the training loop masked it
            target, exclude = split_target(self.dataset, str(on))
        else:
            target, counts = self._target(Path(on), split)
            exclude = [self.seen()]
        if model.users is not None and model.items is not None:
            result = evaluate_embeddings(
                model.users.float(), model.items.float(), target, exclude, ks=tuple(ks)
            )
        else:
            n_users, n_items = target.shape
            rows = self._stored_rows()
            result = evaluate_scores(rows, n_users, n_items, target, exclude, ks=tuple(ks), chunk_size=256)
        return {**result.metrics, **counts}

    def _stored_rows(self) -> ScoreRows:
        """Rows of the stored score matrix in its own dtype (as the training loop ranked them)."""
        dense = self.model.scores
        if dense is None:
            raise ValueError(f"{self.path}: the model stores no score matrix")
        table: torch.Tensor = dense
        return lambda idx: table[idx]

    def _target(self, path: Path, split: str) -> tuple[sp.csr_matrix, dict[str, int]]:
        """The held-out matrix of a file or folder in original ids, and the counts of dropped rows."""
        if path.is_dir():
            from fedgraphrec.data.registry import load_dataset

            other = load_dataset(str(path))
            if isinstance(other, Ratings):
                other = other.to_interactions()
            held = other.valid if split == "valid" else other.test
            if held is None:
                raise ValueError(f"{path}: the dataset has no {split} split")
            test = held.tocoo()
            uid = other.user_ids if other.user_ids is not None else np.arange(other.n_users)
            iid = other.item_ids if other.item_ids is not None else np.arange(other.n_items)
            users, items = list(np.asarray(uid)[test.row]), list(np.asarray(iid)[test.col])
        elif path.exists():
            users, items = read_pairs(path)
        else:
            raise FileNotFoundError(f"{path}: no such split, file or folder (a split is test or valid)")
        u, known_u = self.user_ids.find(users)
        i, known_i = self.item_ids.find(items)
        known = known_u & known_i
        n_users, n_items = self.model.shape
        seen = self.seen()
        in_seen = np.zeros(len(users), dtype=bool)
        in_seen[known] = np.asarray(seen[u[known], i[known]]).ravel() > 0
        use = known & ~in_seen
        target = binary_csr(u[use], i[use], n_users, n_items)
        counts = {
            "rows_used": int(use.sum()),
            "rows_unknown": int((~known).sum()),
            "rows_seen": int(in_seen.sum()),
        }
        return target, counts

    def _evaluate_ratings(self, split: str) -> dict[str, Any]:
        """RMSE and MAE of a rating run's predicted ratings on its own ``valid``/``test`` split."""
        if split not in ("test", "valid"):
            raise ValueError(f"a rating run is evaluated on its own splits (test or valid), not {split!r}")
        data = self.dataset
        assert isinstance(data, Ratings)
        scores = self.model.scores
        assert scores is not None
        _, valid, test = rating_splits(data, self.config.seed)
        users, items, ratings = valid if split == "valid" else test
        pred = scores.numpy()[users, items].astype(np.float64)
        return {
            "rmse": rmse(pred, ratings, clip=data.rating_range),
            "mae": mae(pred, ratings, clip=data.rating_range),
        }


def load_run(path: str | Path, which: str = "best") -> Run:
    """Open a run folder (:class:`Run`); ``which="last"`` loads the last evaluated model instead."""
    return Run(path, which)


def train(
    protocol: str,
    dataset: str,
    *,
    out: str | Path | None = None,
    epochs: int | None = None,
    seed: int | None = None,
    progress: bool = False,
    overwrite: bool = False,
    **settings: Any,
) -> Run:
    """Train ``protocol`` on ``dataset``, write the run folder, and return the run.

    Args:
        protocol: a registered protocol (``fedgraphrec train --help`` lists them).
        dataset: a registered dataset name or a dataset folder.
        out: the run folder (default ``runs/<time>-<protocol>-<dataset>``).
        epochs: number of epochs (default: the configuration's).
        seed: the run seed.
        progress: show progress bars.
        overwrite: replace the run already in ``out`` (without it, an existing run there is an error).
        settings: any key ``--set`` takes, as a Python value: ``alpha=5``, ``ks=[5, 20]``,
            ``**{"eval.ks": [5, 20], "dataset_options.threshold": 4.0}``.

    Raises:
        ConfigError: an unknown key or a value of the wrong type (the message names it).
        ValueError: ``out`` holds a run and ``overwrite`` is false, or holds files that are no run.
    """
    from fedgraphrec.training.loading import load_config
    from fedgraphrec.training.trainer import Trainer

    cfg = load_config(None, None, protocol=protocol, dataset=dataset, epochs=epochs, seed=seed, **settings)
    folder = Path(out) if out is not None else default_run_dir(protocol, cfg.dataset)
    RunDir(folder).check_free(overwrite)  # refuse before the data load; touch nothing
    trainer = Trainer(cfg, folder, progress=progress)
    RunDir(folder).prepare(overwrite)  # the start succeeded: an old run's files go now
    trainer.fit()
    return Run(folder)
