"""The pre-flight label check's suggestion list (:func:`contrastlab.platform.preflight.unsupervised_losses`)."""

from __future__ import annotations

import contrastlab as cl
from contrastlab.platform.preflight import unsupervised_losses


def test_unsupervised_losses_lists_the_losses_without_labels_minus_the_refused_ones() -> None:
    losses = cl.registry("loss")
    everything = unsupervised_losses()
    assert everything == [n for n in losses.names() if not losses.get(n).label_kinds]
    assert {"infonce", "dcl", "debiased_pos"} <= set(everything) and "supcon" not in everything
    assert unsupervised_losses({"debiased_pos": "why"}) == [n for n in everything if n != "debiased_pos"]
