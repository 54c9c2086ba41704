"""The registries: near-miss suggestions of unknown-name errors, hyperparameter binding and range checks, `platform
list --json` fields."""

from __future__ import annotations

from contrastlab.platform.registry import suggest, unknown_name_message


def test_a_name_in_the_wrong_case_gets_the_right_one_suggested() -> None:
    """`--loss DCL` listed the valid names but suggested none."""
    assert suggest("DCL", ["dcl", "hcl", "infonce"]) == " Did you mean 'dcl'?"
    assert unknown_name_message("plugin", "Graph", ["curl", "graph"]).endswith("Did you mean 'graph'?")
    assert suggest("infonse", ["dcl", "infonce"]) == " Did you mean 'infonce'?"
    assert suggest("zzz", ["dcl", "infonce"]) == ""


def test_int_in_accepts_integers_in_the_closed_range_only() -> None:
    """``int_in(lo, hi)`` guards integer hyperparameters (e.g. a queue size): booleans, floats and the neighbours of
    the bounds are refused."""
    from contrastlab.platform.registry import int_in

    check = int_in(1, 10)
    assert [check(v) for v in (1, 5, 10)] == [True, True, True]
    assert [check(v) for v in (0, 11, 2.5, True, "5", None)] == [False] * 6


def test_a_factory_with_var_keywords_accepts_any_extra_argument() -> None:
    """``Component.create`` passes extra keywords (``in_channels``) to a factory; one that takes ``**kwargs``
    accepts any, one without refuses the unknown ones by name."""
    import pytest

    from contrastlab.platform.errors import UnknownNameError
    from contrastlab.platform.registry import Component, HParam

    def open_factory(width: int = 1, **kwargs: object) -> dict:
        return {"width": width, **kwargs}

    def closed_factory(width: int = 1, in_channels: int = 3) -> dict:
        return {"width": width, "in_channels": in_channels}

    hp = (HParam("width", 1, "width"),)
    assert Component("encoder", "o", open_factory, "p", "d", hp).create(width=2, anything=5) == {"width": 2,
                                                                                                   "anything": 5}
    closed = Component("encoder", "c", closed_factory, "p", "d", hp)
    assert closed.create(in_channels=1) == {"width": 1, "in_channels": 1}
    with pytest.raises(UnknownNameError, match="has no hyperparameter 'anything'"):
        closed.create(anything=5)


def test_list_json_names_label_kinds_for_losses_and_accepts_for_samplers_only() -> None:
    """``platform list --json``: a loss carries ``label_kinds``, a sampler ``accepts`` (in the contract's order),
    an encoder neither."""
    from contrastlab.platform.plugins import registry
    from contrastlab.platform.sampler_contract import SAMPLER_INPUTS

    loss = registry("loss").get("dcl").as_dict()
    assert loss["label_kinds"] == sorted(registry("loss").get("dcl").label_kinds) and "accepts" not in loss
    sampler = registry("sampler").get("two_view")
    assert sampler.as_dict()["accepts"] == [k for k in SAMPLER_INPUTS if k in sampler.accepts] != []
    assert "label_kinds" not in sampler.as_dict()
    encoder = registry("encoder").get("gin").as_dict()
    assert "label_kinds" not in encoder and "accepts" not in encoder


def test_a_boolean_hyperparameter_reads_yes_no_words_and_0_1_only() -> None:
    """A recipe passes ``false`` as text: it must bind as False (``bool("false")`` is True); 2 or 2.5 is no yes/no.
    A check that cannot compare the value (``"abc" > 0``) refuses it instead of letting it through."""
    import pytest

    from contrastlab.platform.errors import ConfigError
    from contrastlab.platform.registry import HParam, bind_hparams

    flag = (HParam("flag", True, "a switch"),)
    for text, value in (("false", False), (" Off", False), ("0", False), ("no", False), ("TRUE", True), ("on", True),
                        ("1", True), ("yes", True), (0, False), (1, True), (False, False)):
        assert bind_hparams(flag, {"flag": text}, "loss 'x'") == {"flag": value}, text
    for bad in ("maybe", 2, 2.5):
        with pytest.raises(ConfigError, match="is not a valid bool"):
            bind_hparams(flag, {"flag": bad}, "loss 'x'")
    positive = HParam("t", 0.5, "temperature", range="(0, inf)", check=lambda v: v > 0)
    with pytest.raises(ConfigError, match=r"t=\[1\] is out of range; valid range: \(0, inf\)"):
        positive.validate([1], "sampler 'x'")
