"""SB3 SAC policy in CURL's arrangement: one pixel encoder trained by the critic (and the contrastive loss).

Stock SB3 cannot express this (DESIGN.md, "SB3"): with a shared features extractor SB3 trains the encoder through
the *actor*. CURL (Srinivas et al. 2020, §4.5/appendix A, after SAC-AE) does the opposite:

* the critic owns the encoder (conv trunk → Linear → LayerNorm) and its loss trains it;
* the actor reuses the critic's conv trunk (tied weights) on *detached* features, with its own Linear/LayerNorm;
* the critic target holds a separate copy of the encoder, updated as an EMA; it is also CURL's key encoder.

The actor's log σ is bounded as CURL's actor does (``log_std_squash="tanh"``: ``tanh`` rescaled into
``[-10, 2]``) or as SB3's does (``"clamp"``: clipped to ``[-20, 2]``); see :func:`squash_log_std`.

Observations larger than the encoder input (100 px renders) are centre-cropped inside the features extractor,
so ``model.predict(obs)`` on raw environment observations evaluates on the centre crop, as CURL does.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import SquashedDiagGaussianDistribution
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.type_aliases import PyTorchObs
from stable_baselines3.sac.policies import LOG_STD_MAX, LOG_STD_MIN, Actor, SACPolicy
from torch import Tensor, nn
from torch.distributions import Normal

import contrastlab as cl
from contrastlab.encoders.pixel_conv import curl_weight_init
from contrastlab.plugins.curl.augment import center_crop
from contrastlab.plugins.curl.fast import adam

LogStdSquash = Literal["tanh", "clamp"]
CURL_LOG_STD_BOUNDS = (-10.0, 2.0)
"""``(log_std_min, log_std_max)`` of CURL's actor (its ``actor_log_std_min/max``), used by ``"tanh"``."""
SB3_LOG_STD_BOUNDS = (float(LOG_STD_MIN), float(LOG_STD_MAX))
"""SB3's clamp range ``[-20, 2]``, used by ``"clamp"``."""


def squash_log_std(raw: Tensor, mode: LogStdSquash = "tanh") -> Tensor:
    """Bound the actor's raw log σ output.

    ``"tanh"`` (CURL): ``lo + ½(hi - lo)(tanh(raw) + 1)`` with ``(lo, hi) = (-10, 2)``, smooth, gradients everywhere.
    ``"clamp"`` (SB3): ``clamp(raw, -20, 2)``, the identity inside the range and zero gradient outside it.
    """
    if mode == "tanh":
        lo, hi = CURL_LOG_STD_BOUNDS
        return lo + 0.5 * (hi - lo) * (torch.tanh(raw) + 1.0)
    if mode == "clamp":
        return torch.clamp(raw, *SB3_LOG_STD_BOUNDS)
    raise ValueError(f"log_std_squash must be 'tanh' or 'clamp', got {mode!r}")


class CurlFeatures(BaseFeaturesExtractor):
    """A registered encoder (default ``pixel_conv``) behind SB3's features-extractor interface.

    Input: ``[B, C, H, W]`` float in ``[0, 1]`` (SB3 divides by 255) or uint8 (the update's crops); centre-cropped
    to ``crop`` when larger. The encoder must expose ``forward_conv`` (trunk) and ``head`` (projection), as
    ``pixel_conv`` does.
    """

    def __init__(
        self,
        observation_space: spaces.Box,
        crop: int = 84,
        encoder: str = "pixel_conv",
        encoder_hparams: dict[str, Any] | None = None,
    ) -> None:
        """Build encoder ``encoder`` for ``[C, crop, crop]`` inputs, ``C`` from ``observation_space``."""
        net = cl.make_encoder(encoder, in_channels=observation_space.shape[0], image_size=crop,
                              **(encoder_hparams or {}))
        if not (hasattr(net, "forward_conv") and hasattr(net, "head")):
            raise cl.IncompatibleError(
                f"encoder '{encoder}' has no conv trunk/head split (forward_conv, head); the curl plugin needs one"
            )
        super().__init__(observation_space, features_dim=int(net.latent_dim))
        self.net, self.crop = net, crop
        self.channels_last = False
        """Feed the trunk channels-last (NHWC) images (set by :func:`~contrastlab.plugins.curl.fast.speed_flags`)."""
        self.autocast_dtype: torch.dtype | None = None
        """Run the conv trunk under autocast to this dtype (bf16), returning float32 features; ``None``: off."""

    def prepare(self, obs: Tensor) -> Tensor:
        """The trunk's input for images ``[B, C, H, W]``: centre-cropped when larger than the encoder input,
        channels-last when :attr:`channels_last` is set, uint8 divided by 255 (SB3's and CURL's scaling).

        Idempotent: :meth:`trunk` prepares its input itself, and a prepared tensor passes through unchanged (no
        copy). The CURL update prepares each batch of crops once and feeds it to the online and the key encoder
        (which share these settings), instead of converting the same uint8 crops at every forward pass.
        """
        x = center_crop(obs, self.crop) if obs.shape[-1] != self.crop else obs
        layout = torch.channels_last if self.channels_last else torch.preserve_format
        if x.dtype == torch.uint8:  # cast and layout change in one pass, then divide in place: x / 255 exactly
            return x.to(torch.float32, memory_format=layout).div_(255.0)
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x

    def trunk(self, obs: Tensor) -> Tensor:
        """Conv trunk output (float32; ``pixel_conv``: the map ``[B, filters, s, s]``, which its head reads as is)
        of images ``[B, C, S, S]`` (raw or :meth:`prepare`-d)."""
        x = self.prepare(obs)
        if self.autocast_dtype is None:
            return self.net.forward_conv(x)
        with torch.autocast(x.device.type, dtype=self.autocast_dtype):
            return self.net.forward_conv(x).float()

    def forward(self, obs: Tensor) -> Tensor:
        """``[B, C, H, W]`` in ``[0, 1]`` → ``[B, latent_dim]``."""
        return self.net.head(self.trunk(obs))


class ActorFeatures(BaseFeaturesExtractor):
    """The actor's features: the critic's conv trunk (tied, detached) followed by the actor's own head.

    The trunk is held by reference and is *not* a submodule, so the actor's parameters (and its optimizer)
    exclude it; gradients of the actor loss stop at the trunk output.
    """

    def __init__(self, observation_space: spaces.Box, critic_features: CurlFeatures) -> None:
        """Tie to ``critic_features``' trunk and copy the shape of its head (re-initialised)."""
        super().__init__(observation_space, features_dim=critic_features.features_dim)
        self.__dict__["critic_features"] = critic_features  # a reference, not a registered submodule
        self.head = copy.deepcopy(critic_features.net.head)
        self.head.apply(curl_weight_init)
        for module in self.head.modules():
            if isinstance(module, nn.LayerNorm):
                module.reset_parameters()

    def forward(self, obs: Tensor) -> Tensor:
        """``[B, C, H, W]`` in ``[0, 1]`` → ``[B, latent_dim]``; no gradient reaches the conv trunk."""
        return self.head_forward(self.critic_features.trunk(obs).detach())

    def head_forward(self, trunk_out: Tensor) -> Tensor:
        """The actor head on trunk features computed elsewhere (detached)."""
        return self.head(trunk_out.detach())


class UncheckedSquashedGaussian(SquashedDiagGaussianDistribution):
    """SB3's tanh-squashed diagonal Gaussian, its ``Normal`` built without ``torch.distributions``' argument checks.

    The checks (on by default) run ``torch._is_all_true`` on the mean and scale of every new ``Normal`` and on every
    value given to ``log_prob``; each reads a tensor on the host, which on a GPU is a synchronisation (≈ 48 per CURL
    update). The scale here is ``exp`` of a bounded log σ, positive and finite by construction. Same values as
    SB3's class (tests/plugins/curl/test_curl_fast.py); the setting stays per instance, nothing process-wide.
    """

    def proba_distribution(self, mean_actions: Tensor, log_std: Tensor) -> UncheckedSquashedGaussian:
        """``N(mean, exp(log_std))`` per action dimension (before the tanh squashing), unchecked."""
        scale = log_std.exp().broadcast_to(mean_actions.shape)
        self.distribution = Normal(mean_actions, scale, validate_args=False)
        return self


class CurlActor(Actor):
    """SB3's squashed-Gaussian ``Actor`` whose log σ is bounded by :func:`squash_log_std` (``log_std_squash``).

    Every path goes through :meth:`get_action_dist_params` (rollouts, ``predict``, ``action_log_prob``) or through
    :meth:`CurlSACPolicy.actor_from_trunk` (the CURL update), and both apply the same squashing.
    """

    def __init__(self, *args: Any, log_std_squash: LogStdSquash = "tanh", **kwargs: Any) -> None:
        """Arguments of SB3's ``Actor`` plus ``log_std_squash`` (``"tanh"``: CURL, ``"clamp"``: SB3)."""
        super().__init__(*args, **kwargs)
        if self.use_sde:
            raise ValueError("the curl plugin's actor does not support gSDE")
        if log_std_squash not in ("tanh", "clamp"):
            raise ValueError(f"log_std_squash must be 'tanh' or 'clamp', got {log_std_squash!r}")
        self.log_std_squash = log_std_squash
        self.action_dist = UncheckedSquashedGaussian(self.action_dist.action_dim)  # no host syncs on a GPU

    def dist_params(self, features: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and bounded log σ ``([B, A], [B, A])`` from the actor's features."""
        latent = self.latent_pi(features)
        return self.mu(latent), squash_log_std(self.log_std(latent), self.log_std_squash)  # type: ignore[operator]

    def extract_features(self, obs: PyTorchObs, features_extractor: BaseFeaturesExtractor) -> Tensor:
        """Centre-crop uint8 observations larger than the encoder input *before* SB3 converts them to float (the
        float copy of a 100 px stack is 1.4× the 84 px crop); the same features as cropping after converting."""
        crop = getattr(getattr(features_extractor, "critic_features", None), "crop", None)
        if isinstance(obs, Tensor) and obs.dtype == torch.uint8 and crop is not None and obs.shape[-1] > crop:
            obs = center_crop(obs, crop)
        return super().extract_features(obs, features_extractor)

    def get_action_dist_params(self, obs: PyTorchObs) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
        """Mean, bounded log σ and no extra arguments for the action distribution of ``obs``."""
        mean, log_std = self.dist_params(self.extract_features(obs, self.features_extractor))
        return mean, log_std, {}

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "log_std_squash": self.log_std_squash}


class CurlSACPolicy(SACPolicy):
    """SAC policy with CURL's encoder arrangement (see the module docstring).

    Extra constructor arguments: ``actor_lr``, ``critic_lr`` and ``betas`` (Adam), ``log_std_squash`` (see
    :func:`squash_log_std`), and ``crop``/``encoder``/``encoder_hparams`` forwarded to :class:`CurlFeatures`.
    Linear layers use CURL's orthogonal init.
    """

    def __init__(
        self,
        observation_space: spaces.Box,
        action_space: spaces.Box,
        lr_schedule: Any,
        net_arch: list[int] | None = None,
        crop: int = 84,
        encoder: str = "pixel_conv",
        encoder_hparams: dict[str, Any] | None = None,
        actor_lr: float = 1e-3,
        critic_lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        log_std_squash: LogStdSquash = "tanh",
        **kwargs: Any,
    ) -> None:
        """``net_arch`` defaults to CURL's two hidden layers of 1024 for actor and critics."""
        self.actor_lr, self.critic_lr, self.betas = actor_lr, critic_lr, tuple(betas)
        self.log_std_squash = log_std_squash
        kwargs.setdefault("features_extractor_class", CurlFeatures)
        kwargs["features_extractor_kwargs"] = {"crop": crop, "encoder": encoder, "encoder_hparams": encoder_hparams}
        kwargs["share_features_extractor"] = False
        super().__init__(observation_space, action_space, lr_schedule, net_arch=net_arch or [1024, 1024], **kwargs)

    def _build(self, lr_schedule: Any) -> None:
        critic_features = self.make_features_extractor()
        self.critic = self.make_critic(features_extractor=critic_features)
        self.actor = self.make_actor(features_extractor=ActorFeatures(self.observation_space, critic_features))
        for net in (*self.critic.q_networks, self.actor.latent_pi, self.actor.mu, self.actor.log_std):
            net.apply(curl_weight_init)
        self.critic_target = self.make_critic(features_extractor=self.make_features_extractor())
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.critic_target.set_training_mode(False)
        for p in self.critic_target.parameters():
            p.requires_grad_(False)
        self.actor.optimizer = adam(self.actor.parameters(), lr=self.actor_lr, betas=self.betas)
        self.critic.optimizer = adam(self.critic.parameters(), lr=self.critic_lr, betas=self.betas)

    def make_actor(self, features_extractor: BaseFeaturesExtractor | None = None) -> CurlActor:
        """A :class:`CurlActor` (log σ bounded by ``log_std_squash``) on ``features_extractor``."""
        actor_kwargs = self._update_features_extractor(self.actor_kwargs, features_extractor)
        return CurlActor(**actor_kwargs, log_std_squash=self.log_std_squash).to(self.device)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        fe = self.features_extractor_kwargs
        data.update(crop=fe["crop"], encoder=fe["encoder"], encoder_hparams=fe["encoder_hparams"],
                    actor_lr=self.actor_lr, critic_lr=self.critic_lr, betas=self.betas,
                    log_std_squash=self.log_std_squash)
        data.pop("features_extractor_kwargs", None)
        data.pop("share_features_extractor", None)
        return data

    # ------------------------------------------------------------------ pieces used by the CURL update
    @property
    def encoder(self) -> CurlFeatures:
        """The online (critic) encoder, trained by the critic and contrastive losses."""
        return self.critic.features_extractor  # type: ignore[return-value]

    @property
    def key_encoder(self) -> CurlFeatures:
        """The critic target's encoder: an EMA of :attr:`encoder`, CURL's key (momentum) encoder."""
        return self.critic_target.features_extractor  # type: ignore[return-value]

    def actor_from_trunk(self, trunk_out: Tensor) -> tuple[Tensor, Tensor]:
        """Sampled squashed actions and log-probabilities ``([B, A], [B])`` from conv-trunk features."""
        actor: CurlActor = self.actor  # type: ignore[assignment]
        mean, log_std = actor.dist_params(actor.features_extractor.head_forward(trunk_out))
        return actor.action_dist.log_prob_from_params(mean, log_std)


def q_values(critic: nn.Module, features: Tensor, actions: Tensor) -> list[Tensor]:
    """Each Q-network on ``(features, actions)``: list of ``[B, 1]`` (features computed elsewhere)."""
    x = torch.cat([features, actions], dim=1)
    return [q(x) for q in critic.q_networks]
