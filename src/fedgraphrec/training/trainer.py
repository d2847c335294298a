"""Centralized training loop: BPR minibatches, Adam, evaluation, early stopping, checkpoints.

This is the reference loop the federated protocols are measured against. It is deterministic:
initial tables come from the stream ``("init",)``, triples from ``("sampler", epoch)`` and the
validation carve-out from the data layer's seeded split, so the same config and seed give the same
numbers, and a run resumed from its checkpoint ends exactly where an uninterrupted run would.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch

from fedgraphrec.data.types import Interactions
from fedgraphrec.evaluation.rating import better, worst
from fedgraphrec.protocols.settings import MinibatchSettings
from fedgraphrec.training.checkpoint import SECRETS, load_checkpoint, save_checkpoint
from fedgraphrec.training.config import ConfigError, TrainConfig, config_differences
from fedgraphrec.training.data import prepare_data
from fedgraphrec.training.device_profile import device_watch, no_devices
from fedgraphrec.training.learner_base import AnyLearner, BatchStats, Learner
from fedgraphrec.training.learners import make_learner
from fedgraphrec.training.loading import config_from_dict
from fedgraphrec.training.plots import plot_curves, plot_ledger
from fedgraphrec.training.progress import EpochProgress
from fedgraphrec.training.rundir import RunDir
from fedgraphrec.training.sampler import BPRSampler, SamplerScheme
from fedgraphrec.training.scoring import data_shape, evaluate_learner
from fedgraphrec.training.snapshot import ModelFiles

__all__ = ["RunResult", "Trainer", "fit_in_scratch"]


@dataclass
class RunResult:
    """What a finished run leaves behind."""

    run_dir: Path
    summary: dict[str, Any]
    history: list[dict[str, Any]]


@dataclass
class _LoopState:
    epoch: int = 0  # epochs completed
    best_value: float = float("-inf")
    best_epoch: int = -1
    bad_evals: int = 0
    stopped_early: bool = False
    train_seconds: float = 0.0
    clients_lost: int = 0  # round-based protocols: users whose round's work never reached the model
    clients_recovered: int = 0  # users that dropped after uploading; secure aggregation recovered them


class Trainer:
    """Trains one centralized model and writes its run folder.

    Args:
        cfg: validated configuration.
        run_dir: output folder (created; an existing checkpoint there is resumed if ``resume``).
        progress: show a progress bar on stderr.
        resume: continue from ``run_dir/checkpoint.pt`` if it exists (a file holding anything but
            plain data is refused unread: :mod:`fedgraphrec.training.checkpoint`).
        on_epoch_end: optional hook called with the completed epoch number (tests use it to
            simulate a crash).
        data: train on this dataset instead of loading ``cfg.dataset`` (for derived subsets that
            are not registered, such as DGREC's ``ciao-10core``); ``cfg.eval.valid_fraction`` is then
            not applied.
        learner: build the learner with this instead of :func:`make_learner` (the Flower engine's
            learner drives the same loop). A learner with ``run_summary()`` adds its entries to
            ``summary.json``.

    Optional learner hooks, used when present:

    * ``train_round(epoch) -> BatchStats``: one epoch is one call (round-based and epoch-level
      learners); no BPR triples are drawn for such a learner (the sampler is never built).
    * ``evaluate_splits(splits, ks) -> {split: {metric: value}}``: the learner evaluates itself
      (rating protocols report ``rmse``/``mae``); tried first, before ``evaluate_federated``,
      ``score_users`` and ``embeddings``.
    * ``score_rows(users) -> [b, n_items]``: with ``evaluate_splits``, the model's score (predicted
      rating) rows, from which ``best.pt``/``last.pt`` are written (:mod:`.snapshot`).

    Every evaluated model is kept as ``best.pt`` (the selected epoch) and ``last.pt`` (the last one)
    where it can be (:func:`~fedgraphrec.training.scoring.evaluate_learner`); ``ids/users.tsv`` and
    ``ids/items.tsv`` map the compact indices back to the dataset's ids.

    Selection and early stopping follow the metric's direction
    (:data:`~fedgraphrec.evaluation.rating.LOWER_IS_BETTER`: ``rmse`` and ``mae`` improve downwards).
    """

    def __init__(
        self,
        cfg: TrainConfig,
        run_dir: str | Path,
        progress: bool = True,
        resume: bool = False,
        on_epoch_end: Callable[[int], None] | None = None,
        data: Interactions | None = None,
        learner: Callable[[TrainConfig, Interactions], AnyLearner] | None = None,
    ) -> None:
        cfg.validate()
        self.cfg = cfg
        self.run = RunDir(run_dir)
        self.progress = progress
        self.resume = resume
        self.on_epoch_end = on_epoch_end
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        # a rating protocol's data are Ratings, which only its own learner reads (evaluate_splits)
        self.data = cast(Interactions, prepare_data(cfg)) if data is None else data
        self.learner: AnyLearner = (make_learner if learner is None else learner)(cfg, self.data)
        self._sampler: BPRSampler | None = None
        self._rounds: Callable[[int], BatchStats] | None = getattr(self.learner, "train_round", None)
        self.state = _LoopState(best_value=worst(cfg.eval.metric))
        self.history: list[dict[str, Any]] = []
        self.models = ModelFiles(self.run.best_path, self.run.last_path)

    @property
    def sampler(self) -> BPRSampler:
        """The BPR triples of minibatch learners, built on first use (a round learner never needs it)."""
        if self._sampler is None:
            users = getattr(self.cfg.settings, "sampler", "") == "users"
            scheme: SamplerScheme = "users" if users else "interactions"
            self._sampler = BPRSampler(self.data.train, self.cfg.seed, scheme)
        return self._sampler

    # ---------------------------------------------------------------- checkpoints
    def _save_checkpoint(self) -> None:
        """Plain data only, key material encrypted under the user's key (:mod:`.checkpoint`)."""
        learner = dict(self.learner.state_dict())
        secrets = learner.pop(SECRETS, None)
        payload = {
            "learner": learner,
            "state": vars(self.state).copy(),
            "history": self.history,
            "config": self.cfg.to_dict(),
        }
        save_checkpoint(self.run.checkpoint_path, payload, secrets)

    def _load_checkpoint(self) -> bool:
        path = self.run.checkpoint_path
        if not path.exists():
            return False
        payload, secrets = load_checkpoint(path)  # runs no code from the file (CheckpointError)
        if secrets is not None:
            payload["learner"][SECRETS] = secrets
        # keys added to TrainConfig after the checkpoint was written take their defaults
        try:
            saved = config_from_dict(payload["config"]).to_dict()
        except ConfigError as exc:
            raise ValueError(
                f"{path}: the checkpoint's config does not load ({exc}); refusing to resume"
            ) from None
        wanted = self.cfg.to_dict()
        if saved.pop("epochs") > wanted.pop("epochs"):
            raise ValueError(f"{path}: a run can be extended (more epochs) on resume, not shortened")
        if differ := config_differences(wanted, saved):
            named = ", ".join(f"{key} ({ours!r}, checkpoint: {theirs!r})" for key, ours, theirs in differ)
            raise ValueError(
                f"{path}: the checkpoint was written with another config; it differs in {named}; "
                "refusing to resume (only epochs may grow)"
            )
        if payload["config"]["epochs"] != self.cfg.epochs:
            self.run.create(self.cfg)  # extending: the folder's config.toml states the new length
        self.learner.load_state_dict(payload["learner"])
        self.state = _LoopState(**payload["state"])
        self.history = list(payload["history"])
        self.run.rewrite_metrics(self.history)
        return True

    # ---------------------------------------------------------------- loop
    def _evaluate(self, record: dict[str, Any]) -> None:
        """Metrics of the current model into ``record``; the model is kept for ``best.pt``/``last.pt``."""
        t0 = time.perf_counter()
        own = getattr(self.learner, "evaluate_splits", None)
        has_valid = own is not None or getattr(self.data, "valid", None) is not None  # own: its splits
        splits = (["valid"] if has_valid else []) + ["test"]
        got, model, reason = evaluate_learner(
            self.learner, self.data, splits, self.cfg.eval.ks, record["epoch"]
        )
        for name in splits:
            record[name] = got[name]
        self.models.offer(record["epoch"], model, reason)
        record["eval_seconds"] = time.perf_counter() - t0
        cfg, st = self.cfg, self.state
        split = {"valid": "valid" if has_valid else None, "test": "test"}.get(cfg.eval.select)
        if split is None:  # "last", or "valid" without a validation split
            return
        value = record[split][cfg.eval.metric]
        if better(cfg.eval.metric, value, st.best_value):
            st.best_value, st.best_epoch, st.bad_evals = value, record["epoch"], 0
            self.models.write_best(record["epoch"])
        else:
            st.bad_evals += 1
            if split == "valid" and cfg.eval.patience and st.bad_evals >= cfg.eval.patience:
                st.stopped_early = True

    def _train_epoch(self, epoch: int, bar: EpochProgress) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        total = bpr = reg = 0.0
        n = 0
        if self._rounds is not None:  # round-based protocol: one epoch is one communication round
            out = self._rounds(epoch)
            total, bpr, reg, n = out.loss, out.bpr, out.reg, 1
            bar.advance_batch()
        else:
            for users, pos, neg in self.sampler.batches(epoch, cfg.settings_as(MinibatchSettings).batch_size):
                out = cast(Learner, self.learner).train_batch(users, pos, neg)
                total += out.loss
                bpr += out.bpr
                reg += out.reg
                n += 1
                bar.advance_batch()
        seconds = time.perf_counter() - t0
        self.state.train_seconds += seconds
        record: dict[str, Any] = {
            "epoch": epoch + 1,
            "loss": total / n,
            "bpr": bpr / n,
            "reg": reg / n,
            "train_seconds": seconds,
        }
        if (dev := self.learner.pop_deviation()) is not None:
            record["verify_max_deviation"] = dev
        if (ledger := self.learner.ledger) is not None:
            record["bytes_total"] = ledger.total_bytes()
        rounds: dict[str, int] = getattr(self.learner, "last_round", {})
        record.update(rounds)
        self.state.clients_lost += rounds.get("clients_lost", 0)
        self.state.clients_recovered += rounds.get("clients_recovered", 0)
        return record

    def fit(self) -> RunResult:
        """Run (or resume) training to the end and write summary and curves."""
        cfg = self.cfg
        resumed = self.resume and self._load_checkpoint()
        if not resumed:
            self.run.create(cfg)
            self.run.rewrite_metrics([])
            if (shape := data_shape(self.data)) is not None:  # the original ids behind the indices
                self.run.write_id_maps(
                    shape, getattr(self.data, "user_ids", None), getattr(self.data, "item_ids", None)
                )
            if cfg.eval.eval_initial:
                record: dict[str, Any] = {"epoch": 0, "loss": None}
                self._evaluate(record)
                self._log(record)
        watch = device_watch(cfg, self.learner)  # device_profile: replayed per message, after each epoch
        n_batches = (
            1
            if self._rounds is not None
            else self.sampler.n_batches(cfg.settings_as(MinibatchSettings).batch_size)
        )
        with EpochProgress(cfg.epochs, n_batches, enabled=self.progress, start=self.state.epoch) as bar:
            for epoch in range(self.state.epoch, cfg.epochs):
                if self.state.stopped_early:
                    break
                if watch is not None:
                    watch.begin_epoch()
                record = self._train_epoch(epoch, bar)
                if watch is not None:
                    watch.end_epoch()
                self.state.epoch = epoch + 1
                evaluate = (epoch + 1) % cfg.eval.eval_every == 0 or epoch + 1 == cfg.epochs
                if evaluate:
                    self._evaluate(record)
                if evaluate or (epoch + 1) % cfg.eval.log_every == 0:
                    self._log(record)
                bar.end_epoch(record, cfg.eval.metric)
                if cfg.checkpoint_every and (
                    (epoch + 1) % cfg.checkpoint_every == 0
                    or epoch + 1 == cfg.epochs
                    or self.state.stopped_early
                ):
                    self._save_checkpoint()
                    self.models.write_last(self.state.epoch)
                if self.on_epoch_end is not None:
                    self.on_epoch_end(epoch + 1)
        self.models.write_last(self.state.epoch)
        if self.state.best_epoch < 0:  # no selection rule applied: the last evaluated model is the one
            self.models.write_best(self.state.epoch)
        summary = self._summary()
        if cfg.eval.device_profile and "communication" in summary:
            summary["communication"]["per_device"] = no_devices(cfg) if watch is None else watch.summary()
        self.run.write_summary(summary)
        plot_curves(
            self.history,
            self.run.curves_path,
            title=f"{cfg.protocol}/{getattr(cfg.settings, 'model', cfg.protocol)} on {self.data.name}",
            selected_epoch=summary["selected_epoch"],
        )
        net = getattr(self.learner, "net", None) or getattr(
            getattr(self.learner, "protocol", None), "net", None
        )
        if cfg.transcripts and net is not None:  # what each party received, for the user's own audit
            net.transcript.save(self.run.path / "transcripts")
        if (ledger := self.learner.ledger) is not None:
            ledger.save(self.run.path)
            plot_ledger(
                ledger, self.run.path / "communication.png", title=f"{cfg.protocol} on {self.data.name}"
            )
        return RunResult(self.run.path, summary, self.history)

    def _log(self, record: dict[str, Any]) -> None:
        self.history.append(record)
        self.run.append_metrics(record)

    def _summary(self) -> dict[str, Any]:
        cfg, st = self.cfg, self.state
        evaluated = [r for r in self.history if "test" in r]
        last = evaluated[-1] if evaluated else None
        selected: dict[str, Any] | None
        if st.best_epoch >= 0:
            selected = next(r for r in evaluated if r["epoch"] == st.best_epoch)
            rule = cfg.eval.select
        else:
            selected, rule = last, "last"
        summary: dict[str, Any] = {
            "protocol": cfg.protocol,
            "model": getattr(cfg.settings, "model", cfg.protocol),
            "dataset": self.data.name,
            "dataset_stats": self.data.stats(),
            "seed": cfg.seed,
            "epochs_run": st.epoch,
            "stopped_early": st.stopped_early,
            "selection": rule,
            "selected_epoch": selected["epoch"] if selected else None,
            "last_epoch": last["epoch"] if last else None,
            **self.models.summary(selected["epoch"] if selected else None, last["epoch"] if last else None),
            "test": selected["test"] if selected else {},
            "valid": selected.get("valid", {}) if selected else {},
            "last_epoch_test": last["test"] if last else {},
            "train_seconds": st.train_seconds,
            "mean_epoch_seconds": st.train_seconds / max(st.epoch, 1),
        }
        if cfg.protocol != "central":  # where the hiding draws came from (SECURITY.md)
            summary["randomness"] = cfg.randomness()
        if (ledger := self.learner.ledger) is not None:
            per_client = ledger.client_sent + ledger.client_received
            summary["communication"] = {
                "total_bytes": ledger.total_bytes(),
                "mean_bytes_per_client": float(per_client.mean()),
                "mean_bytes_per_client_per_epoch": float(per_client.mean()) / max(st.epoch, 1),
                "per_client_per_epoch": ledger.per_client_cost(max(st.epoch, 1)),
            }
        if self._rounds is not None and self.learner.ledger is not None:  # federated rounds
            summary["clients_lost"] = st.clients_lost
            summary["clients_recovered"] = st.clients_recovered
        extra: Callable[[], dict[str, Any]] | None = getattr(self.learner, "run_summary", None)
        if extra is not None:  # the engine's own measurements (Flower's traffic and latency)
            summary.update(extra())
        devs = [r["verify_max_deviation"] for r in self.history if "verify_max_deviation" in r]
        if devs:
            summary["verify_max_deviation"] = max(devs)
        if rule == "test":
            summary["warning"] = (
                "the epoch was selected on the test metric (the protocol of the reproduced script); "
                "this is optimistic — use select='valid' for honest model selection"
            )
        return summary


def fit_in_scratch(
    cfg: TrainConfig,
    data: Interactions | None = None,
    learner: Callable[[TrainConfig, Interactions], AnyLearner] | None = None,
) -> tuple[RunResult, AnyLearner]:
    """Train ``cfg`` to the end in a temporary run folder (table runners keep a record, not a folder).

    Returns the run's result (summary and per-epoch history) and the trained learner.
    """
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, tmp, progress=False, data=data, learner=learner)
        return trainer.fit(), trainer.learner
