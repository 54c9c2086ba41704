"""Typed config and presets of the ``curl`` plugin (defaults: CURL paper, appendix A / Table 3).

Steps are counted in *environment frames* (agent steps × action repeat), the unit of the CURL paper's
"environment steps"; ``checkpoint_every`` uses the same unit.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from contrastlab.platform.task import MAX_WIDTH, ComponentSpec, Section, TaskConfig


class EnvSection(Section):
    """The DeepMind Control Suite task and how it is rendered."""

    domain: str = "cartpole"
    """dm-control suite domain (e.g. cartpole, cheetah, finger, walker, reacher, ball_in_cup)."""
    task: str = "swingup"
    """Task of the domain (e.g. swingup, run, spin, walk, easy, catch)."""
    render_size: int = Field(default=100, ge=1)
    """Side of the rendered square frames in pixels (CURL: 100; the agent crops to ``agent.crop``)."""
    frame_stack: int = Field(default=3, ge=1, le=32)
    """Number of stacked frames in an observation (CURL: 3; at most 32, a batch of deeper stacks fills memory)."""
    action_repeat: int | None = None
    """Physics steps per action; empty = CURL's per-task value (cartpole 8, finger/walker 2, others 4)."""
    camera_id: int = Field(default=0, ge=-1)
    """MuJoCo camera to render (CURL: 0; -1: the free camera)."""
    low_cost_render: bool = True
    """Render without shadows and MSAA (≈5× faster; the images differ, most on reacher); false = dm-control's
    default quality, which CURL trains on (the ``paper`` preset)."""


class AgentSection(Section):
    """SAC + contrastive learning settings (CURL appendix A, Table 3)."""

    crop: int = Field(default=84, ge=1)
    """Side of the random crops fed to the encoder (CURL: 84 from 100 px renders); evaluation centre-crops."""
    batch_size: int = Field(default=512, ge=2)
    """Replay batch size of each update (CURL paper: 512; its run.sh uses 128)."""
    buffer_size: int = Field(default=100_000, ge=1)
    """Replay capacity in transitions (CURL: 100k)."""
    init_steps: int = Field(default=1000, ge=1)
    """Agent steps of uniformly random actions before the first update (CURL: 1000)."""
    hidden_dim: int = Field(default=1024, ge=1, le=MAX_WIDTH)
    """Width of the two hidden layers of the actor and the critics (CURL: 1024)."""
    lr: float | None = Field(default=None, gt=0)
    """Actor, critic and encoder learning rate; empty = CURL's 2e-4 for cheetah, 1e-3 otherwise."""
    alpha_lr: float = Field(default=1e-4, gt=0)
    """Learning rate of the entropy temperature (CURL: 1e-4)."""
    alpha_beta: float = Field(default=0.5, ge=0, lt=1)
    """Adam β₁ of the temperature optimiser (CURL: 0.5; the others use 0.9)."""
    init_temperature: float = Field(default=0.1, gt=0)
    """Initial entropy coefficient α (CURL: 0.1)."""
    gamma: float = Field(default=0.99, gt=0, le=1)
    """Discount factor (CURL: 0.99)."""
    critic_tau: float = Field(default=0.01, gt=0, le=1)
    """EMA rate of the target Q-heads (CURL: 0.01)."""
    encoder_tau: float = Field(default=0.05, gt=0, le=1)
    """EMA rate of the key (target) encoder (CURL: 0.05)."""
    actor_update_freq: int = Field(default=2, ge=1)
    """Update the actor and temperature every this many updates (CURL: 2)."""
    target_update_freq: int = Field(default=2, ge=1)
    """Update the targets every this many updates (CURL: 2)."""
    num_positives: int = Field(default=1, ge=1)
    """Positive keys per anchor, M (each another random crop); M = 2 reproduces DCL Table 3's M = 2 rows."""
    alpha_loss: Literal["alpha", "log_alpha"] = "alpha"
    """Temperature loss: ``alpha`` = CURL's ``α·(-log π - H̄)``; ``log_alpha`` = SB3's ``log α·(-log π - H̄)``."""
    log_std_squash: Literal["tanh", "clamp"] = "tanh"
    """Actor log σ bound: ``tanh`` = CURL's tanh rescaled into [-10, 2]; ``clamp`` = SB3's clip to [-20, 2]."""
    contrastive_encoder_steps: int = Field(default=1, ge=1)
    """Adam steps of the contrastive gradient on the encoder per update (CURL's code: 2, its issues #20/#28)."""
    actor_features: Literal["recompute", "reuse"] = "reuse"
    """Actor/α input: ``recompute`` the detached conv features after the critic step (CURL's code; that pass is
    also the contrastive anchor pass) or ``reuse`` those computed before it (DrQ-v2's form); the same cost."""
    tune_malloc: bool = True
    """Keep freed memory in glibc's heap instead of mmap/munmap per update (process-wide ``mallopt``; issue 10
    measured batch 512 2.6× faster on a 2-core CPU with the same setting; no-op off glibc; docs/curl.md "Speed")."""
    channels_last: bool = True
    """Channels-last (NHWC) conv trunks and inputs: oneDNN's faster convolutions on a CPU (the trunk's forward +
    backward ≈1.5× faster at batch 128 on the 2-core EPYC) and on recent GPUs; the same numbers to rounding."""
    bf16: bool = False
    """Run the conv trunks under bf16 autocast (weights, optimisers and losses stay float32; GPUs with bf16)."""
    compile: bool = False
    """``torch.compile`` the conv trunks (the first updates pay the compilation; same numbers to rounding)."""
    fast_sample: bool = True
    """On a host-side replay buffer, copy the random crops straight from the frame ring (one gather per view, no
    full-size stacks); the same samples as sampling then cropping (tested)."""

    def learning_rate(self, domain: str) -> float:
        """The actor/critic/encoder learning rate for ``domain`` (``lr`` or CURL's per-task value)."""
        if self.lr is not None:
            return self.lr
        return 2e-4 if domain == "cheetah" else 1e-3


class TrainSection(Section):
    """Budget, evaluation and checkpoint contents."""

    env_frames: int = Field(default=100_000, ge=1)
    """Training budget in environment frames (CURL/DCL report 100k and 500k)."""
    eval_every_frames: int = Field(default=10_000, ge=1)
    """Evaluate every this many environment frames (and at the start and the end)."""
    log_every_frames: int = Field(default=1000, ge=1)
    """Log the mean training losses, the entropy coefficient and the rates every this many environment frames."""
    eval_episodes: int = Field(default=10, ge=1)
    """Episodes per evaluation, deterministic policy, centre crop (CURL: 10)."""
    save_buffer: bool = True
    """Save the replay buffer with the newest checkpoint (older ones resume with an empty buffer), so that
    --resume continues exactly (≈3 GB at 100k)."""


class CurlConfig(TaskConfig):
    """Config of ``platform train --plugin curl``."""

    loss: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="infonce"))
    """Contrastive loss (``infonce`` is CURL); any unsupervised registered loss drops in."""
    sampler: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="query_key"))
    """Sampler building logits from queries and keys (CURL: bilinear ``query_key``)."""
    encoder: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="pixel_conv"))
    """Pixel encoder (CURL: ``pixel_conv``, 4 conv × 32, latent 50, LayerNorm)."""
    checkpoint_every: int = Field(default=50_000, ge=1)
    """Save a checkpoint every this many environment frames; always at the end."""
    env: EnvSection = Field(default_factory=EnvSection)
    """The environment."""
    agent: AgentSection = Field(default_factory=AgentSection)
    """The SAC + contrastive agent."""
    train: TrainSection = Field(default_factory=TrainSection)
    """Budget, evaluation and checkpoints."""


PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {
        "sampler": {"name": "query_key"},
        "encoder": {"name": "pixel_conv"},
        "checkpoint_every": 800,
        "env": {"domain": "cartpole", "task": "swingup", "low_cost_render": True},
        "agent": {"batch_size": 32, "buffer_size": 5000, "init_steps": 100},
        "train": {"env_frames": 1600, "eval_every_frames": 800, "log_every_frames": 400, "eval_episodes": 2},
    },
    "paper": {
        "sampler": {"name": "query_key"},
        "encoder": {"name": "pixel_conv"},
        "checkpoint_every": 50_000,
        "env": {"low_cost_render": False},
        "agent": {"batch_size": 512, "buffer_size": 100_000, "init_steps": 1000, "alpha_loss": "alpha",
                  "log_std_squash": "tanh", "contrastive_encoder_steps": 2, "actor_features": "recompute"},
        "train": {"env_frames": 100_000, "eval_every_frames": 10_000, "eval_episodes": 10},
    },
}
"""``smoke``: a CPU check (about 35 s, docs/curl.md "Presets"), low-cost rendering; ``paper``: CURL's settings
and, where the paper is silent, its code's (full-quality rendering, the encoder's two contrastive Adam steps,
recomputed actor features; docs/curl.md, "Paper fidelity"); ``--set train.env_frames=500000`` for the 500k budget."""
