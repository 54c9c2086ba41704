"""The graph config refuses, before anything runs, values that would fail or hang later."""

from __future__ import annotations

import pytest

from contrastlab.platform.config import resolve_config
from contrastlab.platform.errors import ConfigError
from contrastlab.plugins.graph.task import GraphTask


@pytest.mark.parametrize(("item", "message"), [
    ("eval.c_grid=[-1]", "eval.c_grid.0=-1: Input should be greater than 0"),  # sklearn refused it after training
    ("eval.c_grid=[1, 0]", "eval.c_grid.1=0: Input should be greater than 0"),
    ("eval.c_grid=[1, .inf]", "eval.c_grid=inf: must be a finite number"),  # both were accepted: the item type
    ("eval.c_grid=[1, true]", "eval.c_grid=True: expected a number, not true/false"),  # is Annotated[float, ...]
    ("data.synthetic.graphs=10000000", "less than or equal to 100000"),  # the pre-flight check generated them all first
    ("data.synthetic.node_labels=100000000", "less than or equal to 1000"),
])
def test_bad_graph_values_are_refused_when_the_config_is_resolved(item: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_config(GraphTask(), preset="smoke", sets=[item])


def test_the_presets_stay_valid() -> None:
    for preset in GraphTask.presets:
        resolve_config(GraphTask(), preset=preset)


@pytest.mark.parametrize("key", ["model.proj_hidden", "model.proj_dim"])
def test_a_huge_width_is_refused_before_the_run_is_created(key: str) -> None:
    """It was accepted, then failed after the run directory was made (an allocator traceback, a failed run)."""
    with pytest.raises(ConfigError, match=rf"{key}=100000000000: Input should be less than or equal to 65536"):
        resolve_config(GraphTask(), preset="smoke", sets=[f"{key}=100000000000"])


def test_the_paper_readout_is_the_one_of_the_infograph_and_graphcl_scripts() -> None:
    """Their evaluate_embedding: SVC() (RBF kernel) on unscaled embeddings, C in 10^-3..10^3 by 5 inner folds,
    10 stratified outer folds. The paper preset once used a linear kernel on standardised embeddings."""
    e = resolve_config(GraphTask(), preset="paper").eval  # type: ignore[attr-defined]
    assert (e.svm_kernel, e.standardize, e.folds, e.inner_folds) == ("rbf", False, 10, 5)
    assert e.c_grid == [1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0] and e.readouts[0] == "svm"


def test_the_paper_pool_has_graphcls_four_augmentations() -> None:
    a = resolve_config(GraphTask(), preset="paper").augment  # type: ignore[attr-defined]
    assert a.methods == ["drop_nodes", "perturb_edges", "mask_attributes", "subgraph"] and a.subgraph == 0.2
