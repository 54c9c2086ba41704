"""Bad input: clear one-line errors naming the parameter and its valid range; labels policy."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl
from contrastlab import ConfigError, ContrastiveBatch, IncompatibleError, UnknownNameError


@pytest.mark.parametrize(
    ("name", "hp", "param", "range_"),
    [
        ("dcl", {"tau_plus": 1.0}, "tau_plus", "[0, 1)"),
        ("dcl", {"tau_plus": -0.1}, "tau_plus", "[0, 1)"),
        ("hcl", {"tau_plus": 1.5}, "tau_plus", "[0, 1)"),
        ("hcl", {"beta": -1.0}, "beta", "[0, inf)"),
        ("bcl", {"tau_plus": 1.0}, "tau_plus", "[0, 1)"),
        ("bcl", {"alpha": 0.4}, "alpha", "[0.5, 1]"),
        ("bcl", {"alpha": 1.1}, "alpha", "[0.5, 1]"),
        ("bcl", {"beta": 0.49}, "beta", "[0.5, 1]"),
        ("bcl", {"beta": 2.0}, "beta", "[0.5, 1]"),
        ("pucl", {"alpha": 1.0}, "alpha", "[0, 1)"),
        ("pucl", {"alpha": -0.2}, "alpha", "[0, 1)"),
        ("pucl", {"c": 1.5}, "c", "[0, 1]"),
        ("pucl", {"c": -0.01}, "c", "[0, 1]"),
        ("punce", {"prior": 0.0}, "prior", "(0, 1)"),
        ("punce", {"prior": 1.0}, "prior", "(0, 1)"),
        ("debiased_pos", {"tau_plus": 1.0}, "tau_plus", "(0, 1)"),
        ("debiased_pos", {"tau_plus": 0.0}, "tau_plus", "(0, 1)"),
        ("debiased_pos", {"aggregation": "sum"}, "aggregation", "outer | inner"),
        ("supcon", {"aggregation": "outer"}, "aggregation", "out | in"),
        ("unbiased", {"fill_to_n": "yes please"}, "fill_to_n", "true | false"),
        ("unbiased", {"fill_to_n": 0.5}, "fill_to_n", "true | false"),  # bool(0.5) would be True
        ("hcl", {"detach_weights": 2.5}, "detach_weights", "true | false"),
    ],
)
def test_out_of_range_hyperparameters(name, hp, param, range_):
    for make in (lambda: cl.make_loss(name, **hp), lambda: type(cl.make_loss(name))(**hp)):
        with pytest.raises(ConfigError) as err:
            make()
        msg = str(err.value)
        assert param in msg and (range_ in msg or "not a valid bool" in msg) and "\n" not in msg


def test_unknown_hyperparameter_lists_valid_ones():
    with pytest.raises(UnknownNameError, match="tau_plus"):
        cl.make_loss("dcl", tau=0.1)
    with pytest.raises(UnknownNameError, match="tau_plus"):
        type(cl.make_loss("dcl"))(tau=0.1)
    with pytest.raises(UnknownNameError, match="temperature"):
        cl.make_sampler("two_view", temp=0.1)


def test_bad_reduction():
    with pytest.raises(ConfigError, match="reduction"):
        cl.make_loss("infonce", reduction="avg")


@pytest.mark.parametrize(
    ("sampler", "hp", "param"),
    [
        ("two_view", {"temperature": 0.0}, "temperature"),
        ("two_view", {"temperature": -0.5}, "temperature"),
        ("multi_view", {"temperature": 0.0}, "temperature"),
        ("query_key", {"temperature": -1.0}, "temperature"),
        ("query_key", {"similarity": "dot"}, "similarity"),
        ("queue", {"temperature": 0.0}, "temperature"),
        ("queue", {"size": 0}, "size"),
    ],
)
def test_bad_sampler_hyperparameters(sampler, hp, param):
    with pytest.raises(ConfigError) as err:
        cl.make_sampler(sampler, **hp)
    assert param in str(err.value)


def test_bad_batch_temperature():
    b = ContrastiveBatch(torch.zeros(2, 1), torch.zeros(2, 3), temperature=0.0)
    with pytest.raises(ConfigError, match=r"temperature.*\(0, inf\)"):
        cl.make_loss("dcl")(b)


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        (dict(pos_logits=torch.zeros(4), neg_logits=torch.zeros(4, 3)), "pos_logits"),
        (dict(pos_logits=torch.zeros(4, 0), neg_logits=torch.zeros(4, 3)), "pos_logits"),
        (dict(pos_logits=torch.zeros(4, 1, dtype=torch.long), neg_logits=torch.zeros(4, 3)), "pos_logits"),
        (dict(pos_logits=torch.zeros(4, 1), neg_logits=torch.zeros(5, 3)), "neg_logits"),
        (dict(pos_logits=torch.zeros(4, 1), neg_logits=torch.zeros(4, 3, 1)), "neg_logits"),
        (dict(pos_logits=torch.zeros(4, 1), neg_logits=torch.zeros(4, 3), neg_mask=torch.ones(4, 3)), "neg_mask"),
        (dict(pos_logits=torch.zeros(4, 1), neg_logits=torch.zeros(4, 3), neg_mask=torch.ones(4, 2).bool()),
         "neg_mask"),
        (dict(pos_logits=torch.zeros(4, 1), neg_logits=torch.zeros(4, 3), anchor_labels=torch.zeros(4),
              neg_labels=torch.zeros(4, 3, dtype=torch.long)), "anchor_labels"),
        (dict(pos_logits=torch.zeros(4, 1), neg_logits=torch.zeros(4, 3), anchor_labels=torch.zeros(4).long(),
              neg_labels=torch.zeros(4, 2, dtype=torch.long)), "neg_labels"),
    ],
)
@pytest.mark.parametrize("name", ["infonce", "dcl", "bcl", "supcon"])
def test_bad_batch_shapes_and_dtypes(kwargs, param, name):
    with pytest.raises(ConfigError, match=param):
        cl.make_loss(name)(ContrastiveBatch(**kwargs))


def test_not_a_batch():
    with pytest.raises(ConfigError, match="ContrastiveBatch"):
        cl.make_loss("infonce")(torch.zeros(3, 3))


@pytest.mark.parametrize("name", ["supcon", "punce", "unbiased"])
def test_labels_missing_for_label_aware_loss(name, ref):
    with pytest.raises(IncompatibleError, match="labels"):
        cl.make_loss(name)(ref.two_view_batch())


@pytest.mark.parametrize("name", ["infonce", "dcl", "hcl", "bcl", "pucl", "debiased_pos"])
def test_labels_given_to_unsupervised_loss_are_ignored_and_recorded(name, ref):
    loss = cl.make_loss(name)
    unlabeled = loss(ref.two_view_batch(seed=3))
    assert loss.labels_ignored is False
    labeled = loss(ref.two_view_batch(seed=3, labels=ref.class_labels(8)))
    assert loss.labels_ignored is True
    torch.testing.assert_close(labeled, unlabeled)  # the labels changed nothing


@pytest.mark.parametrize(
    ("call", "param"),
    [
        (lambda s: s(torch.zeros(4), torch.zeros(4)), "z1"),
        (lambda s: s(torch.zeros(4, 3), torch.zeros(5, 3)), "z2"),
        (lambda s: s(torch.zeros(4, 3), torch.zeros(4, 2)), "z2"),
        (lambda s: s(torch.zeros(4, 3, dtype=torch.long), torch.zeros(4, 3)), "z1"),
        (lambda s: s(torch.zeros(4, 3), torch.zeros(4, 3), labels=torch.zeros(4)), "labels"),
        (lambda s: s(torch.zeros(4, 3), torch.zeros(4, 3), labels=torch.zeros(3).long()), "labels"),
        (lambda s: s(torch.zeros(4, 3), torch.zeros(4, 3), labels=torch.full((4,), -3)), "labels"),
    ],
)
def test_bad_two_view_inputs(call, param):
    with pytest.raises(ConfigError, match=param):
        call(cl.make_sampler("two_view"))


def test_bad_other_sampler_inputs():
    with pytest.raises(ConfigError, match="views"):
        cl.make_sampler("multi_view")(torch.zeros(4, 3))
    with pytest.raises(ConfigError, match="at least 2 views"):
        cl.make_sampler("multi_view")(torch.zeros(1, 4, 3))
    with pytest.raises(ConfigError, match=r"views\[1\]"):
        cl.make_sampler("multi_view")([torch.zeros(4, 3), torch.zeros(4, 2)])
    with pytest.raises(ConfigError, match="queries"):
        cl.make_sampler("query_key", embed_dim=8)(torch.zeros(4, 3), torch.zeros(4, 3))
    with pytest.raises(ConfigError, match=r"keys\[1\]"):
        cl.make_sampler("query_key", embed_dim=3)(torch.zeros(4, 3), [torch.zeros(4, 3), torch.zeros(5, 3)])
    with pytest.raises(ConfigError, match="k"):
        cl.make_sampler("queue")(torch.zeros(4, 3), torch.zeros(4, 5))
