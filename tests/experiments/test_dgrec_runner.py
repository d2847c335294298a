"""DGREC runner settings: a variant's own values can be overridden."""

from __future__ import annotations

from fedgraphrec.experiments.dgrec import settings_for


def test_dgrec_settings_for_lets_an_override_replace_a_variant_value() -> None:
    """``dmf`` fixes ``hops=1``; asking for ``hops=4`` used to raise (two values for one keyword)."""
    s = settings_for("dmf", hops=4, lr=2.0)
    assert (s.hops, s.lr, s.sharing, s.model.kind) == (4, 2.0, "plain", "mf")
    assert settings_for("dmf").hops == 1
