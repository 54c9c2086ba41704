"""``platform tune``'s search space at unit level: ``--search KEY=DIST`` parsing and its boundaries, what a
parameter samples (kind, bounds, log scale), the values validated before anything runs, the integer-key check,
tune's ``--set`` and the ``--storage`` URL check. Written from the mutation audit of ``experiments/tune_search.py``."""

from __future__ import annotations

import re

import pytest

from contrastlab.experiments.tune_search import (
    check_integer_key,
    check_storage,
    parse_fixed,
    parse_search,
)
from contrastlab.platform.errors import ConfigError

optuna = pytest.importorskip("optuna")


@pytest.mark.parametrize(
    "spec, kind, args",
    [
        ("loss.tau_plus=uniform(0.01,0.3)", "uniform", (0.01, 0.3)),
        ("loss.tau_plus = log-uniform(0.001, 0.3)", "log-uniform", (0.001, 0.3)),
        ("train.epochs=int(1,5)", "int", (1, 5)),
        ("encoder.dim=log-int(8,64)", "log-int", (8, 64)),
        ("train.lr=uniform(-1,1e-3)", "uniform", (-1.0, 1e-3)),  # a negative low is fine off the log scale
        ("train.epochs=int(0,1)", "int", (0, 1)),
        ("sampler.similarity=choice(cosine,bilinear)", "choice", ("cosine", "bilinear")),
        ("loss.name2=choice(a)", "choice", ("a",)),  # one choice is allowed
        ("model.cfg=a=b", None, None),  # the key ends at the first '='
    ],
)  # fmt: skip
def test_parse_search_accepts_every_kind_with_its_bounds(spec, kind, args):
    if kind is None:
        with pytest.raises(ConfigError, match=r"--search 'model.cfg=a=b': bad distribution 'a=b'"):
            parse_search(spec)
        return
    param = parse_search(spec)
    assert (param.key, param.kind, param.args) == (spec.split("=", 1)[0].strip(), kind, args)
    assert all(type(a) is type(b) for a, b in zip(param.args, args, strict=True))  # ints stay ints


@pytest.mark.parametrize(
    "spec, message",
    [
        ("loss.tau_plus", "expected KEY=DIST"),
        ("seed=int(1,3)", "--search seed: seeds are not searched; use --seeds-per-trial"),
        ("loss=choice(dcl,hcl)", "--search loss: the loss is fixed by --loss"),
        ("loss.name=choice(dcl,hcl)", "--search loss.name: the loss is fixed by --loss"),
        ("Loss Tau=uniform(0,1)", "bad key"),
        ("loss.tau_plus=gauss(0.1,0.2)", "bad distribution 'gauss(0.1,0.2)'"),
        ("loss.tau_plus=uniform", "bad distribution 'uniform'"),
        ("loss.tau_plus=uniform(0.1,)", "empty argument in 'uniform(0.1,)'"),
        ("loss.tau_plus=choice(a,,b)", "empty argument"),
        ("loss.tau_plus=choice(a,b,a)", "duplicated choice in 'choice(a,b,a)'"),
        ("loss.tau_plus=uniform(0.1,0.2,0.3)", "needs two finite bounds with low < high"),
        ("loss.tau_plus=uniform(0.1)", "low < high"),
        ("loss.tau_plus=uniform(x,0.2)", "uniform needs two float bounds, got 'uniform(x,0.2)'"),
        ("train.epochs=int(1.5,3)", "int needs two int bounds"),
        ("loss.tau_plus=uniform(0.2,0.2)", "needs two finite bounds with low < high"),
        ("loss.tau_plus=uniform(0.3,0.1)", "low < high"),
        ("loss.tau_plus=uniform(0.1,inf)", "finite bounds"),
        ("loss.tau_plus=uniform(nan,0.1)", "finite bounds"),
        ("loss.tau_plus=uniform(-inf,0.1)", "finite bounds"),
        ("loss.tau_plus=log-uniform(0,0.3)", "log-uniform needs low > 0"),
        ("loss.tau_plus=log-uniform(-0.1,0.3)", "log-uniform needs low > 0"),
        ("encoder.dim=log-int(0,64)", "log-int needs low > 0"),
    ],
)  # fmt: skip
def test_parse_search_refuses_malformed_specs_in_one_line(spec, message):
    with pytest.raises(ConfigError) as info:
        parse_search(spec)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_log_bounds_just_above_zero_and_low_one_are_accepted():
    assert parse_search("encoder.dim=log-int(1,64)").args == (1, 64)
    assert parse_search("loss.tau_plus=log-uniform(1e-9,1)").args == (1e-9, 1.0)


@pytest.mark.parametrize(
    "spec, method, log",
    [
        ("loss.tau_plus=uniform(0.01,0.3)", "suggest_float", False),
        ("loss.tau_plus=log-uniform(0.01,0.3)", "suggest_float", True),
        ("train.epochs=int(1,5)", "suggest_int", False),
        ("encoder.dim=log-int(8,64)", "suggest_int", True),
    ],
)
def test_a_parameter_samples_its_own_kind_bounds_and_scale(spec, method, log):
    param = parse_search(spec)
    trial = optuna.create_study().ask()
    text = param.suggest(trial)
    distribution = trial.distributions[param.key]
    assert (distribution.low, distribution.high, distribution.log) == (*param.args, log)
    value = trial.params[param.key]
    assert param.args[0] <= value <= param.args[1]
    if method == "suggest_int":
        assert isinstance(distribution, optuna.distributions.IntDistribution) and text == str(value)
    else:  # --set text that parses back to exactly the sampled float
        assert isinstance(distribution, optuna.distributions.FloatDistribution) and float(text) == value


def test_a_choice_samples_one_of_its_values_as_set_text():
    param = parse_search("sampler.similarity=choice(cosine,bilinear)")
    trial = optuna.create_study().ask()
    assert param.suggest(trial) in ("cosine", "bilinear")
    assert trial.distributions[param.key].choices == ("cosine", "bilinear")


def test_checked_values_example_and_text_round_trip():
    numeric = parse_search("loss.tau_plus=log-uniform(0.001,0.3)")
    assert numeric.check_values() == ["0.001", "0.3"]  # both bounds
    assert numeric.example() == "0.001"
    assert numeric.text == "log-uniform(0.001,0.3)"
    assert parse_search(f"loss.tau_plus={numeric.text}") == numeric
    choice = parse_search("sampler.similarity=choice(cosine,bilinear,dot)")
    assert choice.check_values() == ["cosine", "bilinear", "dot"]  # every choice
    assert choice.text == "choice(cosine,bilinear,dot)"
    with pytest.raises(AttributeError):  # frozen: a parameter cannot change under a running study
        numeric.kind = "int"  # type: ignore[misc]


@pytest.mark.parametrize(
    "spec, resolved, hint",
    [
        ("train.num_negatives=uniform(1,3)", 3, "use --search 'train.num_negatives=int(1,3)'"),
        ("encoder.dim=log-uniform(8,64)", 64, "use --search 'encoder.dim=log-int(8,64)'"),
        ("loss.tau_plus=uniform(0.1,0.2)", 0.2, None),  # a float key
        ("train.flag=uniform(0,1)", True, None),  # a bool is no integer key
        ("train.epochs=int(1,3)", 3, None),  # already an integer distribution
        ("train.epochs=choice(1,3)", 3, None),
        ("train.missing=uniform(1,3)", None, None),
    ],
)  # fmt: skip
def test_a_continuous_distribution_on_an_integer_key_is_refused_with_the_integer_kind(spec, resolved, hint):
    param = parse_search(spec)
    if hint is None:
        check_integer_key(param, resolved)
        return
    with pytest.raises(ConfigError) as info:
        check_integer_key(param, resolved)
    assert str(info.value).endswith(hint)
    assert str(info.value).startswith(f"--search '{spec}': {param.key} takes whole numbers")


def test_tunes_set_refuses_seed_and_loss_and_passes_the_rest_through():
    assert parse_fixed(" train.epochs = 2") == "train.epochs=2"
    with pytest.raises(ConfigError, match=r"^--set seed: cannot be set here; use --seeds-per-trial$"):
        parse_fixed("seed=3")
    for key in ("loss", "loss.name"):
        with pytest.raises(ConfigError, match=rf"^--set {key}: cannot be set here; the loss is fixed by --loss$"):
            parse_fixed(f"{key}=hcl")
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_fixed("train.epochs")


def test_storage_urls_are_checked_before_anything_is_written(tmp_path):
    check_storage(f"sqlite:///{tmp_path / 'study.db'}")
    check_storage("sqlite://")  # in memory
    check_storage("sqlite:///:memory:")
    with pytest.raises(ConfigError, match=r"^--storage nosuchdb://x/y: not a usable database URL \(Can't load plugin"):
        check_storage("nosuchdb://x/y")  # SQLAlchemy's own reason, not just its exception's name
    missing = tmp_path / "no" / "such"
    with pytest.raises(ConfigError, match=rf"^--storage sqlite:///{re.escape(str(missing))}/s\.db: folder "
                                            rf"{re.escape(str(missing))} does not exist$"):
        check_storage(f"sqlite:///{missing}/s.db")
    assert not (tmp_path / "study.db").exists()  # checking writes nothing
