"""The functional forms exported by ``contrastlab.losses`` (``dcl(batch, tau_plus=…)``, …) behave like the modules:
same hyperparameter checks, same values, and computed in float32 even under autocast."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl
import contrastlab.losses as L
from contrastlab import ConfigError

FUNCTIONAL = {
    "infonce": {},
    "dcl": {"tau_plus": 0.2},
    "hcl": {"tau_plus": 0.2, "beta": 0.7},
    "bcl": {"tau_plus": 0.2, "alpha": 0.8, "beta": 0.6},
    "pucl": {"alpha": 0.2, "c": 0.3},
    "punce": {"prior": 0.3},
    "debiased_pos": {"tau_plus": 0.2, "aggregation": "inner"},
    "supcon": {"aggregation": "in"},
    "unbiased": {"fill_to_n": False},
}


def _batch(name, ref, t=0.5, B=12):
    kinds = cl.loss_label_kinds(name)
    labels = None
    if kinds == frozenset({"pu"}):
        labels = ref.pu_labels(B, n_labeled=5)
    elif kinds:
        labels = ref.class_labels(B, classes=2)
    return ref.multi_view_batch(B=B, V=3, t=t, labels=labels)


@pytest.mark.parametrize(
    ("name", "hp", "param"),
    [
        ("dcl", {"tau_plus": 1.0}, "tau_plus"),
        ("dcl", {"tau_plus": -0.1}, "tau_plus"),
        ("hcl", {"beta": -2.0}, "beta"),
        ("bcl", {"alpha": 0.2}, "alpha"),
        ("bcl", {"beta": 1.5}, "beta"),
        ("pucl", {"c": 1.5}, "c"),
        ("pucl", {"alpha": 1.0}, "alpha"),
        ("punce", {"prior": 3.0}, "prior"),
        ("debiased_pos", {"tau_plus": 0.0}, "tau_plus"),
        ("debiased_pos", {"aggregation": "sum"}, "aggregation"),
        ("supcon", {"aggregation": "outer"}, "aggregation"),
        ("unbiased", {"fill_to_n": 0.5}, "fill_to_n"),
        ("infonce", {"reduction": "avg"}, "reduction"),
    ],
)
def test_functional_forms_refuse_out_of_range_hyperparameters(name, hp, param, ref):
    with pytest.raises(ConfigError) as err:
        getattr(L, name)(_batch(name, ref), **hp)
    assert param in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("name", list(FUNCTIONAL))
def test_functional_forms_equal_the_modules(name, reduction, ref):
    b = _batch(name, ref)
    hp = FUNCTIONAL[name]
    torch.testing.assert_close(getattr(L, name)(b, reduction=reduction, **hp),
                               cl.make_loss(name, reduction=reduction, **hp)(b), rtol=0, atol=0)


@pytest.mark.parametrize("name", list(FUNCTIONAL))
def test_functional_forms_compute_in_float32_under_autocast(name, ref):
    """Spec §8.1: losses are computed in fp32 even under AMP (CPU autocast runs linalg.vecdot in bf16)."""
    b = _batch(name, ref, t=0.05, B=24)
    b = type(b)(**{**b.__dict__, "pos_logits": b.pos_logits.float(), "neg_logits": b.neg_logits.float()})
    hp = FUNCTIONAL[name]
    want = getattr(L, name)(b, reduction="none", **hp)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = getattr(L, name)(b, reduction="none", **hp)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("loss_cls", L.LOSSES, ids=lambda c: c.name)
def test_functional_defaults_equal_the_class_hparam_defaults(loss_cls):
    """``pucl(batch)`` must be ``PUCLLoss()(batch)``: every keyword default of a functional form is its class's
    documented HParam default (and the default reduction is ``mean``), and it has no hyperparameter the class
    lacks."""
    import inspect

    params = inspect.signature(getattr(L, loss_cls.name)).parameters
    hp_defaults = {hp.name: hp.default for hp in loss_cls.hyperparameters}
    fn_defaults = {k: p.default for k, p in params.items() if k not in ("batch", "reduction")}
    assert fn_defaults == hp_defaults
    assert params["reduction"].default == "mean"


@pytest.mark.parametrize("name", list(FUNCTIONAL))
def test_functional_forms_without_hyperparameters_equal_default_modules(name, ref):
    """Calling a functional form with no keyword gives the default module's value (defaults agree in effect)."""
    b = _batch(name, ref)
    torch.testing.assert_close(getattr(L, name)(b), cl.make_loss(name)(b), rtol=0, atol=0)
