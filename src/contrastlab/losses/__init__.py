"""Built-in losses (registered through the `register_losses` hook like any plugin package).

Every loss is a thin :class:`torch.nn.Module` over a pure function of :class:`ContrastiveBatch`; see
``docs/losses.md`` for the table of losses, hyperparameters and reductions.
"""

from __future__ import annotations

from contrastlab.losses.base import ContrastiveLoss
from contrastlab.losses.bcl import BCLLoss, bcl
from contrastlab.losses.dcl import DCLLoss, HCLLoss, dcl, hcl
from contrastlab.losses.debiased_pos import DebiasedPosLoss, debiased_pos
from contrastlab.losses.infonce import InfoNCELoss, infonce
from contrastlab.losses.pucl import PUCLLoss, pucl
from contrastlab.losses.punce import PUNCELoss, punce
from contrastlab.losses.supcon import SupConLoss, UnbiasedLoss, supcon, unbiased
from contrastlab.platform.hookspecs import hookimpl

LOSSES: tuple[type[ContrastiveLoss], ...] = (
    InfoNCELoss,
    DCLLoss,
    HCLLoss,
    BCLLoss,
    PUCLLoss,
    PUNCELoss,
    DebiasedPosLoss,
    SupConLoss,
    UnbiasedLoss,
)
"""The nine built-in losses, in the order of docs/losses.md."""

__all__ = [
    "LOSSES",
    "BCLLoss",
    "ContrastiveLoss",
    "DCLLoss",
    "DebiasedPosLoss",
    "HCLLoss",
    "InfoNCELoss",
    "PUCLLoss",
    "PUNCELoss",
    "SupConLoss",
    "UnbiasedLoss",
    "bcl",
    "dcl",
    "debiased_pos",
    "hcl",
    "infonce",
    "pucl",
    "punce",
    "register_losses",
    "supcon",
    "unbiased",
]


@hookimpl
def register_losses(register) -> None:
    """Register the built-in losses."""
    for loss in LOSSES:
        register(loss)
