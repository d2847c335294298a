import pytest

from fedgraphrec.training import ConfigError, TrainConfig, load_config


def test_defaults_validate():
    TrainConfig().validate()


def test_toml_then_overrides(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('model = "mf"\ndim = 16\nlr = 1\n[dataset_options]\nthreshold = 4.0\n')
    cfg = load_config(p, ["dim=8", "ks=[5, 20]", "metric=ndcg@5", "dataset_options.split=u2"])
    assert cfg.model == "mf" and cfg.dim == 8 and cfg.lr == 1.0 and isinstance(cfg.lr, float)
    assert cfg.ks == [5, 20] and cfg.metric == "ndcg@5"
    assert cfg.dataset_options == {"threshold": 4.0, "split": "u2"}


def test_unknown_key_names_file_and_line(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('model = "mf"\n\nlayers = 3\n')
    with pytest.raises(ConfigError, match=r"c\.toml:3: unknown key 'layers'"):
        load_config(p)


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


def test_malformed_toml_and_missing_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("dim = = 3\n")
    with pytest.raises(ConfigError, match=r"bad\.toml"):
        load_config(p)
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.toml")


def test_device_is_checked():
    with pytest.raises(ConfigError, match="only fedgrec runs off the CPU"):
        load_config(None, ["device=cuda"])
    with pytest.raises(ConfigError, match="'cpu' or 'cuda"):
        load_config(None, ["protocol=fedgrec", "device=tpu"])


def test_fedgrec_K_alias_and_settings():
    cfg = load_config(None, ["protocol=fedgrec", "K=3", "aggregation=last"])
    assert cfg.n_layers == 3 and cfg.fedgrec_settings().K == 3
    with pytest.raises(ConfigError, match="item_agg must be one of"):
        load_config(None, ["protocol=fedgrec", "item_agg=max"])


def test_federank_and_fcf_are_fedgrec_with_k0():
    assert load_config(None, ["protocol=federank"]).fedgrec_settings().K == 0
    fcf = load_config(None, ["protocol=fcf", "confidence=2.0"]).fedgrec_settings()
    assert fcf.K == 0 and fcf.loss == "mse" and fcf.confidence == 2.0


def test_the_backbone_follows_the_protocol_unless_given():
    """`train fedmf` and `train pgcn` need no --model: an unset model is the protocol's own backbone."""
    from fedgraphrec.training import load_config
    from fedgraphrec.training.config import TrainConfig

    assert load_config(None, [], protocol="fedmf").model == "mf"
    assert load_config(None, [], protocol="pgcn").model == "lightgcn+"
    assert load_config(None, [], protocol="fedncf").model == "ncf"
    assert load_config(None, [], protocol="fedgrec").model == "lightgcn"
    assert load_config(None, ["model='mf'"], protocol="federank").model == "mf"  # given: kept
    assert TrainConfig(protocol="fedmf").model == "mf" and TrainConfig().model == "lightgcn"
