"""Shared base of the samplers: the contract (``accepts``, ``embed_dim``), validation, compute dtype, label
handling, cached index tensors."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastlab.platform.errors import ConfigError
from contrastlab.platform.registry import HParam, bind_hparams
from contrastlab.platform.sampler_contract import SamplerInput


def positive_finite(v: Any) -> bool:
    """``0 < v < inf`` (temperatures)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < float(v) < math.inf


def temperature_hparam(default: float, source: str) -> HParam:
    """The ``temperature`` hyperparameter (logits are ``similarity / temperature``)."""
    return HParam("temperature", default, "temperature t: logits are similarity / t", "(0, inf)", source,
                  positive_finite)


def compute_dtype(x: Tensor) -> torch.dtype:
    """float64 for float64 inputs, else float32 (bf16/fp16 under AMP are upcast)."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def check_embeddings(x: Any, owner: str, param: str, batch: int | None = None, dim: int | None = None) -> Tensor:
    """A floating ``[B, d]`` tensor (with the given ``B``/``d``), else a :class:`ConfigError` naming ``param``."""
    ok = isinstance(x, Tensor) and x.is_floating_point() and x.dim() == 2
    ok = ok and (batch is None or x.shape[0] == batch) and (dim is None or x.shape[1] == dim)
    if not ok:
        want = f"[{'B' if batch is None else batch}, {'d' if dim is None else dim}]"
        got = f"tensor of shape {tuple(x.shape)} and dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise ConfigError(f"sampler '{owner}': {param} must be a floating tensor {want}; got {got}")
    return x


def check_labels(labels: Any, owner: str, batch: int, device: torch.device) -> Tensor | None:
    """``None`` or an integer ``[B]`` tensor with values ≥ −1 (class id, or −1 unlabeled), as long."""
    if labels is None:
        return None
    ok = isinstance(labels, Tensor) and labels.dim() == 1 and labels.shape[0] == batch
    ok = ok and not labels.is_floating_point() and labels.dtype != torch.bool
    if not ok:
        got = f"shape {tuple(labels.shape)}, dtype {labels.dtype}" if isinstance(labels, Tensor) else type(labels)
        raise ConfigError(
            f"sampler '{owner}': labels must be an integer tensor [B={batch}] (class >= 0, -1 unlabeled); got {got}"
        )
    labels = labels.to(device=device, dtype=torch.long)
    if labels.numel() and int(labels.min()) < -1:
        raise ConfigError(f"sampler '{owner}': labels must be >= -1 (class id >= 0, or -1 unlabeled)")
    return labels


def as_views(views: Tensor | Sequence[Tensor], owner: str, param: str = "views") -> Tensor:
    """``[V, B, d]`` from a tensor or a sequence of ``[B, d]`` tensors."""
    if isinstance(views, Tensor):
        if not views.is_floating_point() or views.dim() != 3:
            raise ConfigError(
                f"sampler '{owner}': {param} must be a floating tensor [V, B, d] or a sequence of [B, d]; "
                f"got shape {tuple(views.shape)} and dtype {views.dtype}"
            )
        return views
    if not isinstance(views, Sequence) or len(views) == 0:
        raise ConfigError(f"sampler '{owner}': {param} must be a tensor [V, B, d] or a non-empty sequence of [B, d]")
    first = check_embeddings(views[0], owner, f"{param}[0]")
    for i, v in enumerate(views[1:], start=1):
        check_embeddings(v, owner, f"{param}[{i}]", first.shape[0], first.shape[1])
    return torch.stack(list(views))


def normalize(x: Tensor) -> Tensor:
    """L2-normalise the last dim in the compute dtype."""
    return F.normalize(x.to(compute_dtype(x)), dim=-1)


class Sampler(nn.Module):
    """Base class of samplers (``nn.Module``\\ s returning a ``ContrastiveBatch``), built-in or third-party.

    The contract (:mod:`contrastlab.platform.sampler_contract`): a subclass sets ``accepts`` to the inputs its
    ``forward`` consumes and plugins call it accordingly, never by name:

    * ``two_views``: ``forward(z1 [B, d], z2 [B, d], labels=None)``;
    * ``multi_views``: ``forward(views [V, B, d] | V × [B, d], labels=None)``, ``V ≥ 2``;
    * ``query_key``: ``forward(queries [B, d], keys [B, d] | M × [B, d], labels=None)``, keys from a momentum
      encoder (detached); parameters sized by ``embed_dim`` are optimised by the plugin;
    * ``queue``: ``forward(q [B, d], k [B, d], labels=None)``, ``k`` from a momentum encoder; stateful.

    The constructor takes the embedding size ``embed_dim`` (keyword; ``None`` when unknown) and the declared
    hyperparameters, which it validates and stores as attributes.
    """

    name: ClassVar[str] = ""
    """Registry name."""
    description: ClassVar[str] = ""
    """One-line description."""
    hyperparameters: ClassVar[tuple[HParam, ...]] = ()
    """Documented hyperparameters."""
    accepts: ClassVar[frozenset[SamplerInput]] = frozenset()
    """The inputs ``forward`` consumes (non-empty in every registered sampler)."""

    def __init__(self, gather_distributed: bool = True, *, embed_dim: int | None = None, **hparams: Any) -> None:
        super().__init__()
        for key, value in bind_hparams(self.hyperparameters, hparams, f"sampler '{self.name}'").items():
            setattr(self, key, value)
        if embed_dim is not None and (isinstance(embed_dim, bool) or not isinstance(embed_dim, int) or embed_dim < 1):
            raise ConfigError(f"sampler '{self.name}': embed_dim must be a positive integer or None; got {embed_dim!r}")
        self.embed_dim = embed_dim
        """Size ``d`` of the embeddings it receives (checked on every call), or ``None`` (any ``d``)."""
        self.gather_distributed = bool(gather_distributed)
        """Gather embeddings/labels from all ranks when ``torch.distributed`` is initialised (default True)."""

    def extra_repr(self) -> str:
        """Hyperparameters in ``repr``."""
        dim = [] if self.embed_dim is None else [f"embed_dim={self.embed_dim}"]
        return ", ".join([*dim, *(f"{hp.name}={getattr(self, hp.name)!r}" for hp in self.hyperparameters)])


def feed_views(sampler: nn.Module, kind: str, views: Tensor, labels: Tensor | None = None) -> Any:
    """Call ``sampler`` with ``V`` views ``[V, B, d]`` of one encoder as the input ``kind`` it was chosen for:
    ``multi_views`` → ``sampler(views, labels=labels)``; ``two_views`` (``V`` must be 2) →
    ``sampler(views[0], views[1], labels=labels)``."""
    if kind == "multi_views":
        return sampler(views, labels=labels)
    if kind == "two_views":
        if views.shape[0] != 2:
            raise ConfigError(f"a two_views sampler takes 2 views; got V={views.shape[0]} (use a multi_views sampler)")
        return sampler(views[0], views[1], labels=labels)
    raise ValueError(f"input kind '{kind}' is not fed from views of one encoder (two_views or multi_views)")


_INDEX_CACHE: dict[tuple[Any, ...], tuple[Tensor, Tensor]] = {}


def multi_view_index(V: int, B: int, B_total: int, offset: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """Column indices into the ``V·B_total`` candidates (view-major, ``v·B_total + b``) for the ``V·B`` local
    anchors (view-major, sample ``b`` of this rank is global ``offset + b``).

    Returns ``pos_idx [V·B, V−1]`` (the same sample's other views, in order ``v+1, v+2, …`` mod ``V``; column 0
    is the numerator positive) and ``neg_idx [V·B, V·(B_total−1)]`` (every view of every other sample).
    """
    key = (V, B, B_total, offset, str(device))
    hit = _INDEX_CACHE.get(key)
    if hit is not None:
        return hit
    v = torch.arange(V, device=device).repeat_interleave(B)  # [V·B] view of each anchor
    g = (torch.arange(B, device=device) + offset).repeat(V)  # [V·B] global sample of each anchor
    shifts = torch.arange(1, V, device=device)
    pos_idx = ((v[:, None] + shifts[None, :]) % V) * B_total + g[:, None]  # [V·B, V−1]
    others = torch.arange(B_total - 1, device=device)[None, :]
    others = others + (others >= g[:, None]).long()  # [V·B, B_total−1] every sample except g
    views = torch.arange(V, device=device)[None, :, None] * B_total
    neg_idx = (views + others[:, None, :]).reshape(V * B, V * (B_total - 1))
    if len(_INDEX_CACHE) > 64:
        _INDEX_CACHE.clear()
    _INDEX_CACHE[key] = (pos_idx, neg_idx)
    return pos_idx, neg_idx
