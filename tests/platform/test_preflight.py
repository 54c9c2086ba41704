"""The pre-flight label check's suggestion list (:func:`contrastlab.platform.preflight.unsupervised_losses`)."""

from __future__ import annotations

import pytest

import contrastlab as cl
from contrastlab.platform.errors import IncompatibleError
from contrastlab.platform.preflight import preflight, unsupervised_losses


def test_unsupervised_losses_lists_the_losses_without_labels_minus_the_refused_ones() -> None:
    losses = cl.registry("loss")
    everything = unsupervised_losses()
    assert everything == [n for n in losses.names() if not losses.get(n).label_kinds]
    assert {"infonce", "dcl", "debiased_pos"} <= set(everything) and "supcon" not in everything
    assert unsupervised_losses({"debiased_pos": "why"}) == [n for n in everything if n != "debiased_pos"]


class _Tiny(cl.TaskPlugin):
    """A plugin that builds only the MLP encoder and whose batches carry class labels."""

    name = "tiny"
    encoders = frozenset({"mlp", "small_cnn"})

    def label_kinds(self, config: cl.TaskConfig) -> frozenset[str]:
        return frozenset({"class"})


class _Unlabelled(cl.TaskPlugin):
    """A plugin with no labels that builds any encoder."""

    name = "unlabelled"


def _config(loss: str = "infonce", encoder: str = "mlp") -> cl.TaskConfig:
    return cl.TaskConfig(loss={"name": loss}, encoder={"name": encoder})


def test_an_encoder_the_plugin_cannot_build_is_refused_in_one_line() -> None:
    with pytest.raises(IncompatibleError) as info:
        preflight(_Tiny(), _config(encoder="gin"))
    assert str(info.value) == "plugin 'tiny' cannot use encoder 'gin'; supported: mlp, small_cnn"
    preflight(_Tiny(), _config(encoder="small_cnn"))
    preflight(_Unlabelled(), _config(encoder="gin"))  # no list: any registered encoder


def test_a_label_aware_loss_needs_a_label_kind_the_plugin_provides() -> None:
    preflight(_Tiny(), _config("unbiased"))  # class labels: provided
    preflight(_Tiny(), _config("supcon"))  # class or pu: class is enough
    with pytest.raises(IncompatibleError) as info:
        preflight(_Tiny(), _config("punce"))
    assert str(info.value).startswith("loss 'punce' needs pu labels, but plugin 'tiny' provides class with this "
                                      "config; choose an unsupervised loss (bcl, dcl, debiased_pos, hcl, infonce")
    # new-user trial: the label-aware losses the plugin can feed were not named
    assert str(info.value).endswith("), or one that uses its class labels (supcon, unbiased)"), str(info.value)
    with pytest.raises(IncompatibleError) as info:
        preflight(_Unlabelled(), _config("supcon"))
    assert str(info.value).startswith("loss 'supcon' needs class or pu labels, but plugin 'unlabelled' provides no "
                                      "labels with this config; choose an unsupervised loss (")
    assert str(info.value).endswith(")") and "or one that uses" not in str(info.value)  # no labels: none to name
