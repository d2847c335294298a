"""The command line: datasets listing, train, demo, and clear errors (exit 2, one line)."""

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedgraphrec.cli._app import app

runner = CliRunner()
TINY = [
    "--set",
    "dataset_options.n_users=80",
    "--set",
    "dataset_options.n_items=90",
    "--set",
    "dim=8",
    "--set",
    "ks=[5]",
    "--set",
    "metric=recall@5",
]


def test_train_central_writes_run_folder(tmp_path):
    res = runner.invoke(
        app,
        [
            "train",
            "central",
            "--dataset",
            "synthetic",
            "--model",
            "lightgcn+",
            "--epochs",
            "2",
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
            *TINY,
        ],
    )
    assert res.exit_code == 0, res.output
    for name in ("config.toml", "metrics.jsonl", "summary.json", "curves.png", "checkpoint.pt"):
        assert (tmp_path / "r" / name).exists(), name
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["model"] == "lightgcn+" and summary["epochs_run"] == 2
    assert "recall@5" in res.output


def test_config_file_and_set(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('epochs = 1\n[protocol]\nmodel = "mf"\n[dataset_options]\nn_users = 60\nn_items = 70\n')
    res = runner.invoke(
        app,
        [
            "train",
            "central",
            "-c",
            str(cfg),
            "--set",
            "dim=4",
            "--set",
            "ks=[5]",
            "--set",
            "metric=ndcg@5",
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    assert 'model = "mf"' in (tmp_path / "r" / "config.toml").read_text()


def test_train_protocol_help_lists_its_settings():
    """`train PROTOCOL --help` ends with the protocol's settings, generated from its dataclass."""
    res = runner.invoke(app, ["train", "lpgcn", "--help"], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "lpgcn settings ([protocol] table" in res.output
    for name in ("alpha", "secure_virtual_items", "paper_literal", "batch_size"):
        assert f" {name} " in res.output, name
    assert "secagg_threshold" not in res.output  # not a setting of lpgcn
    fedgrec = runner.invoke(app, ["train", "fedgrec", "--help"], terminal_width=200).output
    assert " clients_per_round " in fedgrec and "alias: n_layers" in fedgrec
    listing = runner.invoke(app, ["train", "--help"], terminal_width=200).output
    assert "fedpergnn" in listing and "train PROTOCOL --help lists its settings" in listing


def test_a_flat_protocol_key_in_a_file_is_refused_naming_the_table(tmp_path):
    cfg = tmp_path / "old.toml"
    cfg.write_text("alpha = 5\n")
    res = runner.invoke(app, ["train", "lpgcn", "-c", str(cfg), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert "`alpha` is a setting of protocol lpgcn; put it under [protocol] as `alpha = 5`" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "fedavg"], "unknown protocol 'fedavg'"),
        (["train", "central", "--set", "dim=x"], "dim expects int"),
        (["train", "central", "--set", "n_layer=2"], "unknown key 'n_layer'"),
        (["train", "central", "--dataset", "no-such-data"], "no-such-data"),
        (["train", "central", "--resume", "/nonexistent/run"], "not a run folder"),
    ],
)
def test_user_errors_exit_2_with_a_clear_line(args, message):
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert "Traceback" not in res.output


def test_malformed_dataset_file_names_file_and_line(tmp_path):
    folder = tmp_path / "mydata"
    folder.mkdir()
    (folder / "train.txt").write_text("0 1 2\n1 x 3\n")
    (folder / "test.txt").write_text("0 3\n1 2\n")
    res = runner.invoke(
        app, ["train", "central", "--dataset", str(folder), "--out", str(tmp_path / "r"), "--no-progress"]
    )
    assert res.exit_code == 2
    assert "train.txt:2" in res.output


def test_demo_runs(tmp_path):
    res = runner.invoke(app, ["demo", "--epochs", "2", "--out", str(tmp_path / "demo"), "--no-progress"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    crypto = summary["communication"]["per_client_per_epoch"]["crypto_seconds"]  # real crypto: measured
    assert 0 < crypto["p50"] <= crypto["max"]
    assert "crypto CPU per client (batched, in-process) per epoch" in res.output


@pytest.mark.datasets
def test_datasets_listing_matches_index():
    root = os.environ.get("FEDGRAPHREC_DATA")
    if not root or not Path(root, "gowalla").exists():
        pytest.skip("FEDGRAPHREC_DATA does not point at the shared datasets")
    res = runner.invoke(app, ["datasets", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.output)}
    # figures of ../shared/datasets/INDEX.md
    expected = {
        "gowalla": (29_858, 40_981, 810_128, 217_242),
        "yelp2018": (31_668, 38_048, 1_237_259, 324_147),
        "douban": (3_000, 3_000, 123_202, 13_689),
        "flixster": (3_000, 3_000, 23_556, 2_617),
    }
    for name, (users, items, train, test) in expected.items():
        r = rows[name]
        assert (r["users"], r["items"], r["train"], r["test"]) == (users, items, train, test), name
    assert rows["ml-100k"]["users"] == 942 and rows["ml-100k"]["items"] == 1_408
    # INDEX.md's 35,497 less the 2 repeated pairs the split put in train and held-out (dropped there)
    assert rows["filmtrust"]["train"] + rows["filmtrust"]["valid"] + rows["filmtrust"]["test"] == 35_497 - 2
    assert rows["filmtrust"]["links"] == 1_853
    assert rows["amazon-book"]["status"] == "partial"
    # INDEX.md's 508,485 less the 99 held-out rows of the 22 users / 36 POIs without a training row
    assert rows["weeplaces"]["train"] + rows["weeplaces"]["valid"] + rows["weeplaces"]["test"] == 508_485 - 99


@pytest.mark.parametrize(
    ("protocol", "model"),
    [("lpgcn", "lightgcn"), ("lpgcn", "lightgcn+"), ("gnn4fr", "lightgcn"), ("fedmf", "mf")],
)
def test_train_federated_verified_real_crypto(tmp_path, protocol, model):
    out = tmp_path / "lp"
    res = runner.invoke(
        app,
        [
            "train",
            protocol,
            "--model",
            model,
            *(["--alpha", "3"] if protocol == "lpgcn" else []),
            "--crypto",
            "real",
            "--verify",
            "--epochs",
            "2",
            "--out",
            str(out),
            "--no-progress",
            *TINY,
            "--set",
            "dtype=float64",
            # FedMF's secure sum is in fixed point: its deviation (~1e-10) depends on the tables, so
            # they are the seeded ones here (under real crypto they would be fresh every run)
            *(["--set", "frac_bits=48", "--set", "reproducible=true"] if protocol == "fedmf" else []),
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol"] == protocol and summary["verify_max_deviation"] < 1e-10
    assert summary["communication"]["total_bytes"] > 0
    for name in ("ledger.csv", "ledger.json", "communication.png"):
        assert (out / name).exists(), name
    assert "largest relative parameter deviation" in res.output


ROUNDS = [
    "--set",
    "clients_per_round=30",
    "--set",
    "n_negatives=40",
    "--set",
    "local_steps=2",
]
"""The round settings every round-based protocol has (FedGRec, FedeRank, FCF, FedNCF, FedPerGNN)."""
FEDGREC = ["--set", "K=1", *ROUNDS]


def test_train_fedgrec_reports_dropouts_and_writes_ledger(tmp_path):
    out = tmp_path / "fg"
    res = runner.invoke(
        app,
        [
            "train",
            "fedgrec",
            "--epochs",
            "4",
            "--out",
            str(out),
            "--no-progress",
            *TINY,
            *FEDGREC,
            "--set",
            "dropout_before=0.1",
            "--set",
            "dropout_after=0.1",
            "--set",
            "eval_every=2",
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["protocol"] == "fedgrec"
        and summary["clients_lost"] == 12
        and summary["clients_recovered"] == 12
    )
    assert "dropouts:" in res.output and "12 sampled clients were lost" in res.output
    assert (out / "ledger.csv").read_text().count("secagg-masked-input") == 3  # degrees, warm-up, rounds


def test_fedgrec_below_secagg_threshold_fails_cleanly(tmp_path):
    res = runner.invoke(
        app,
        [
            "train",
            "fedgrec",
            "--epochs",
            "2",
            "--out",
            str(tmp_path / "x"),
            "--no-progress",
            *TINY,
            *FEDGREC,
            "--set",
            "dropout_before=0.6",
        ],
    )
    assert res.exit_code == 2
    assert "secure aggregation aborted" in res.output and "below the threshold 18" in res.output
    assert "Traceback" not in res.output


def test_fedgrec_bad_setting_names_it(tmp_path):
    res = runner.invoke(
        app, ["train", "fedgrec", *TINY, "--set", "aggregation=max", "--out", str(tmp_path / "y")]
    )
    assert res.exit_code != 0 and "aggregation must be one of" in res.output


@pytest.mark.parametrize("protocol", ["federank", "fcf"])
def test_train_federank_and_fcf(tmp_path, protocol):
    out = tmp_path / protocol
    res = runner.invoke(
        app, ["train", protocol, "--epochs", "3", "--out", str(out), "--no-progress", *TINY, *ROUNDS]
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol"] == protocol and summary["communication"]["total_bytes"] > 0


def test_compare_writes_a_mean_std_table(tmp_path):
    out = tmp_path / "cmp"
    res = runner.invoke(
        app,
        [
            "compare",
            "--method",
            "central:model=mf",
            "--method",
            "fedmf:model=mf",
            "--seed",
            "1",
            "--seed",
            "2",
            "--set",
            "epochs=2",
            "--out",
            str(out),
            *TINY,
        ],
    )
    assert res.exit_code == 0, res.output
    rows = json.loads((out / "compare.json").read_text())["rows"]
    assert [r["method"] for r in rows] == ["central:model=mf", "fedmf:model=mf", "popularity", "random"]
    assert rows[0]["runs"] == 2 and rows[0]["recall@5_std"] >= 0
    # FedMF is centralized BPR-MF up to the fixed-point secure sum: the same metrics
    assert abs(rows[0]["recall@5_mean"] - rows[1]["recall@5_mean"]) < 1e-6
    assert rows[0]["bytes_per_client_per_epoch"] == 0 and rows[1]["bytes_per_client_per_epoch"] > 0
    assert "| central:model=mf |" in (out / "compare.md").read_text()
    # the reference rows: same split and masking, popularity deterministic over seeds
    assert rows[2]["runs"] == 2 and rows[2]["recall@5_std"] == 0 and rows[3]["epochs"] == 0


def test_compare_rejects_a_bad_method(tmp_path):
    res = runner.invoke(app, ["compare", "--method", "central:model", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "not key=value" in res.output


def test_train_fedncf(tmp_path):
    out = tmp_path / "fedncf"
    res = runner.invoke(
        app,
        [
            "train",
            "fedncf",
            "--model",
            "ncf",
            "--epochs",
            "3",
            "--out",
            str(out),
            "--no-progress",
            *TINY,
            *ROUNDS,
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol"] == "fedncf" and summary["communication"]["total_bytes"] > 0
    assert 0.0 <= summary["test"]["recall@5"] <= 1.0


def test_audit_report_shows_secure_aggregation_working(tmp_path):
    out = tmp_path / "audit"
    res = runner.invoke(
        app,
        ["audit", "federank", "--rounds", "4", "--out", str(out), *TINY, "--set", "clients_per_round=20",
         "--set", "n_negatives=20", "--set", "local_steps=3", "--set", "lr=0.05"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads((out / "audit.json").read_text())
    up = report["upload_inference"]
    assert up["in_the_clear"]["upload_inference"]["mean_auc"] > 0.9
    assert abs(up["secure_aggregation"]["upload_inference"]["mean_auc"] - 0.5) < 0.1
    assert report["query_intersection"]["mean_recall"] == 1.0
    assert (out / "query_intersection.png").exists() and "| in the clear |" in (out / "audit.md").read_text()


def test_audit_names_protocols_without_attacks(tmp_path):
    res = runner.invoke(app, ["audit", "fedmf", "--out", str(tmp_path / "a"), *TINY])
    assert res.exit_code == 2 and "attacks exist for fedgrec" in res.output


@pytest.mark.parametrize(("protocol", "model"), [("pgcn", "lightgcn+"), ("fedpergnn", "lightgcn")])
def test_train_pgcn_and_fedpergnn(tmp_path, protocol, model):
    out = tmp_path / protocol
    args = ["train", protocol, "--model", model, "--epochs", "2", "--out", str(out), "--no-progress", *TINY]
    res = runner.invoke(app, [*args, *(ROUNDS if protocol == "fedpergnn" else [])])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol"] == protocol and summary["communication"]["total_bytes"] > 0
    assert 0.0 <= summary["test"]["recall@5"] <= 1.0
    cost = summary["communication"]["per_client_per_epoch"]
    assert 0 < cost["total"]["p50"] <= cost["total"]["p99"] <= cost["total"]["max"]
    assert "per client per epoch (mean / p50 / p99 / max): sent" in res.output
    if protocol == "fedpergnn":
        assert summary["randomness"]["noise"] == "seed"  # accounted crypto: reproducible by default


def test_secure_noise_is_reported_and_refused_where_there_is_no_noise(tmp_path):
    args = [
        "train",
        "fedpergnn",
        "--epochs",
        "1",
        "--no-progress",
        *TINY,
        *ROUNDS,
        "--set",
        "secure_noise=true",
    ]
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["randomness"]["noise"] == "csprng"
    res = runner.invoke(
        app, ["train", "lpgcn", *TINY, "--set", "secure_noise=true", "--out", str(tmp_path / "b")]
    )
    assert res.exit_code == 2 and "unknown key 'secure_noise' (protocol lpgcn)" in res.output
    assert not (tmp_path / "b").exists()


def test_pgcn_refuses_the_wrong_backbone(tmp_path):
    args = ["train", "pgcn", "--model", "lightgcn", "--out", str(tmp_path / "x"), "--no-progress", *TINY]
    res = runner.invoke(app, args)
    assert res.exit_code != 0 and "lightgcn+" in res.output
    assert not (tmp_path / "x").exists()  # no half-written run folder


def test_audit_lpgcn_reports_collusion_against_alpha_and_c(tmp_path):
    out = tmp_path / "audit"
    res = runner.invoke(app, ["audit", "lpgcn", "--out", str(out), *TINY])
    assert res.exit_code == 0, res.output
    rows = {(r["alpha"], r["c"]): r for r in json.loads((out / "audit.json").read_text())["collusion"]}
    assert rows[(16, 0)]["mean_auc"] == 0.5  # no client, no S: tokens are opaque
    assert rows[(0, 1)]["mean_held_precision"] == 1.0  # one client with S, no virtual items
    assert rows[(64, 1)]["mean_held_precision"] < rows[(4, 1)]["mean_held_precision"]
    assert (out / "lpgcn_collusion.png").exists()


def test_audit_gnn4fr_reports_what_a_neighbour_learns(tmp_path):
    out = tmp_path / "audit"
    res = runner.invoke(app, ["audit", "gnn4fr", "--out", str(out), *TINY, "--set", "dim=32"])
    assert res.exit_code == 0, res.output
    arms = json.loads((out / "audit.json").read_text())["attack"]
    assert arms["neighbour (holds S)"]["mean_auc"] > 0.7
    assert arms["server (no S)"]["mean_auc"] == 0.5


def _social_folder(root: Path) -> Path:
    """A tiny rating dataset with a social graph and an item graph (FilmTrust/Flixster layout)."""
    import numpy as np

    rng = np.random.default_rng(0)
    folder = root / "tiny-social"
    folder.mkdir()
    rows = [f"{u}\t{i}\t{rng.integers(1, 6)}" for u in range(50) for i in rng.choice(40, 8, replace=False)]
    (folder / "ratings.tsv").write_text("\n".join(rows) + "\n")
    links = {tuple(sorted(p)) for p in rng.integers(0, 50, (90, 2)).tolist() if p[0] != p[1]}
    (folder / "social.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(links)))
    (folder / "item_graph.tsv").write_text("".join(f"{i}\t{(i + 1) % 40}\n" for i in range(40)))
    return folder


def test_audit_p4gcn_and_dgrec_write_reports(tmp_path):
    data = _social_folder(tmp_path)
    out = tmp_path / "p4"
    res = runner.invoke(app, ["audit", "p4gcn", "--dataset", str(data), "--epochs", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    arms = {a["eps"]: a["attacks"] for a in json.loads((out / "audit.json").read_text())["arms"]}
    assert arms[None]["backward"]["mean_auc"] > 0.8  # no noise: the links show
    assert abs(arms[1.0]["forward"]["mean_auc"] - 0.5) < 0.15
    assert (out / "p4gcn_link.png").exists() and "oracle W1" in (out / "audit.md").read_text()
    out = tmp_path / "dg"
    res = runner.invoke(app, ["audit", "dgrec", "--dataset", str(data), "--rounds", "3", "--out", str(out)])
    assert res.exit_code == 0, res.output
    arms = json.loads((out / "audit.json").read_text())["arms"]
    assert arms["plain"]["mean_auc"] > arms["one_bit"]["mean_auc"]
    assert (out / "dgrec_neighbour.png").exists()


def test_audit_p4gcn_needs_a_dataset(tmp_path):
    res = runner.invoke(app, ["audit", "p4gcn", "--out", str(tmp_path / "a")])
    assert res.exit_code == 2 and "--dataset is required" in res.output


@pytest.mark.parametrize(
    ("protocol", "extra"),
    [
        ("p4gcn", ["--set", "method=p4gcn", "--set", "dim=4", "--set", "batch=64", "--set", "eps=5"]),
        ("dgrec", ["--variant", "dmf", "--set", "centres_per_epoch=10"]),
    ],
)
def test_train_p4gcn_and_dgrec_write_standard_run_folders(tmp_path, protocol, extra):
    data = _social_folder(tmp_path)
    out = tmp_path / protocol
    args = [
        "train",
        protocol,
        "--dataset",
        str(data),
        "--epochs",
        "2",
        "--seed",
        "1",
        "--out",
        str(out),
        *extra,
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert {p.name for p in out.iterdir()} >= {"config.toml", "metrics.jsonl", "summary.json", "curves.png"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol"] == protocol and summary["seed"] == 1 and summary["test"]
    assert len((out / "metrics.jsonl").read_text().splitlines()) >= 1
    if protocol == "p4gcn":
        assert summary["privacy"]["dp_guarantee"] is True and summary["privacy"]["epsilon_spent"] <= 5 + 1e-9
    else:
        assert summary["variant"] == "dmf" and 'variant = "dmf"' in (out / "config.toml").read_text()


def test_train_dgrec_reaches_every_setting_by_toml_and_set_and_curves_every_epoch(tmp_path):
    """DGREC settings from TOML and ``--set`` (the later wins); the run folder has a per-epoch curve."""
    data = _social_folder(tmp_path)
    cfg = tmp_path / "dgrec.toml"
    cfg.write_text('[protocol]\ndelta = 0.2\nbeta = 2.0\nhidden = [8, 4]\nloss_scale = "mean"\nd = 8\n')
    out = tmp_path / "run"
    args = [
        "train",
        "dgrec",
        "--dataset",
        str(data),
        "--config",
        str(cfg),
        "--epochs",
        "2",
        "--out",
        str(out),
    ]
    sets = ["lr=1.0", "hops=2", "fanout=2", "n_interests=3", "d_interest=4", "centres_per_epoch=5", "batch=4"]
    res = runner.invoke(app, [*args, *(x for kv in sets for x in ("--set", kv)), "--set", "loss_scale=eq2"])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    s = summary["settings"]
    assert (s["delta"], s["beta"], s["lr"], s["hops"], s["fanout"], s["batch"]) == (0.2, 2.0, 1.0, 2, 2, 4)
    m = s["model"]
    assert (m["d"], m["n_interests"], m["d_interest"], m["hidden"], m["loss_scale"]) == (
        8,
        3,
        4,
        [8, 4],
        "eq2",
    )
    assert summary["noise_source"] == "seeded" and "not a privacy guarantee" in summary["noise_note"]
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["epoch"] for x in lines] == [1, 2] and all("recall@20" in x["test"] for x in lines)
    bad = runner.invoke(app, ["train", "dgrec", "--dataset", str(data), "--set", "loss_scale=sum"])
    assert bad.exit_code == 2 and "loss_scale must be one of" in bad.output


def test_train_p4gcn_names_a_bad_setting_and_writes_nothing(tmp_path):
    data = _social_folder(tmp_path)
    out = tmp_path / "x"
    res = runner.invoke(
        app, ["train", "p4gcn", "--dataset", str(data), "--set", "methd=pmf", "--out", str(out)]
    )
    assert res.exit_code == 2 and "unknown key 'methd' (protocol p4gcn); close matches: method" in res.output
    res = runner.invoke(
        app, ["train", "p4gcn", "--dataset", str(data), "--set", "method=svd", "--out", str(out)]
    )
    assert res.exit_code == 2 and "method must be one of" in res.output
    assert not out.exists()


def test_train_p4gcn_refuses_options_that_do_not_apply(tmp_path):
    res = runner.invoke(app, ["train", "p4gcn", "--alpha", "3", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "alpha" in res.output and "p4gcn" in res.output
    assert not (tmp_path / "x").exists()


def test_train_p4gcn_selects_on_validation_rmse_and_resumes_through_the_trainer(tmp_path):
    """P4GCN's run folder is the Trainer's: RMSE selection, ledger, checkpoint, and an interrupted run
    resumes to the same run (extending it beyond its planned epochs is refused: the DP noise was
    calibrated to the plan)."""
    from fedgraphrec.training.loading import load_config
    from fedgraphrec.training.trainer import Trainer

    data = _social_folder(tmp_path)
    common = ["train", "p4gcn", "--dataset", str(data), "--set", "dim=4", "--set", "batch=64"]
    whole = tmp_path / "whole"
    res = runner.invoke(app, [*common, "--epochs", "2", "--out", str(whole)])
    assert res.exit_code == 0, res.output
    summary = json.loads((whole / "summary.json").read_text())
    assert summary["selection"] == "valid" and set(summary["test"]) == {"rmse", "mae"}
    assert summary["privacy"]["dp_guarantee"] and (whole / "ledger.csv").exists()
    cfg = load_config(None, ["dim=4", "batch=64", "epochs=2"], protocol="p4gcn", dataset=str(data))

    def crash(epoch: int) -> None:
        if epoch == 1:
            raise KeyboardInterrupt

    part = tmp_path / "part"
    with pytest.raises(KeyboardInterrupt):
        Trainer(cfg, part, progress=False, on_epoch_end=crash).fit()
    resumed = Trainer(cfg, part, progress=False, resume=True).fit().summary
    assert resumed["last_epoch_test"] == summary["last_epoch_test"] and resumed["epochs_run"] == 2
    extend = runner.invoke(app, ["train", "p4gcn", "--resume", str(part), "--epochs", "3"])
    assert extend.exit_code == 2 and "planned iterations" in extend.output


def test_train_dgrec_resumes_through_the_trainer_to_the_same_run(tmp_path):
    """DGREC's run folder is the Trainer's: a checkpoint after epoch 1 resumes to the 2-epoch run."""
    data = _social_folder(tmp_path)
    sets = ["centres_per_epoch=5", "hops=1", "d=4", "n_interests=2", "d_interest=3", "batch=4"]
    common = ["train", "dgrec", "--dataset", str(data), *(x for kv in sets for x in ("--set", kv))]
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert runner.invoke(app, [*common, "--epochs", "2", "--out", str(whole)]).exit_code == 0
    assert runner.invoke(app, [*common, "--epochs", "1", "--out", str(part)]).exit_code == 0
    assert (part / "checkpoint.pt").exists() and (part / "config.toml").exists()
    res = runner.invoke(app, ["train", "dgrec", "--resume", str(part), "--epochs", "2"])
    assert res.exit_code == 0, res.output
    first = json.loads((whole / "summary.json").read_text())
    resumed = json.loads((part / "summary.json").read_text())
    assert resumed["epochs_run"] == 2 and resumed["test"] == first["test"]
    assert resumed["ledger_bytes"] == first["ledger_bytes"] > 0
