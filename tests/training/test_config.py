import dataclasses

import pytest

from fedgraphrec.protocols.baselines.fedpergnn.settings import FedPerGNNSettings
from fedgraphrec.protocols.central import CentralSettings
from fedgraphrec.protocols.fedgrec.settings import FCFSettings, FedeRankSettings, FedGRecSettings
from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.protocols.registry import REGISTRY, ProtocolEntry
from fedgraphrec.protocols.settings import settings_fields
from fedgraphrec.training.config import ConfigError, EvalSettings, TrainConfig
from fedgraphrec.training.loading import config_from_dict, load_config
from fedgraphrec.training.rundir import RunDir


def test_defaults_validate():
    TrainConfig().validate()
    assert isinstance(TrainConfig().settings, CentralSettings)


def test_train_config_holds_only_run_level_fields():
    assert len(dataclasses.fields(TrainConfig)) <= 15


def test_toml_tables_then_overrides(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(
        'epochs = 3\n[eval]\nks = [20]\n[protocol]\nname = "central"\nmodel = "mf"\ndim = 16\nlr = 1\n'
        "[dataset_options]\nthreshold = 4.0\n"
    )
    cfg = load_config(p, ["dim=8", "eval.ks=[5, 20]", "metric=ndcg@5", "dataset_options.split=u2"])
    s = cfg.settings
    assert isinstance(s, CentralSettings)
    assert s.model == "mf" and s.dim == 8 and s.lr == 1.0 and isinstance(s.lr, float)
    assert cfg.eval.ks == [5, 20] and cfg.eval.metric == "ndcg@5" and cfg.epochs == 3
    assert cfg.dataset_options == {"threshold": 4.0, "split": "u2"}
    assert (
        load_config(None, ["protocol.alpha=5"], protocol="lpgcn").settings
        == load_config(None, ["alpha=5"], protocol="lpgcn").settings
    )


def test_a_flat_protocol_key_in_a_file_names_the_table(tmp_path):
    p = tmp_path / "config.toml"
    p.write_text('protocol = "lpgcn"\nalpha = 5\n')
    with pytest.raises(ConfigError, match=r"config\.toml: `alpha` is a setting of protocol lpgcn; put it under "
                       r"\[protocol\] as `alpha = 5`"):  # fmt: skip
        load_config(p)
    p.write_text("ks = [5, 20]\n")
    with pytest.raises(ConfigError, match=r"put it under \[eval\] as `ks = \[5, 20\]`"):
        load_config(p)


def test_unknown_key_names_file_and_line_and_close_matches(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[protocol]\nname = "central"\nmodel = "mf"\n\nlayers = 3\n')
    with pytest.raises(ConfigError, match=r"c\.toml:5: 'layers' is not a setting of protocol central; close "
                       r"matches: n_layers"):  # fmt: skip
        load_config(p)
    with pytest.raises(ConfigError, match=r"unknown key 'alpah' \(protocol lpgcn\); close matches: alpha"):
        load_config(None, ["alpah=3"], protocol="lpgcn")


def test_a_setting_of_another_protocol_is_refused():
    with pytest.raises(ConfigError, match="unknown key 'alpha' \\(protocol fedmf\\)"):
        load_config(None, ["alpha=3"], protocol="fedmf")
    with pytest.raises(ConfigError, match="'batch_size' is not a setting of protocol fedgrec"):
        load_config(None, ["protocol.batch_size=3"], protocol="fedgrec")


def test_shared_overrides_skip_what_the_protocol_lacks():
    """A base for several protocols (compare, reproduce): keys another protocol has are skipped."""
    cfg = load_config(None, [], shared=["batch_size=64", "clients_per_round=9", "dim=8"], protocol="fedgrec")
    assert isinstance(cfg.settings, FedGRecSettings)
    assert cfg.settings.clients_per_round == 9 and cfg.settings.dim == 8
    with pytest.raises(ConfigError, match="unknown key 'bogus'"):
        load_config(None, [], shared=["bogus=1"], protocol="fedgrec")


def test_wrong_type_names_the_set_argument():
    with pytest.raises(ConfigError, match=r"--set dim=abc: dim expects int"):
        load_config(None, ["dim=abc"])


def test_out_of_range_and_bad_choice():
    with pytest.raises(ConfigError, match="lr must be positive"):
        load_config(None, ["lr=0"])
    with pytest.raises(ConfigError, match="model must be one of"):
        load_config(None, ["model=gcmc"])
    with pytest.raises(ConfigError, match="needs K=10"):
        load_config(None, ["metric=recall@10"])


def test_rating_metrics_only_for_rating_protocols(monkeypatch):
    with pytest.raises(ConfigError, match="metric must look like 'recall@20'"):
        load_config(None, ["metric=rmse"])
    monkeypatch.setitem(REGISTRY, "toy-rating", ProtocolEntry("toy-rating", CentralSettings, "rating", "toy"))
    assert load_config(None, ["metric=rmse"], protocol="toy-rating").eval.metric == "rmse"
    with pytest.raises(ConfigError, match="rmse or mae"):
        load_config(None, ["metric=recall@20"], protocol="toy-rating")


def test_malformed_toml_and_missing_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("dim = = 3\n")
    with pytest.raises(ConfigError, match=r"bad\.toml"):
        load_config(p)
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.toml")


def test_device_is_checked():
    with pytest.raises(ConfigError, match="unknown key 'device'"):
        load_config(None, ["device=cuda"])
    with pytest.raises(ConfigError, match="'cpu' or 'cuda"):
        load_config(None, ["protocol=fedgrec", "device=tpu"])


def test_fedgrec_K_alias_and_settings():
    cfg = load_config(None, ["protocol=fedgrec", "n_layers=3", "aggregation=last"])
    assert isinstance(cfg.settings, FedGRecSettings) and cfg.settings.K == 3
    assert load_config(None, ["K=1"], protocol="fedgrec").settings.K == 1  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="item_agg must be one of"):
        load_config(None, ["protocol=fedgrec", "item_agg=max"])


def test_federank_and_fcf_are_fedgrec_with_k0():
    federank = load_config(None, ["protocol=federank"]).settings
    assert isinstance(federank, FedeRankSettings) and federank.K == 0 and federank.loss == "bpr"
    fcf = load_config(None, ["protocol=fcf", "confidence=2.0"]).settings
    assert isinstance(fcf, FCFSettings) and fcf.K == 0 and fcf.loss == "mse" and fcf.confidence == 2.0
    with pytest.raises(ConfigError, match="K = 0"):
        load_config(None, ["K=2"], protocol="federank")


def test_the_backbone_is_the_protocols_own_default():
    """`train fedmf` and `train pgcn` need no --model: each protocol's settings name its backbone."""
    model = {p: getattr(load_config(None, [], protocol=p).settings, "model", None) for p in REGISTRY}
    assert model["fedmf"] == "mf" and model["pgcn"] == "lightgcn+" and model["fedncf"] == "ncf"
    assert model["fedgrec"] == "lightgcn" and model["central"] == "lightgcn"
    assert load_config(None, ["model='mf'"], protocol="federank").settings.model == "mf"
    with pytest.raises(ConfigError, match="model must be 'mf'"):
        load_config(None, ["model=lightgcn"], protocol="fedmf")


def test_seed_has_one_default_and_the_settings_follow_the_run():
    cfg = load_config(None, ["seed=7", "crypto=real"], protocol="fedpergnn")
    assert TrainConfig().seed == 2020 and TrainConfig().settings.seed == 2020  # type: ignore[union-attr]
    assert cfg.settings.seed == 7 and cfg.settings.crypto == "real"  # type: ignore[union-attr]
    resolved = cfg.program_settings()
    assert isinstance(resolved, FedPerGNNSettings) and resolved.secure_noise and resolved.secure_cover
    seeded = load_config(base=cfg, reproducible=True).program_settings()
    assert not seeded.secure_noise and not seeded.secure_cover
    assert {f.name for f in settings_fields(FedPerGNNSettings)}.isdisjoint({"seed", "crypto", "reproducible"})


@pytest.mark.parametrize("protocol", list(REGISTRY))
def test_the_run_folder_config_loads_back_identically(tmp_path, protocol):
    cfg = load_config(None, ["seed=5", "ks=[5, 20]", "epochs=3"], protocol=protocol)
    run = RunDir(tmp_path / protocol)
    run.create(cfg)
    back = run.load_config()
    assert back == cfg and back.to_dict() == cfg.to_dict()
    assert config_from_dict(cfg.to_dict()) == cfg
    text = run.config_path.read_text()
    assert "[protocol]" in text and f'name = "{protocol}"' in text and "[eval]" in text


def test_lpgcn_settings_round_trip_with_a_hiding_override(tmp_path):
    cfg = load_config(None, ["alpha=3", "secure_virtual_items=false", "model=lightgcn+"], protocol="lpgcn")
    assert isinstance(cfg.settings, LPGCNSettings) and cfg.settings.secure_virtual_items is False
    RunDir(tmp_path).create(cfg)
    assert RunDir(tmp_path).load_config() == cfg
    assert load_config(None, [], protocol="lpgcn").to_dict()["protocol"].get("secure_virtual_items") is None


def test_eval_settings_are_their_own_table():
    assert {f.name for f in dataclasses.fields(EvalSettings)} == {
        "ks", "metric", "select", "patience", "eval_every", "eval_initial", "valid_fraction", "log_every",
        "device_profile",
    }  # fmt: skip
