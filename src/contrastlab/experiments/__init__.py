"""Experiments over many runs: grids and recipes, the local runner, results tables, statistics and plots.

Depends only on the core (:mod:`contrastlab.platform`); the CLI (:mod:`contrastlab.cli`) drives it.
"""
