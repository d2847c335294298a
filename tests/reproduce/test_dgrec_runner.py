"""DGREC runner settings: a variant's own values can be overridden."""

from __future__ import annotations

from typing import Any

from fedgraphrec.protocols.dgrec.settings import DGRECSettings

settings_for = DGRECSettings.for_variant


def test_dgrec_settings_for_lets_an_override_replace_a_variant_value() -> None:
    """``dmf`` fixes ``hops=1``; asking for ``hops=4`` used to raise (two values for one keyword)."""
    s = settings_for("dmf", hops=4, lr=2.0)
    assert (s.hops, s.lr, s.sharing, s.local_model.kind) == (4, 2.0, "plain", "mf")
    assert settings_for("dmf").hops == 1


def test_load_side_with_a_filter_keeps_side_information_aligned_to_the_compact_ids() -> None:
    """Top-N items + k-core: the social graph and tags follow the kept users and items."""
    import numpy as np

    from fedgraphrec.training.dgrec import load_data, load_side

    full = load_side("synthetic-ratings")
    train, test, social, tags = load_side("synthetic-ratings", top_items=80, min_user=3, min_item=2)
    assert train.shape == test.shape and train.shape[1] <= 80
    assert train.shape[0] < full[0].shape[0] or train.shape[1] < full[0].shape[1]
    assert social.shape == (train.shape[0], train.shape[0])
    assert tags.shape[0] == train.shape[1]
    assert np.asarray(tags.sum(axis=0)).min() > 0  # tags left without items are dropped
    sizes = load_data("synthetic-ratings", top_items=80, min_user=3, min_item=2).sizes()
    assert sizes["users"] == train.shape[0] and sizes["test"] == test.nnz


def test_load_side_rejects_bad_filter_values_and_ciao_10core_is_a_registry_dataset() -> None:
    import pytest

    from fedgraphrec.data.catalog import REGISTRY
    from fedgraphrec.training.dgrec import load_side

    spec = REGISTRY["ciao-10core"]
    assert spec.format == "derived"
    assert dict(spec.options) == {"base": "ciao", "min_user": 10, "min_item": 10}
    with pytest.raises(ValueError, match="min_user"):
        load_side("synthetic-ratings", min_user=0)


def test_run_settings_reach_every_dgrec_setting_and_refuse_bad_values() -> None:
    """``--set`` keys: protocol (δ, β, lr, H, n_u, batch, …) and model (d, n_i, d_i, hidden, λ, scale)."""
    import pytest

    from fedgraphrec.training.loading import load_config

    sets = [
        "delta=0.2", "beta=2.0", "lr=1.0", "hops=2", "fanout=2", "batch=8", "max_items=64", "d=8",
        "n_interests=3", "d_interest=5", "hidden=[8, 4]", "l2=0.01", "loss_scale='mean'", "centres_per_epoch=10",
    ]  # fmt: skip
    s = load_config(None, sets, protocol="dgrec").settings
    assert isinstance(s, DGRECSettings)
    assert (s.delta, s.beta, s.lr, s.hops, s.fanout, s.batch, s.max_items) == (0.2, 2.0, 1.0, 2, 2, 8, 64)
    m = s.local_model
    assert (m.d, m.n_interests, m.d_interest, m.hidden, m.l2, m.loss_scale) == (8, 3, 5, (8, 4), 0.01, "mean")
    assert (
        settings_for("dgrec").local_model.loss_scale == "eq2"
        and settings_for("dmf").local_model.loss_scale == "mean"
    )
    for bad, match in (
        ({"loss_scale": "sum"}, "loss_scale"),
        ({"hidden": [8]}, "hidden"),
        ({"lr": -1.0}, "lr"),
    ):
        with pytest.raises(ValueError, match=match):
            DGRECSettings(**bad)  # type: ignore[arg-type]


def test_reference_rows_are_written_like_runs(tmp_path) -> None:
    """``popularity`` / ``random`` go through the runner into the same JSON form as a variant."""
    import json

    from fedgraphrec.reproduce.dgrec_runs import run_and_save

    for kind in ("popularity", "random"):
        res = run_and_save("synthetic-ratings", kind, 0, 0, tmp_path, lr=0.6)
        saved = json.loads((tmp_path / f"synthetic-ratings_{kind}_r1.0_s0.json").read_text())
        assert saved["metrics"] == res["metrics"] and set(res["metrics"]) == {"recall@20", "ndcg@20"}
        assert 0.0 <= res["expected_random_recall@20"] <= 1.0


def test_model_overrides_merge_with_the_variants_model() -> None:
    """Fig. 3's n_i / d_i sweep: overriding n_interests keeps the variant's own model kind."""
    s = settings_for("dlgnn", n_interests=12)
    assert (s.local_model.kind, s.local_model.n_interests, s.local_model.d_interest) == ("lgn", 12, 10)
    assert settings_for("dgrec", d_interest=30).local_model.d_interest == 30


def test_train_runner_passes_fig3_arguments_and_refuses_unknown_ones(monkeypatch, tmp_path) -> None:
    import pytest

    from fedgraphrec.reproduce import dgrec_runs as dgrec
    from fedgraphrec.reproduce.runs import train_runner

    seen: dict[str, object] = {}
    monkeypatch.setattr(dgrec, "run_and_save", lambda *a, **kw: seen.update(kw))
    args = ("--epochs", "1", "--hops", "2", "--fanout", "1", "--n-interests", "12", "--d-interest", "5")
    train_runner("dgrec", "flixster", "dgrec", 0, args, tmp_path)
    assert (seen["hops"], seen["fanout"], seen["n_interests"], seen["d_interest"]) == (2, 1, 12, 5)
    with pytest.raises(ValueError, match="--hop"):
        train_runner("dgrec", "flixster", "dgrec", 0, ("--epochs", "1", "--hop", "2"), tmp_path)


SMALL = {"d": 4, "n_interests": 2, "d_interest": 3, "hidden": (4, 4), "max_items": 16, "hops": 2}


def test_a_run_holds_out_validation_from_training_and_reports_it_each_evaluation() -> None:
    """The model trains on train minus a seeded validation share; valid metrics sit beside test ones."""
    from fedgraphrec.reproduce.dgrec_runs import run
    from fedgraphrec.training.dgrec import load_data

    full = load_data("synthetic-ratings").sizes()
    s = settings_for("dgrec", centres_per_epoch=10, **SMALL)  # type: ignore[arg-type]
    res = run("synthetic-ratings", s, seed=0, epochs=2, eval_every=1, valid_fraction=0.2)
    sizes = res["data"]  # the learner's own data
    assert sizes["valid"] > 0 and sizes["train"] + sizes["valid"] == full["train"]
    assert sizes["test"] == full["test"]
    assert all(set(c["valid"]) == set(c["test"]) == {"recall@20", "ndcg@20"} for c in res["curve"])
    assert res["valid_metrics"] == res["curve"][-1]["valid"] and res["valid_fraction"] == 0.2
    assert res["group_steps"] == 2 * 10  # epochs × centres per epoch
    assert res["steps_per_user"]["mean"] * sizes["users"] >= res["group_steps"]  # every group has its centre
    chosen = res["curve"][res["selected_epoch"] - 1]
    assert res["selected_metrics"] == chosen["test"]
    assert chosen["valid"]["recall@20"] == max(c["valid"]["recall@20"] for c in res["curve"])
    none = run("synthetic-ratings", s, seed=0, epochs=1, valid_fraction=0.0)
    assert none["data"]["train"] == full["train"] and none["valid_metrics"] == {}


def test_train_dgrec_with_a_validation_fraction_trains_on_the_carved_training_split(tmp_path) -> None:
    """``fedgraphrec train dgrec --set valid_fraction=…``: the peers never hold a validation row."""
    from fedgraphrec.training.dgrec import load_data
    from fedgraphrec.training.loading import load_config
    from fedgraphrec.training.trainer import Trainer

    sets = ["valid_fraction=0.2", "epochs=1", "centres_per_epoch=5", "d=4", "n_interests=2", "d_interest=3"]
    cfg = load_config(None, sets, protocol="dgrec", dataset="synthetic-ratings")
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    rec = trainer.learner.rec  # type: ignore[union-attr]
    valid = trainer.data.valid
    assert valid is not None and valid.nnz > 0
    assert (
        rec.train.nnz == trainer.data.train.nnz == load_data("synthetic-ratings").sizes()["train"] - valid.nnz
    )
    assert rec.train.multiply(valid).nnz == 0


def test_the_epoch_is_selected_on_validation_and_tables_report_the_test_metrics_there() -> None:
    from fedgraphrec.reproduce.dgrec_runs import select_on_valid
    from fedgraphrec.reproduce.report import reported

    def point(epoch: int, valid: float, test: float) -> dict[str, Any]:
        return {
            "epoch": epoch,
            "valid": {"recall@20": valid},
            "test": {"recall@20": test, "ndcg@20": test / 2},
        }

    # test is best at epoch 3, validation at epoch 2 (and again at 4: the first of a tie wins)
    curve: list[dict[str, Any]] = [
        point(1, 0.1, 0.1),
        point(2, 0.3, 0.2),
        point(3, 0.2, 0.9),
        point(4, 0.3, 0.5),
    ]
    curve.append({"epoch": 5})
    assert select_on_valid(curve) == (2, {"recall@20": 0.2, "ndcg@20": 0.1})
    assert select_on_valid([{"epoch": 1, "test": {"recall@20": 0.5}}]) is None
    record = {"metrics": {"recall@20": 0.5}, "selected_metrics": {"recall@20": 0.2}}
    assert reported(record) == {"recall@20": 0.2}
    assert reported({"metrics": {"recall@20": 0.5}}) == {"recall@20": 0.5}
