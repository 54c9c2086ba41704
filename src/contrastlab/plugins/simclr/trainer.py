"""The SimCLR training step: views → encoder + head → sampler → loss → optimiser (plus MoCo key encoder).

Data path (DESIGN.md): ``x (V views) --encoder+head--> z --sampler(z..., labels)--> ContrastiveBatch --loss-->``.
The sampler is called by the input its contract accepts (:mod:`contrastlab.platform.sampler_contract`), never by
its name; :func:`fed_inputs` says what this plugin can feed:

* ``two_views`` (V = 2): ``sampler(z1, z2, labels=y)``;
* ``multi_views``: ``sampler(z [V, B, d], labels=y)`` (M = V − 1 positives per anchor);
* ``query_key`` / ``queue`` (V = 2): ``sampler(q, k, labels=y)`` with ``q`` from the online network on view 0 and
  ``k`` from an EMA key encoder on view 1 (MoCo; a queue is the sampler's state).

Labels reach the sampler only for label-aware losses (the label-leak guard).
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

import contrastlab as cl
from contrastlab.data.augment import SimCLRAugment
from contrastlab.encoders.heads import ContrastiveModel, ProjectionHead, feature_dim
from contrastlab.platform.errors import ConfigError
from contrastlab.platform.sampler_contract import sampler_input
from contrastlab.plugins.simclr import distributed as D
from contrastlab.plugins.simclr.config import SimCLRConfig
from contrastlab.plugins.simclr.optim import lr_factor, make_optimizer, set_lr
from contrastlab.pretraining import MOMENTUM_INPUTS, contrastive_batch, contrastive_step


def fed_inputs(views: int) -> frozenset[str]:
    """The sampler inputs simclr feeds with ``views`` views per image: every kind with two views, and only
    ``multi_views`` with more (the key encoder path uses views 0 and 1)."""
    if views > 2:
        return frozenset({"multi_views"})
    return frozenset({"two_views", "multi_views"}) | MOMENTUM_INPUTS


def build_model(config: SimCLRConfig, in_channels: int) -> ContrastiveModel:
    """Encoder (from the registry, with ``in_channels``) followed by the projection head."""
    encoder = cl.make_encoder(config.encoder.name, in_channels=in_channels, **config.encoder.hparams())
    head = ProjectionHead(feature_dim(encoder), config.model.head_hidden, config.model.proj_dim,
                          config.model.head_batch_norm)
    return ContrastiveModel(encoder, head)


def view_indices(idx: Tensor, views: int, noise: float, n_total: int, g: torch.Generator | None) -> Tensor:
    """Source image of every view ``[V, B]``: view 0 is the anchor; with probability ``noise`` each other view
    comes from a uniformly random *different* image (a false positive, i.e. a type-I error; DebiasedPos)."""
    src = idx.unsqueeze(0).repeat(views, 1)                                         # [V, B]
    if noise > 0 and views > 1:
        shape = (views - 1, idx.shape[0])
        swap = torch.rand(shape, generator=g, device=idx.device) < noise
        other = (idx + torch.randint(1, max(2, n_total), shape, generator=g, device=idx.device)) % n_total
        src[1:] = torch.where(swap, other, src[1:])
    return src


def make_views(images: Tensor, idx: Tensor, augment: SimCLRAugment, views: int, noise: float,
               g: torch.Generator | None) -> Tensor:
    """Augmented views ``[V, B, C, S, S]`` of ``images[idx]`` (one batched augmentation call)."""
    src = view_indices(idx, views, noise, images.shape[0], g)
    x = images[src.flatten().to(images.device)].to(idx.device, non_blocking=True)
    out = augment(x, generator=g)
    return out.view(views, idx.shape[0], *out.shape[1:])


class Trainer:
    """Holds the networks, sampler, loss and optimiser; :meth:`step` does one optimisation step."""

    def __init__(self, config: SimCLRConfig, in_channels: int, device: torch.device,
                 distributed: bool = False) -> None:
        self.config, self.device = config, device
        feeds = fed_inputs(config.data.views)
        self.input = sampler_input("simclr", feeds, config.sampler.name, cl.registry("sampler"))
        """How the sampler is called: the input kind chosen from its contract."""
        self.label_aware = bool(cl.loss_label_kinds(config.loss.name))
        model = build_model(config, in_channels)
        if distributed and config.model.sync_bn:
            if device.type != "cuda":  # torch's DDP constructor would fail with a traceback
                raise ConfigError("model.sync_bn=true needs CUDA devices: SyncBatchNorm does not run on the "
                                  f"{device.type} (drop it, or run the processes on GPUs)")
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        model = model.to(device)
        self.memory_format = torch.channels_last if config.model.channels_last else torch.contiguous_format
        model = model.to(memory_format=self.memory_format)
        self.model = model
        """The unwrapped encoder + head (what checkpoints store)."""
        self.key_model: ContrastiveModel | None = None
        if self.input in MOMENTUM_INPUTS:
            self.key_model = copy.deepcopy(model).requires_grad_(False)
        net: nn.Module = model
        if distributed:
            from torch.nn.parallel import DistributedDataParallel

            net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        if config.model.compile:
            net = torch.compile(net)
        self.net = net
        self.sampler = cl.make_sampler(config.sampler.name, embed_dim=config.model.proj_dim,
                                       **config.sampler.hparams()).to(device)
        self.loss = cl.make_loss(config.loss.name, **config.loss.hparams()).to(device)
        # learnable sampler/loss parameters (e.g. query_key's bilinear W) are optimised with the network
        self.optimizer = make_optimizer(nn.ModuleList([model, self.sampler, self.loss]), config.train)
        outside_ddp = [p for m in (self.sampler, self.loss) for p in m.parameters() if p.requires_grad]
        self._sync_outside_ddp = (lambda: D.average_gradients(outside_ddp)) if distributed and outside_ddp else None
        """Averages the sampler's/loss's gradients over ranks before each step (DDP covers only the model)."""
        self.autocast = config.model.bf16 and device.type == "cuda"

    # ------------------------------------------------------------------ one step
    def embed(self, x: Tensor) -> Tensor:
        """Projections ``z`` of a batch ``[B, C, H, W]``: float32 (bf16 autocast outputs are upcast), or float64 for
        a float64 model."""
        x = x.contiguous(memory_format=self.memory_format)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            _, z = self.net(x)
        return _compute_dtype(z)

    def compute_loss(self, views: Tensor, labels: Tensor | None = None) -> Tensor:
        """Loss of one batch of views ``[V, B, C, H, W]``; ``labels`` ``[B]`` reach the sampler only for
        label-aware losses."""
        y = labels if self.label_aware else None
        return self.loss(contrastive_batch(self.embed, views, self.sampler, self.input, y, self._embed_keys))

    def _embed_keys(self, x: Tensor) -> Tensor:
        """Keys of the momentum network for ``x`` ``[B, C, H, W]`` (called without gradient)."""
        assert self.key_model is not None
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            _, k = self.key_model(x.contiguous(memory_format=self.memory_format))
        return _compute_dtype(k)

    def step(self, views: Tensor, labels: Tensor | None = None, lr_scale: float = 1.0) -> Tensor:
        """One optimisation step on ``views`` ``[V, B, C, H, W]``; returns the detached loss (no host sync)."""
        set_lr(self.optimizer, self.config.train.lr, lr_scale)
        y = labels if self.label_aware else None
        loss = contrastive_step(self.embed, views, self.sampler, self.input, self.loss, self.optimizer, y,
                                self._embed_keys, before_step=self._sync_outside_ddp)
        if self.key_model is not None:
            self.update_key_model()
        return loss.detach()

    @torch.no_grad()
    def update_key_model(self) -> None:
        """EMA update of the key encoder: ``θ_k ← m θ_k + (1 − m) θ_q`` (MoCo); buffers are copied."""
        assert self.key_model is not None
        m = self.config.model.key_momentum
        for pk, pq in zip(self.key_model.parameters(), self.model.parameters(), strict=True):
            pk.mul_(m).add_(pq.detach(), alpha=1 - m)
        for bk, bq in zip(self.key_model.buffers(), self.model.buffers(), strict=True):
            bk.copy_(bq)

    def lr_scale(self, step: int, total: int, steps_per_epoch: int) -> float:
        """Learning-rate multiplier at ``step`` (warm-up, then constant or cosine)."""
        warmup = round(self.config.train.warmup_epochs * steps_per_epoch)
        return lr_factor(step, total, warmup, self.config.train.schedule)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Everything needed to resume: networks, sampler state (e.g. the queue) and optimiser."""
        return {
            "model": self.model.state_dict(),
            "key_model": self.key_model.state_dict() if self.key_model is not None else None,
            "sampler": self.sampler.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.model.load_state_dict(state["model"])
        if self.key_model is not None and state.get("key_model") is not None:
            self.key_model.load_state_dict(state["key_model"])
        self.sampler.load_state_dict(state["sampler"])
        self.optimizer.load_state_dict(state["optimizer"])


def _compute_dtype(z: Tensor) -> Tensor:
    """float64 stays float64; anything else (bf16/fp16 under autocast, float32) becomes float32."""
    return z if z.dtype == torch.float64 else z.float()
