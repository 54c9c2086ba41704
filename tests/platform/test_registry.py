"""Near-miss suggestions of the registries' unknown-name errors."""

from __future__ import annotations

from contrastlab.platform.registry import suggest, unknown_name_message


def test_a_name_in_the_wrong_case_gets_the_right_one_suggested() -> None:
    """`--loss DCL` listed the valid names but suggested none."""
    assert suggest("DCL", ["dcl", "hcl", "infonce"]) == " Did you mean 'dcl'?"
    assert unknown_name_message("plugin", "Graph", ["curl", "graph"]).endswith("Did you mean 'graph'?")
    assert suggest("infonse", ["dcl", "infonce"]) == " Did you mean 'infonce'?"
    assert suggest("zzz", ["dcl", "infonce"]) == ""
