"""The ``curl`` task plugin: CURL-style pixel SAC on the DeepMind Control Suite with any registered loss.

``platform train --plugin curl --loss pucl`` trains :class:`~contrastlab.plugins.curl.agent.CurlSAC` through
SB3's ``learn`` loop; a callback evaluates, logs against environment frames and checkpoints between updates.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback

import contrastlab as cl
from contrastlab.platform.errors import ConfigError
from contrastlab.platform.run import Run
from contrastlab.platform.task import EvalOptions, TaskPlugin
from contrastlab.plugins.curl.config import PRESETS, CurlConfig

FRAMES = "_vs_env_frames"
"""Suffix of every TensorBoard tag: the x-axis is environment frames (agent steps × action repeat)."""


def action_repeat(config: CurlConfig) -> int:
    """The configured action repeat, or CURL's value for the domain."""
    from contrastlab.envs import curl_action_repeat

    return config.env.action_repeat if config.env.action_repeat is not None else curl_action_repeat(config.env.domain)


def make_env(config: CurlConfig, seed: int | None = None) -> Any:
    """The pixel environment of ``config``."""
    from contrastlab.envs import DMCPixelEnv

    e = config.env
    return DMCPixelEnv(e.domain, e.task, render_size=e.render_size, frame_stack=e.frame_stack,
                       action_repeat=action_repeat(config), camera_id=e.camera_id,
                       low_cost_render=e.low_cost_render, seed=seed)


def embed_dim(config: CurlConfig) -> int:
    """Size of the encoder's latent (the queries and keys the sampler receives): ``pixel_conv``'s ``latent_dim``."""
    return int(config.encoder.hparams().get("latent_dim", 50))


def fed_inputs(config: CurlConfig) -> frozenset[str]:
    """The sampler inputs curl feeds: queries against ``M = agent.num_positives`` key sets of the target encoder
    (``query_key``); with ``M = 1`` one key per query called once per update, which a ``queue`` also consumes."""
    return frozenset({"query_key", "queue"}) if config.agent.num_positives == 1 else frozenset({"query_key"})


def make_contrastive(config: CurlConfig) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The loss and the sampler of ``config``; the sampler gets the encoder's latent size as ``embed_dim``."""
    loss = cl.make_loss(config.loss.name, **config.loss.hparams())
    return loss, cl.make_sampler(config.sampler.name, embed_dim=embed_dim(config), **config.sampler.hparams())


def make_agent(config: CurlConfig, env: Any, device: torch.device | str) -> Any:
    """A :class:`CurlSAC` for ``config`` on ``env`` (wrapped in SB3's DummyVecEnv by SB3)."""
    from contrastlab.plugins.curl.agent import CurlSAC
    from contrastlab.plugins.curl.buffer import FrameStackReplayBuffer

    a = config.agent
    if a.tune_malloc:
        from contrastlab.plugins.curl.fast import tune_malloc

        tune_malloc()
    lr = a.learning_rate(config.env.domain)
    loss, sampler = make_contrastive(config)
    return CurlSAC(
        env, loss, sampler, num_positives=a.num_positives, crop=a.crop, encoder=config.encoder.name,
        encoder_hparams=config.encoder.hparams(), hidden_dim=a.hidden_dim, actor_lr=lr, critic_lr=lr,
        encoder_lr=lr, alpha_lr=a.alpha_lr, alpha_beta=a.alpha_beta, init_temperature=a.init_temperature,
        critic_tau=a.critic_tau, encoder_tau=a.encoder_tau, actor_update_freq=a.actor_update_freq,
        target_update_freq=a.target_update_freq, alpha_loss=a.alpha_loss, actor_features=a.actor_features,
        contrastive_encoder_steps=a.contrastive_encoder_steps, log_std_squash=a.log_std_squash,
        fast_sample=a.fast_sample, channels_last=a.channels_last, bf16=a.bf16, compile=a.compile,
        buffer_size=a.buffer_size, learning_starts=a.init_steps,
        batch_size=a.batch_size, gamma=a.gamma, train_freq=1, gradient_steps=1,
        replay_buffer_class=FrameStackReplayBuffer, seed=config.seed, device=device, verbose=0,
    )


def evaluate_agent(agent: Any, env: Any, episodes: int, seed: int) -> dict[str, float]:
    """Mean and std of ``episodes`` deterministic returns."""
    from contrastlab.plugins.curl.evaluate import run_episodes

    returns = run_episodes(agent, env, episodes, seed=seed)
    return {"eval/episode_return": float(np.mean(returns)), "eval/episode_return_std": float(np.std(returns))}


class _TrainLoop(BaseCallback):
    """Runs between SB3's environment steps: episode bookkeeping, logging, evaluation, checkpoints."""

    def __init__(self, config: CurlConfig, run: Any, eval_env: Any, bar: Any, loop_state: dict[str, Any]) -> None:
        super().__init__()
        self.config, self.run, self.eval_env, self.bar = config, run, eval_env, bar
        self.repeat = action_repeat(config)
        self.state = loop_state  # next_eval, last_eval; checkpointed
        self.episode_return = 0.0
        self.clock = (time.monotonic(), None, None)  # (time, frames, updates) of the last rate measurement
        self.started = time.monotonic()  # this process's share of train_seconds counts from here

    def train_seconds(self) -> float:
        """Training seconds summed over resumes: those saved in the checkpoint resumed from, plus this process's
        (the time of work lost after that checkpoint is left out, like the work itself)."""
        return float(self.state.get("train_seconds", 0.0)) + time.monotonic() - self.started

    @property
    def frames(self) -> int:
        """Environment frames so far (agent steps × action repeat)."""
        return int(self.model.num_timesteps) * self.repeat

    def _rates(self) -> dict[str, float]:
        now, frames, updates = time.monotonic(), self.frames, int(self.model._n_updates)
        t0, f0, u0 = self.clock
        self.clock = (now, frames, updates)
        if f0 is None or now <= t0 or frames == f0:
            return {}
        return {f"perf/frames_per_second{FRAMES}": (frames - f0) / (now - t0),
                f"perf/updates_per_second{FRAMES}": (updates - u0) / (now - t0)}

    first_step_resumed = False  # a resumed run's first step: SB3 updates after it, so its pace is the warm-up's

    def _on_training_start(self) -> None:
        self.clock = (time.monotonic(), self.frames, int(self.model._n_updates))
        if self.model.num_timesteps < self.model.learning_starts:  # the warm-up's pace says nothing of the rest
            self.bar.hold_eta("warm-up, no updates yet")
        elif self.model.num_timesteps > 0:  # resumed: one step without its update would promise seconds
            self.bar.hold_eta("resumed, no update yet")
            self.first_step_resumed = True

    def _on_step(self) -> bool:
        self.episode_return += float(self.locals["rewards"][0])
        self.bar.update(self.repeat)
        if self.model.num_timesteps == self.model.learning_starts or self.first_step_resumed:
            self.first_step_resumed = False  # updates start (or go on): the ETA from their pace
            self.bar.restart_rate()
        if self.locals["dones"][0]:
            self.run.log({f"train/episode_return{FRAMES}": self.episode_return}, step=self.frames)
            self.bar.update(0, ret=f"{self.episode_return:.1f}")
            self.episode_return = 0.0
        return True

    def _on_rollout_start(self) -> None:
        if self.frames >= self.state["next_log"]:
            self.log_training()
        self.maybe_evaluate()
        # not again at the frame a resumed run's checkpoint was taken (at 100k transitions, a 3 GB rewrite)
        if self.run.checkpoint_due(self.frames) and self.state.get("last_ckpt_frames") != self.frames:
            self.checkpoint()

    def log_training(self) -> None:
        """Log the mean update statistics since the last log, and the frame and update rates."""
        metrics = {f"train/{k}{FRAMES}": v for k, v in self.model.pop_stats().items()}
        metrics.update(self._rates())
        if metrics:
            self.run.log(metrics, step=self.frames)
        every = self.config.train.log_every_frames
        self.state["next_log"] = (self.frames // every + 1) * every

    def maybe_evaluate(self, force: bool = False) -> None:
        """Evaluate when ``eval_every_frames`` have passed since the last evaluation (or when forced)."""
        if not force and self.frames < self.state["next_eval"]:
            return
        if force and self.state.get("last_eval_frames") == self.frames:
            return
        t = self.config.train
        with self.bar.side_task():  # not timed as frames when it opens the rate's window (frame 0, first update)
            metrics = evaluate_agent(self.model, self.eval_env, t.eval_episodes, seed=self.config.seed + 10_000 +
                                     self.frames)
        self.state["last_eval"] = metrics
        self.state["last_eval_frames"] = self.frames
        self.state["next_eval"] = (self.frames // t.eval_every_frames + 1) * t.eval_every_frames
        self.run.log({f"{k}{FRAMES}": v for k, v in metrics.items()}, step=self.frames)
        self.bar.update(0, eval=f"{metrics['eval/episode_return']:.1f}")

    def checkpoint(self, final: bool = False) -> None:
        """Save agent, loop state and (optionally) the replay buffer, which only the newest checkpoint keeps
        (``final``: after the last step; a pending Ctrl-C then lets the run finish)."""
        self.state["last_ckpt_frames"] = self.frames
        state: dict[str, Any] = {"agent": self.model.training_state(),
                                 "loop": {**self.state, "train_seconds": self.train_seconds()},
                                 "env_random": self.training_env.env_method("random_state")[0]}  # episode starts
        if self.config.train.save_buffer:
            state["replay_buffer"] = self.model.replay_buffer.state_dict()
        self.run.save_checkpoint(state, step=self.frames, latest_only=("replay_buffer",), final=final)


def check_encoder_fits(config: CurlConfig) -> None:
    """Refuse a ``pixel_conv`` trunk whose layers leave no pixels of the ``agent.crop`` crop (a traceback when the
    agent was built, after the run folder was made)."""
    from contrastlab.encoders.pixel_conv import conv_output_size

    layers = config.encoder.hparams().get("num_layers")
    if config.encoder.name != "pixel_conv" or not isinstance(layers, int):
        return
    crop = config.agent.crop
    if conv_output_size(crop, layers) < 1:
        fits = [n for n in range(1, layers) if conv_output_size(crop, n) >= 1]
        valid = f"at most {fits[-1]} layers at that crop" if fits else "agent.crop >= 3"
        raise ConfigError(f"encoder.num_layers={layers} leaves no pixels of the agent.crop={crop} crop; valid: "
                          f"{valid}")


def check_replay_memory(config: CurlConfig) -> None:
    """Refuse a replay buffer whose frames need more than 90 % of this machine's memory: it filled memory while
    training. Each frame is stored once (RGB, ``render_size``² bytes); the ring is allocated lazily, so only the
    frames the run writes count: one per agent step plus ``frame_stack`` at each episode start (dm-control episodes
    are 1,000 frames), at most ``buffer_size + frame_stack``."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not a POSIX system that reports it
        return
    stack, frames = config.env.frame_stack, config.train.env_frames
    written = math.ceil(frames / action_repeat(config)) + (math.ceil(frames / 1000) + 1) * stack
    need = min(config.agent.buffer_size + stack, written) * 3 * config.env.render_size**2
    if total > 0 and need > 0.9 * total:
        raise ConfigError(f"agent.buffer_size={config.agent.buffer_size} with env.render_size={config.env.render_size}"
                          f" keeps {need / 2**30:.1f} GiB of frames over train.env_frames={frames}, more than 90 % "
                          f"of this machine's {total / 2**30:.1f} GiB of memory; lower agent.buffer_size or "
                          f"env.render_size")


class CurlTask(TaskPlugin[CurlConfig]):
    """CURL (Srinivas, Laskin & Abbeel 2020): pixel SAC + contrastive learning on the DeepMind Control Suite."""

    name = "curl"
    description = "CURL pixel SAC on the DeepMind Control Suite (SB3) with any unsupervised contrastive loss."
    config_model = CurlConfig
    presets = PRESETS
    default_preset = "smoke"
    gpu_presets = frozenset({"paper"})
    sampler_inputs = frozenset({"query_key", "queue"})
    encoders = frozenset({"pixel_conv"})
    primary_metric = "eval/episode_return"
    higher_is_better = True
    checkpoint_on_stop = True  # checkpoint_due is asked between environment steps, after their update
    eval_options = frozenset({"episodes", "video"})

    def label_kinds(self, config: CurlConfig) -> frozenset[str]:
        """RL observations carry no labels."""
        return frozenset()

    def check(self, config: CurlConfig) -> None:
        """Fail before training on bad env/agent settings or a missing renderer (labels: the core pre-flight)."""
        from contrastlab.envs import check_camera, check_rendering, validate_task

        validate_task(config.env.domain, config.env.task)
        if config.env.action_repeat is not None and config.env.action_repeat < 1:
            raise ConfigError(f"env.action_repeat: must be >= 1, got {config.env.action_repeat}")
        if config.agent.crop > config.env.render_size:
            raise ConfigError(f"agent.crop={config.agent.crop} is larger than env.render_size="
                              f"{config.env.render_size}; valid: crop <= render_size")
        if config.agent.batch_size > config.agent.buffer_size:
            raise ConfigError("agent.batch_size must be <= agent.buffer_size")
        check_encoder_fits(config)
        check_rendering()
        check_camera(config.env.domain, config.env.task, config.env.camera_id, config.env.render_size)
        check_replay_memory(config)

    def logged_metrics(self, config: CurlConfig) -> tuple[str, ...]:
        """The evaluation and training returns against environment frames (``eval/episode_return_vs_env_frames``
        every ``train.eval_every_frames``); update statistics left out."""
        return (f"eval/episode_return{FRAMES}", f"eval/episode_return_std{FRAMES}", f"train/episode_return{FRAMES}",
                f"perf/frames_per_second{FRAMES}", f"perf/updates_per_second{FRAMES}")

    def estimate_seconds(self, config: CurlConfig, device: str) -> float | None:
        """≈1 s per update at batch 128 on a CPU (DESIGN.md), scaling with the batch; ≈50× faster on a GPU."""
        steps = math.ceil(config.train.env_frames / action_repeat(config))
        updates = max(0, steps - config.agent.init_steps)
        per_update = config.agent.batch_size / 128 * (1.0 if str(device).startswith("cpu") else 0.02)
        return updates * per_update + steps * 0.005

    def train(self, config: CurlConfig, run: Run) -> dict[str, float]:
        """Train for ``train.env_frames`` environment frames; return the final evaluation and counters."""
        env = make_env(config, seed=config.seed)
        eval_env = make_env(config, seed=config.seed + 1)
        agent = make_agent(config, env, run.device)
        loop_state: dict[str, Any] = {"next_eval": 0, "next_log": 0, "last_eval": None, "last_eval_frames": None}
        state = run.load_checkpoint() if run.resumed else None
        if state is not None:
            agent.load_training_state(state["agent"])
            loop_state.update(state["loop"])
            if "env_random" in state:  # older checkpoints: episodes start as the run's first ones did
                env.restore_random_state(state["env_random"])
            if "replay_buffer" in state:
                agent.replay_buffer.load_state_dict(state["replay_buffer"])
            else:  # an empty buffer: refill it as at the start (init_steps random actions) before updating again
                agent.learning_starts = max(agent.learning_starts, agent.num_timesteps + config.agent.init_steps)
                run.record(resumed_without_replay_buffer_at_frame=agent.num_timesteps * action_repeat(config))
        repeat = action_repeat(config)
        total_steps = math.ceil(config.train.env_frames / repeat)
        # frames the summed training time does not cover: those before a checkpoint that predates train_seconds;
        # kept in the loop state, so every later checkpoint and resume still leaves them out of the rate
        if state is not None and "train_seconds" not in loop_state:
            loop_state["untimed_frames"] = agent.num_timesteps * repeat
        uncounted = int(loop_state.get("untimed_frames", 0))
        started = agent.num_timesteps
        with run.progress(total_steps * repeat, description=f"curl/{config.loss.name}", unit="frame",
                          initial=started * repeat) as bar:
            loop = _TrainLoop(config, run, eval_env, bar, loop_state)
            remaining = total_steps - agent.num_timesteps
            if remaining > 0:
                agent.learn(remaining, callback=loop, reset_num_timesteps=state is None, log_interval=None)
            else:
                loop.init_callback(agent)
            loop.log_training()
            loop.maybe_evaluate(force=True)
            if loop.state.get("last_ckpt_frames") != loop.frames:
                loop.checkpoint(final=True)
        seconds = loop.train_seconds()
        env.close()
        eval_env.close()
        last = loop.state["last_eval"] or {}
        return {
            **last,
            "train/env_frames": float(loop.frames),
            "train/updates": float(agent._n_updates),
            "perf/train_seconds": seconds,
            "perf/frames_per_second": (loop.frames - uncounted) / max(seconds, 1e-9),
        }

    def check_eval(self, options: EvalOptions) -> None:
        """``--video`` must be a .gif or .mp4 file name."""
        from contrastlab.plugins.curl.evaluate import check_video_path

        if options.video is not None:
            check_video_path(options.video)

    def evaluate(self, run: Run, options: EvalOptions) -> dict[str, float]:
        """Re-evaluate the latest checkpoint; optionally save a GIF/MP4 of one episode."""
        from contrastlab.plugins.curl.evaluate import run_episodes, save_video

        config = run.config
        self.check_eval(options)
        env = make_env(config, seed=config.seed + 1)
        agent = make_agent(config, env, run.device)
        state = run.load_checkpoint(restore_rng=False)
        if state is None:
            raise ConfigError(f"run {run.dir} has no checkpoint to evaluate")
        agent.load_training_state(state["agent"])
        episodes = options.episodes or config.train.eval_episodes
        frames: list[np.ndarray] | None = [] if options.video is not None else None
        title = "eval (video: episode 1)" if frames is not None else "eval"
        with run.progress(episodes, title, unit="episode") as bar:
            returns = run_episodes(agent, env, episodes, seed=config.seed + 20_000, record=frames,
                                   on_episode=lambda ret: bar.update(1, ret=f"{ret:.1f}"))
            if options.video is not None and frames:
                bar.update(0, video=f"writing {options.video.name} ({len(frames)} frames)")
                save_video(frames, options.video)
                bar.update(0, video=f"wrote {options.video.name}")
        env.close()
        metrics = {"eval/episode_return": float(np.mean(returns)), "eval/episode_return_std": float(np.std(returns)),
                   "eval/episodes": float(episodes), "eval/env_frames": float(state["step"])}
        return metrics

    def sampler_inputs_for(self, config: CurlConfig) -> frozenset[str]:
        """``query_key`` (M key sets per query); also ``queue`` when ``agent.num_positives = 1``."""
        return fed_inputs(config)
