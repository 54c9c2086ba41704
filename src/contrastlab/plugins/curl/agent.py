"""CURL: pixel SAC with a contrastive auxiliary loss, as a subclass of stable-baselines3's SAC.

Srinivas, Laskin & Abbeel, "CURL" (2020), §4 and appendix A; the debiased variants follow Chuang et al.,
"Debiased Contrastive Learning" (2020), Table 3 (losses-spec.md §3.5(d)). One gradient step does, in order:

1. sample a batch of uint8 stacks; crop on the training device: one random crop of ``obs`` (the critic input and
   the contrastive anchor), ``M`` further random crops of ``obs`` (the positive keys), one of ``next_obs``;
2. critic update: ``y = r + γ(1-d)(min_i Q̄_i(s', a') - α log π(a'|s'))``, ``a' ~ π(·|s')``; the loss
   ``Σ_i MSE(Q_i(s, a), y)`` trains the Q-heads *and the encoder* (one Adam step of the critic optimiser);
3. every ``actor_update_freq`` steps: actor and entropy-temperature update on detached conv features, target
   entropy ``-|A|``. ``actor_features="recompute"`` encodes ``obs`` again with the encoder just updated in step 2,
   as CURL's code does (that pass doubles as step 5's anchor pass, which the encoder's weights have not moved
   since); ``"reuse"`` reuses the conv output of step 2 (as DrQ-v2 does).
   The temperature loss is CURL's ``α·(-log π - H̄)`` (``alpha_loss="alpha"``) or SB3's ``log α·(-log π - H̄)``
   (``"log_alpha"``); their gradients w.r.t. ``log α`` differ by the factor ``α``;
4. every ``target_update_freq`` steps: EMA of the Q-heads (``τ = critic_tau``) and of the encoder into the key
   encoder (``τ = encoder_tau``);
5. contrastive update: ``q = f_θ(anchor)``, ``k_m = f_ξ(pos_m)`` (no gradient), the sampler turns ``(q, {k_m})``
   into a :class:`~contrastlab.ContrastiveBatch` (bilinear ``qᵀWk`` by default; negatives = the other keys) and
   any registered loss is minimised by one Adam optimiser over the encoder, the sampler (``W``) and the loss.
   ``contrastive_encoder_steps = k`` gives the encoder ``k`` identical Adam steps of this gradient: CURL's code
   holds the encoder in two optimisers (``encoder_optimizer`` and ``cpc_optimizer``, its issues #20/#28), which
   see the same gradients, keep the same moments and so move it twice as far; here that is the encoder's
   parameter group at ``k ×`` the learning rate, the same update in one optimiser.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

import torch
import torch.nn.functional as F
from stable_baselines3 import SAC
from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.logger import HumanOutputFormat, Logger
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.utils import polyak_update
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv
from torch import Tensor, nn

from contrastlab.plugins.curl.augment import random_crop, random_crops
from contrastlab.plugins.curl.fast import adam, speed_flags, use_fused_kernel
from contrastlab.plugins.curl.policy import CurlSACPolicy, LogStdSquash, q_values

AlphaLoss = Literal["alpha", "log_alpha"]
ActorFeatures = Literal["recompute", "reuse"]


def optimized_parameters(optimizer: torch.optim.Optimizer) -> list[Tensor]:
    """Every parameter ``optimizer`` steps, in its parameter groups' order."""
    return [param for group in optimizer.param_groups for param in group["params"]]


def top1_accuracy(batch: Any) -> Tensor:
    """Fraction of anchors whose numerator positive (column 0) outscores every valid negative (0-d tensor); 1 for a
    batch without negatives (a queue sampler's first call)."""
    with torch.no_grad():
        pos = batch.pos_logits[:, 0]  # [A]
        if batch.neg_logits.shape[1] == 0:
            return torch.ones((), device=pos.device)
        neg = batch.neg_logits.masked_fill(~batch.valid_mask(), float("-inf"))
        return (pos > neg.max(dim=1).values).float().mean()


class CurlSAC(SAC):
    """SB3 ``SAC`` with CURL's encoder arrangement, update schedule and contrastive update.

    ``loss`` and ``sampler`` are registered components (``cl.make_loss``, ``cl.make_sampler``); the sampler is
    called as ``sampler(queries [B, d], keys)`` with ``keys`` one ``[B, d]`` tensor (``M = 1``) or a list of
    ``M`` of them. ``alpha_loss``, ``actor_features``, ``contrastive_encoder_steps`` and ``log_std_squash`` choose
    between CURL's code and the cheaper or SB3 forms (module docstring). Other keyword arguments go to ``SAC``.
    """

    policy: CurlSACPolicy

    def __init__(
        self,
        env: Any,
        loss: nn.Module,
        sampler: nn.Module,
        *,
        num_positives: int = 1,
        crop: int = 84,
        encoder: str = "pixel_conv",
        encoder_hparams: dict[str, Any] | None = None,
        hidden_dim: int = 1024,
        actor_lr: float = 1e-3,
        critic_lr: float = 1e-3,
        encoder_lr: float = 1e-3,
        alpha_lr: float = 1e-4,
        alpha_beta: float = 0.5,
        init_temperature: float = 0.1,
        critic_tau: float = 0.01,
        encoder_tau: float = 0.05,
        actor_update_freq: int = 2,
        target_update_freq: int = 2,
        alpha_loss: AlphaLoss = "alpha",
        actor_features: ActorFeatures = "reuse",
        contrastive_encoder_steps: int = 1,
        log_std_squash: LogStdSquash = "tanh",
        fast_sample: bool = True,
        channels_last: bool = True,
        bf16: bool = False,
        compile: bool = False,
        **sac_kwargs: Any,
    ) -> None:
        """Build the agent; see the module docstring for the meaning of every setting (CURL appendix A)."""
        if num_positives < 1:
            raise ValueError(f"num_positives must be >= 1, got {num_positives}")
        if contrastive_encoder_steps < 1:
            raise ValueError(f"contrastive_encoder_steps must be >= 1, got {contrastive_encoder_steps}")
        if alpha_loss not in ("alpha", "log_alpha"):
            raise ValueError(f"alpha_loss must be 'alpha' or 'log_alpha', got {alpha_loss!r}")
        if actor_features not in ("recompute", "reuse"):
            raise ValueError(f"actor_features must be 'recompute' or 'reuse', got {actor_features!r}")
        self.alpha_loss, self.actor_features = alpha_loss, actor_features
        self.contrastive_encoder_steps, self.fast_sample = contrastive_encoder_steps, fast_sample
        self.speed = dict(channels_last=channels_last, bf16=bf16, compile=compile)
        self.contrastive_loss, self.sampler = loss, sampler
        self.num_positives, self.crop = num_positives, crop
        self.encoder_lr, self.alpha_lr, self.alpha_beta = encoder_lr, alpha_lr, alpha_beta
        self.encoder_tau, self.actor_update_freq = encoder_tau, actor_update_freq
        self.stats: dict[str, Tensor] = {}
        """Statistics of the last update as detached 0-d tensors (no host sync inside an update)."""
        self._stat_sums: dict[str, list[Tensor]] = {}
        policy_kwargs = dict(net_arch=[hidden_dim, hidden_dim], crop=crop, encoder=encoder,
                             encoder_hparams=encoder_hparams, actor_lr=actor_lr, critic_lr=critic_lr,
                             log_std_squash=log_std_squash)
        policy_kwargs.update(sac_kwargs.pop("policy_kwargs", None) or {})
        super().__init__(
            CurlSACPolicy, env, learning_rate=critic_lr, tau=critic_tau, ent_coef=f"auto_{init_temperature}",
            target_update_interval=target_update_freq, policy_kwargs=policy_kwargs, **sac_kwargs,
        )
        if self.tensorboard_log is None:
            # SB3 would give its logger a new empty folder under the temp dir (``SB3-<date>``) at every ``learn``;
            # the platform logs through its Run, so SB3's logger writes at most to stdout (``verbose >= 1``)
            self.set_logger(Logger(None, [HumanOutputFormat(sys.stdout)] if self.verbose >= 1 else []))

    @staticmethod
    def _wrap_env(env: Any, verbose: int = 0, monitor_wrapper: bool = True) -> VecEnv:
        """SB3's wrapping (``Monitor``, ``DummyVecEnv``) without its ``VecTransposeImage``.

        SB3 reads an image space whose first axis is not its smallest as channels-last and transposes it: a stack
        of more channels (3 · ``env.frame_stack``) than pixels per side became ``[H, C, W]`` and the agent could
        not be built. The pixel stacks are channel-first by construction (``[3·k, H, W]``).
        """
        if isinstance(env, VecEnv):
            return env
        if monitor_wrapper and not is_wrapped(env, Monitor):
            env = Monitor(env)
        return DummyVecEnv([lambda: env])

    def _setup_model(self) -> None:
        super()._setup_model()
        speed_flags(self.policy, **self.speed)
        self.ent_coef_optimizer = adam([self.log_ent_coef], lr=self.alpha_lr, betas=(self.alpha_beta, 0.999))
        self.contrastive_loss.to(self.device)
        self.sampler.to(self.device)
        encoder_lr = self.encoder_lr * self.contrastive_encoder_steps  # k identical Adam steps (module docstring)
        groups = [{"params": list(self.policy.encoder.parameters()), "lr": encoder_lr},
                  {"params": [*self.sampler.parameters(), *self.contrastive_loss.parameters()]}]
        self.contrastive_optimizer = adam(groups, lr=self.encoder_lr, betas=self.policy.betas)

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "contrastive_loss", "sampler", "contrastive_optimizer"]

    # ------------------------------------------------------------------ one gradient step
    def train(self, gradient_steps: int, batch_size: int = 64) -> None:
        """Run ``gradient_steps`` CURL updates; the last one's statistics land in :attr:`stats`."""
        self.policy.set_training_mode(True)
        for _ in range(gradient_steps):
            self.stats = self.update(batch_size)
            for key, value in self.stats.items():
                self._stat_sums.setdefault(key, []).append(value)

    def pop_stats(self) -> dict[str, float]:
        """Mean of every update statistic since the previous call (empty before the first update); the one host
        synchronisation of the statistics happens here."""
        means = {key: float(torch.stack([v.float() for v in values]).mean()) for key, values in self._stat_sums.items()}
        self._stat_sums = {}
        return means

    def update(self, batch_size: int) -> dict[str, Tensor]:
        """One CURL update (steps 1-5 of the module docstring); returns its scalar statistics."""
        self._n_updates += 1
        views, data = self.sample_views(batch_size)  # uint8 [B, C, S, S] each
        encoder, key_encoder, critic = self.policy.encoder, self.policy.key_encoder, self.policy.critic
        # each batch of crops converted once (float /255, channels-last) for every forward pass that reads it
        obs, next_obs = encoder.prepare(views[0]), encoder.prepare(data.next_observations)
        positives = encoder.prepare(views[1] if len(views) == 2 else torch.cat(views[1:]))  # [M·B, C, S, S]
        ent_coef = torch.exp(self.log_ent_coef.detach())
        stats: dict[str, Tensor] = {"ent_coef": ent_coef}

        # 2. critic (trains the encoder)
        with torch.no_grad():
            next_actions, next_log_prob = self.policy.actor_from_trunk(encoder.trunk(next_obs))
            next_q = torch.cat(q_values(self.critic_target, key_encoder(next_obs), next_actions), dim=1)
            next_q = next_q.min(dim=1, keepdim=True).values - ent_coef * next_log_prob.reshape(-1, 1)
            target_q = data.rewards + (1.0 - data.dones) * self.gamma * next_q  # [B, 1]
        trunk_out = encoder.trunk(obs)  # the conv feature map
        current_q = q_values(critic, encoder.net.head(trunk_out), data.actions)
        critic_loss = sum(F.mse_loss(q, target_q) for q in current_q)
        critic.optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        critic.optimizer.step()
        stats["critic_loss"] = critic_loss.detach()

        # 3. actor and temperature on detached conv features
        queries = None  # f_θ(obs) of step 5, when this step has computed it
        if self._n_updates % self.actor_update_freq == 0:
            if self.actor_features == "recompute":  # with the encoder the critic step just updated
                # Neither the actor/α step nor the target EMA moves the encoder, so this pass, kept with its graph,
                # is also step 5's anchor f_θ(obs) (CURL's code runs the same convolutions twice).
                actor_trunk = encoder.trunk(obs)
                queries = encoder.net.head(actor_trunk)
                actor_trunk, features = actor_trunk.detach(), queries.detach()
            else:
                actor_trunk = trunk_out.detach()
                with torch.no_grad():
                    features = encoder.net.head(actor_trunk)
            actions_pi, log_prob = self.policy.actor_from_trunk(actor_trunk)  # [B, A], [B]
            q_pi = torch.cat(q_values(critic, features, actions_pi), dim=1).min(dim=1).values  # [B]
            actor_loss = (ent_coef * log_prob - q_pi).mean()
            self.actor.optimizer.zero_grad(set_to_none=True)
            # gradients for the actor's parameters only: the Q-heads' weight gradients are never computed
            actor_loss.backward(inputs=optimized_parameters(self.actor.optimizer))
            self.actor.optimizer.step()
            alpha_loss = self.temperature_loss(log_prob)
            self.ent_coef_optimizer.zero_grad(set_to_none=True)  # type: ignore[union-attr]
            alpha_loss.backward()
            self.ent_coef_optimizer.step()  # type: ignore[union-attr]
            stats.update(actor_loss=actor_loss.detach(), entropy_loss=alpha_loss.detach(),
                         entropy=-log_prob.detach().mean())

        # 4. targets: Q-heads with critic_tau, encoder (= key encoder) with encoder_tau
        if self._n_updates % self.target_update_interval == 0:
            self.soft_update_targets()

        # 5. contrastive update
        stats.update(self.contrastive_update(obs, positives, queries=queries))
        return stats

    def sample_views(self, batch_size: int) -> tuple[list[Tensor], Any]:
        """``1 + M`` random crops of a replay batch's ``obs`` and the batch, whose ``next_observations`` is a random
        crop of ``next_obs`` (uint8). ``fast_sample`` with a host-side frame ring: crops copied straight from the
        ring (:meth:`FrameStackReplayBuffer.sample_crops`, the same tensors); else sample, then crop on the device.
        """
        buffer = self.replay_buffer
        if self.fast_sample and getattr(buffer, "device_frames", True) is None:
            return buffer.sample_crops(batch_size, self.crop, 1 + self.num_positives)  # type: ignore[union-attr]
        data = buffer.sample(batch_size, env=self._vec_normalize_env)  # type: ignore[union-attr]
        views = random_crops(data.observations, self.crop, 1 + self.num_positives)
        return views, data._replace(next_observations=random_crop(data.next_observations, self.crop))

    def temperature_loss(self, log_prob: Tensor) -> Tensor:
        """The entropy-temperature loss of log-probabilities ``[B]`` of fresh actions (gradient only to log α).

        ``alpha_loss="alpha"`` (CURL): ``mean(α · (-log π - H̄))`` with ``α = exp(log α)``, so
        ``∂/∂log α = α · mean(-log π - H̄)``; ``"log_alpha"`` (SB3): ``mean(log α · (-log π - H̄))``, gradient
        ``mean(-log π - H̄)``. Both push α up when the entropy ``-log π`` is below the target ``H̄ = -|A|``.
        """
        gap = (-log_prob.detach() - self.target_entropy)  # [B]
        coef = torch.exp(self.log_ent_coef) if self.alpha_loss == "alpha" else self.log_ent_coef
        return (coef * gap).mean()

    def contrastive_update(self, anchor: Tensor, positives: Tensor | list[Tensor],
                           queries: Tensor | None = None) -> dict[str, Tensor]:
        """One step of the registered loss on ``(f_θ(anchor), [f_ξ(p_m)])``.

        ``positives``: the ``M`` crops as one ``[M·B, C, S, S]`` tensor (crop ``m`` of anchor ``b`` at row
        ``m·B + b``) or as a list of ``M`` tensors ``[B, C, S, S]``. ``queries``: ``f_θ(anchor)`` ``[B, d]`` with its
        graph when the caller has computed it with the encoder's current weights (else computed here)."""
        encoder, key_encoder = self.policy.encoder, self.policy.key_encoder
        if queries is None:
            queries = encoder(anchor)  # [B, d]
        if isinstance(positives, list):
            positives = torch.cat(positives)
        with torch.no_grad():
            keys = key_encoder(positives).split(anchor.shape[0])  # M × [B, d]
        batch = self.sampler(queries, keys[0] if len(keys) == 1 else list(keys))
        loss = self.contrastive_loss(batch)
        self.contrastive_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.contrastive_optimizer.step()
        # clamped_frac: anchors at the debiased losses' floor/guard (DCL/HCL/PUCL/DebiasedPos; none for InfoNCE)
        return {"contrastive_loss": loss.detach(), "contrastive_top1": top1_accuracy(batch),
                **getattr(self.contrastive_loss, "last_stats", {})}

    def soft_update_targets(self) -> None:
        """EMA update: Q-heads ``θ̄ ← τθ + (1-τ)θ̄`` with ``critic_tau``, the encoder with ``encoder_tau``."""
        q_src = [p for n, p in self.critic.named_parameters() if not n.startswith("features_extractor.")]
        q_dst = [p for n, p in self.critic_target.named_parameters() if not n.startswith("features_extractor.")]
        polyak_update(q_src, q_dst, self.tau)
        polyak_update(self.policy.encoder.parameters(), self.policy.key_encoder.parameters(), self.encoder_tau)

    def optimizers(self) -> list[torch.optim.Adam]:
        """The agent's four Adam optimisers: actor, critic (with the encoder), contrastive, temperature."""
        return [self.actor.optimizer, self.critic.optimizer, self.contrastive_optimizer,
                self.ent_coef_optimizer]  # type: ignore[list-item]

    # ------------------------------------------------------------------ checkpoint state
    def training_state(self) -> dict[str, Any]:
        """Everything needed to resume updates: networks, optimisers, temperature, counters."""
        return {
            "policy": self.policy.state_dict(),
            "actor_optimizer": self.actor.optimizer.state_dict(),
            "critic_optimizer": self.critic.optimizer.state_dict(),
            "contrastive_optimizer": self.contrastive_optimizer.state_dict(),
            "ent_coef_optimizer": self.ent_coef_optimizer.state_dict(),  # type: ignore[union-attr]
            "log_ent_coef": self.log_ent_coef.detach().cpu(),
            "sampler": self.sampler.state_dict(),
            "loss": self.contrastive_loss.state_dict(),
            "num_timesteps": self.num_timesteps,
            "n_updates": self._n_updates,
            "episode_num": self._episode_num,
            # later than agent.init_steps after a resume without the replay buffer (its refill)
            "learning_starts": self.learning_starts,
            # the random actions of the warm-up (and of a refill after a resume without the replay buffer)
            "action_space_rng": self.action_space.np_random.bit_generator.state,
            # the update statistics not yet logged: a checkpoint between two logs (a Ctrl-C) loses none of them
            "update_stats": {key: torch.stack([v.float() for v in values]).cpu()
                             for key, values in self._stat_sums.items()},
        }

    def load_training_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`training_state`."""
        self.policy.load_state_dict(state["policy"])
        self.actor.optimizer.load_state_dict(state["actor_optimizer"])
        self.critic.optimizer.load_state_dict(state["critic_optimizer"])
        self.contrastive_optimizer.load_state_dict(state["contrastive_optimizer"])
        self.ent_coef_optimizer.load_state_dict(state["ent_coef_optimizer"])  # type: ignore[union-attr]
        with torch.no_grad():
            self.log_ent_coef.copy_(state["log_ent_coef"].to(self.device))
        for optimizer in self.optimizers():
            use_fused_kernel(optimizer)  # a checkpoint saved before the fused kernel
        self.sampler.load_state_dict(state["sampler"])
        self.contrastive_loss.load_state_dict(state["loss"])
        self.num_timesteps = int(state["num_timesteps"])
        self._n_updates = int(state["n_updates"])
        self._stat_sums = {key: list(values.to(self.device).unbind(0))
                           for key, values in state.get("update_stats", {}).items()}
        self._episode_num = int(state["episode_num"])
        self.learning_starts = max(self.learning_starts, int(state.get("learning_starts", 0)))
        if "action_space_rng" in state:  # older checkpoints: re-seeded from the config, as the run's start was
            self.action_space.np_random.bit_generator.state = state["action_space_rng"]
