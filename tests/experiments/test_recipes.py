"""Recipe files read into grids (:mod:`contrastlab.experiments.recipes`): YAML scalars as ``--set`` text and the
definition digest that names the output folder."""

from __future__ import annotations

import hashlib
import json

from contrastlab.experiments.recipes import recipe_from_dict


def test_yaml_booleans_become_true_and_false_like_a_set_option() -> None:
    """``sets: {train.amp: true}`` in a recipe must reach the run as ``--set train.amp=true`` (not the opposite)."""
    recipe = recipe_from_dict({"plugin": "graph", "preset": "smoke", "sets": {"a.on": True, "a.off": False},
                               "parts": [{"losses": ["dcl"], "grid": {"b.flag": [True, False]}}]})
    assert recipe.sets == (("a.on", "true"), ("a.off", "false"))
    assert recipe.parts[0].grid[0].values == ("true", "false")


def test_digest_is_eight_hex_digits_of_the_sorted_definition() -> None:
    """The digest names ``compare/<recipe>-<hash>``: a repeated command must find the same folder to resume."""
    definition = {"plugin": "graph", "preset": "smoke", "parts": [{"losses": ["dcl"]}], "seeds": 2}
    expected = hashlib.sha1(json.dumps(definition, sort_keys=True).encode()).hexdigest()[:8]
    assert recipe_from_dict(definition).digest == expected
    assert recipe_from_dict(dict(reversed(definition.items()))).digest == expected  # key order does not matter


def test_a_loss_key_reaches_the_losses_that_have_it_in_a_part_that_mixes_losses() -> None:
    """A part ``[infonce, dcl]`` with ``--set loss.tau_plus=0.2`` (or the recipe's own ``sets``): DCL gets 0.2,
    InfoNCE (no ``tau_plus``) runs without it; the key must not be dropped for the whole part."""
    from contrastlab.experiments.recipes import expand_recipe

    hparams = {"infonce": set(), "dcl": {"tau_plus"}}
    for recipe_sets, cli_sets in (({}, [("loss.tau_plus", "0.2")]), ({"loss.tau_plus": 0.2}, [])):
        recipe = recipe_from_dict({"plugin": "toy", "preset": "smoke", "sets": recipe_sets,
                                   "parts": [{"losses": ["infonce", "dcl"]}]})
        points = expand_recipe(recipe, [1], sets=cli_sets, hparams_of=hparams.__getitem__)
        assert {p.loss: p.overrides for p in points} == {"infonce": [], "dcl": ["loss.tau_plus=0.2"]}
