"""The curl task's pieces without an environment: the training loop's bookkeeping (episode returns, rates, the log
and evaluation schedules, checkpoints), the evaluation statistics, `platform eval`, and the pre-flight bounds."""

from __future__ import annotations

import math
import statistics
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest

import contrastlab as cl
from contrastlab.platform.config import resolve_config
from contrastlab.platform.task import EvalOptions
from contrastlab.plugins.curl import task as curl_task
from contrastlab.plugins.curl.task import CurlTask, _TrainLoop


def config(*sets: str):
    return resolve_config(CurlTask(), preset="smoke", sets=list(sets), device="cpu")


class _Env:
    """Episodes whose per-step rewards are given; records the seed of every reset."""

    def __init__(self, episodes: list[list[float]]) -> None:
        self.episodes, self.seeds, self.index, self.t = episodes, [], -1, 0

    def reset(self, seed=None):
        self.seeds.append(seed)
        self.index, self.t = self.index + 1, 0
        return np.zeros(2), {}

    def step(self, action):
        rewards = self.episodes[self.index]
        self.t += 1
        return np.zeros(2), rewards[self.t - 1], self.t >= len(rewards), False, {}

    def close(self) -> None:
        pass


_AGENT_POLICY = SimpleNamespace(predict=lambda obs, deterministic=False: (np.zeros(1), None))


@contextmanager
def _side_task():
    yield


def _bar() -> SimpleNamespace:
    return SimpleNamespace(update=lambda *a, **k: None, side_task=_side_task, restart_rate=lambda: None)


def _loop(cfg) -> tuple[_TrainLoop, list]:
    """A loop (cartpole: 8 frames per step) with a fake run that records ``(metrics, step)`` of every log."""
    logged: list = []
    run = SimpleNamespace(log=lambda metrics, step: logged.append((dict(metrics), step)))
    state = {"next_eval": 0, "next_log": 0, "last_eval": None, "last_eval_frames": None}
    loop = _TrainLoop(cfg, run, None, _bar(), state)
    loop.model = SimpleNamespace(num_timesteps=0, learning_starts=10**9, _n_updates=0, pop_stats=dict)
    assert loop.repeat == 8
    return loop, logged


def test_evaluation_reports_the_mean_and_the_population_std_of_the_episode_returns() -> None:
    env = _Env([[1.0, 2.0], [4.0], [0.5, 0.5, 0.5]])
    out = curl_task.evaluate_agent(SimpleNamespace(policy=_AGENT_POLICY), env, 3, seed=11)
    returns = [3.0, 4.0, 1.5]
    assert out["eval/episode_return"] == pytest.approx(statistics.fmean(returns))
    assert out["eval/episode_return_std"] == pytest.approx(statistics.pstdev(returns))
    assert env.seeds == [11, None, None]


def test_training_episode_returns_are_summed_per_episode_and_logged_at_its_end() -> None:
    loop, logged = _loop(config())
    advanced = []
    loop.bar.update = lambda n, **fields: advanced.append(n)
    rewards, dones = [1.0, 2.0, 3.0, 0.5, 0.25], [False, False, True, False, True]
    for step, (reward, done) in enumerate(zip(rewards, dones, strict=True), start=1):
        loop.model.num_timesteps = step
        loop.locals = {"rewards": [reward], "dones": [done]}
        loop._on_step()
    assert logged == [({"train/episode_return_vs_env_frames": 6.0}, 3 * 8),
                      ({"train/episode_return_vs_env_frames": 0.75}, 5 * 8)]
    assert sum(advanced) == 5 * 8  # the bar counts frames, not the episode ends it shows


def test_the_rates_are_frames_and_updates_over_the_seconds_between_two_logs(monkeypatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(curl_task.time, "monotonic", lambda: clock[0])
    loop, _ = _loop(config())
    loop.model.num_timesteps, loop.model._n_updates = 10, 5
    loop.clock = (clock[0], None, None)
    assert loop._rates() == {}  # no earlier measurement
    clock[0], loop.model.num_timesteps, loop.model._n_updates = 104.0, 30, 17
    rates = loop._rates()
    assert rates["perf/frames_per_second_vs_env_frames"] == pytest.approx((30 - 10) * 8 / 4.0)
    assert rates["perf/updates_per_second_vs_env_frames"] == pytest.approx((17 - 5) / 4.0)
    clock[0] = 105.0
    assert loop._rates() == {}  # no frames since the last measurement
    loop.model.num_timesteps = 31
    assert loop._rates() == {}  # no time since the last measurement
    clock[0], loop.model.num_timesteps = 107.0, 32
    assert loop._rates()["perf/frames_per_second_vs_env_frames"] == pytest.approx(8 / 2.0)


def test_training_statistics_are_logged_every_log_every_frames() -> None:
    cfg = config("train.log_every_frames=400", "train.eval_every_frames=800")
    loop, logged = _loop(cfg)
    loop.model.pop_stats = lambda: {"critic_loss": 0.5}
    loop.run.checkpoint_due = lambda frames: False
    calls = []
    loop.maybe_evaluate = lambda force=False: calls.append(force)
    for step in range(1, 151):  # 1,200 frames
        loop.model.num_timesteps = step
        loop._on_rollout_start()
    steps = [step for metrics, step in logged if "train/critic_loss_vs_env_frames" in metrics]
    assert steps == [8, 400, 800, 1200] and loop.state["next_log"] == 1600
    assert logged[0][0] == {"train/critic_loss_vs_env_frames": 0.5}


def test_evaluations_follow_eval_every_frames_with_documented_seeds(monkeypatch) -> None:
    """docs/curl.md: training-time evaluations use the episode seeds ``seed + 10000 + frames``; one every
    ``train.eval_every_frames``, and a forced one at the end unless one was just made."""
    seen = []

    def evaluate(agent, env, episodes, seed):
        seen.append((episodes, seed))
        return {"eval/episode_return": float(len(seen)), "eval/episode_return_std": 0.5}

    monkeypatch.setattr(curl_task, "evaluate_agent", evaluate)
    cfg = config("train.eval_every_frames=800", "train.eval_episodes=3", "seed=5")
    loop, logged = _loop(cfg)
    advanced = []
    loop.bar.update = lambda n, **fields: advanced.append(n)
    for step in range(0, 201):  # up to 1,600 frames
        loop.model.num_timesteps = step
        loop.maybe_evaluate()
    frames = [step for _, step in logged]
    assert frames == [0, 800, 1600] and seen == [(3, 5 + 10_000 + f) for f in frames]
    assert logged[1][0] == {"eval/episode_return_vs_env_frames": 2.0, "eval/episode_return_std_vs_env_frames": 0.5}
    assert loop.state["next_eval"] == 2400 and loop.state["last_eval_frames"] == 1600
    assert loop.state["last_eval"] == {"eval/episode_return": 3.0, "eval/episode_return_std": 0.5}
    loop.maybe_evaluate(force=True)  # the final one: already made at this frame
    assert len(seen) == 3
    loop.model.num_timesteps = 205
    loop.maybe_evaluate(force=True)  # the final one after the last scheduled
    assert [step for _, step in logged][-1] == 1640 and len(seen) == 4
    assert advanced == [0] * 4  # an evaluation shows its return on the bar without counting frames


@pytest.mark.parametrize("save_buffer", [True, False])
def test_a_checkpoint_holds_the_agent_the_loop_state_and_the_buffer_when_asked(save_buffer: bool) -> None:
    cfg = config(f"train.save_buffer={str(save_buffer).lower()}")
    loop, _ = _loop(cfg)
    saved = []
    loop.run.save_checkpoint = lambda state, step, **kwargs: saved.append((state, step, kwargs))
    loop.model.num_timesteps = 25
    loop.model.training_state = lambda: {"weights": 1}
    loop.model.replay_buffer = SimpleNamespace(state_dict=lambda: {"transitions": 25})
    loop.model.get_env = lambda: SimpleNamespace(env_method=lambda name: [f"{name} of env 0"])
    loop.state["train_seconds"], loop.started = 10.0, curl_task.time.monotonic()
    loop.checkpoint(final=True)
    loop.checkpoint()  # a periodic one: the run goes on after it
    (state, step, kwargs), (_, _, periodic) = saved
    assert step == 200 and kwargs == {"latest_only": ("replay_buffer",), "final": True}
    assert periodic["final"] is False
    assert state["agent"] == {"weights": 1} and state["env_random"] == "random_state of env 0"
    assert state["loop"]["last_ckpt_frames"] == 200 and 10.0 <= state["loop"]["train_seconds"] < 70.0
    assert ("replay_buffer" in state) is save_buffer


def test_platform_eval_scores_the_checkpoint_on_its_own_episode_seeds(monkeypatch, tmp_path) -> None:
    """docs/curl.md: `platform eval` episodes start from ``seed + 20000``; ``--episodes`` overrides the config's."""
    cfg = config("seed=3", "train.eval_episodes=2")
    envs, loaded = [], []

    def make_env(config, seed=None):
        envs.append((_Env([[1.0, 1.0], [2.0], [6.0]]), seed))
        return envs[-1][0]

    agent = SimpleNamespace(policy=_AGENT_POLICY, load_training_state=loaded.append)
    monkeypatch.setattr(curl_task, "make_env", make_env)
    monkeypatch.setattr(curl_task, "make_agent", lambda config, env, device: agent)

    @contextmanager
    def progress(total, title, unit):
        yield _bar()

    restored = []
    run = SimpleNamespace(config=cfg, device="cpu", dir=tmp_path, progress=progress,
                          load_checkpoint=lambda restore_rng=True: restored.append(restore_rng) or
                          {"agent": "weights", "step": 1600})
    out = CurlTask().evaluate(run, EvalOptions())
    assert out == {"eval/episode_return": 2.0, "eval/episode_return_std": 0.0, "eval/episodes": 2.0,
                   "eval/env_frames": 1600.0}
    assert envs[0][1] == 3 + 1 and envs[0][0].seeds == [3 + 20_000, None] and loaded == ["weights"]
    assert restored == [False]  # scoring leaves the checkpoint's training RNG state alone
    out = CurlTask().evaluate(run, EvalOptions(episodes=3))
    assert out["eval/episodes"] == 3.0 and out["eval/episode_return"] == pytest.approx(10.0 / 3)
    assert out["eval/episode_return_std"] == pytest.approx(statistics.pstdev([2.0, 2.0, 6.0]))
    run.load_checkpoint = lambda restore_rng=True: None
    with pytest.raises(cl.ConfigError, match="no checkpoint to evaluate"):
        CurlTask().evaluate(run, EvalOptions())


@pytest.mark.parametrize(("sets", "refused"), [
    (["env.action_repeat=1"], None),
    (["env.render_size=84", "agent.crop=84"], None),
    (["env.render_size=84", "agent.crop=85"], "agent.crop=85 is larger than env.render_size=84"),
    (["agent.batch_size=64", "agent.buffer_size=64"], None),
    (["agent.batch_size=65", "agent.buffer_size=64"], r"agent.batch_size must be <= agent.buffer_size"),
])
def test_the_preflight_bounds_are_inclusive(sets, refused) -> None:
    cfg = config(*sets, "env.camera_id=-1")
    if refused is None:
        CurlTask().check(cfg)
    else:
        with pytest.raises(cl.ConfigError, match=refused):
            CurlTask().check(cfg)


def test_the_replay_memory_check_counts_the_frames_the_run_writes(monkeypatch) -> None:
    """A 90 % share of memory, counted as docs say: one RGB frame per agent step plus ``frame_stack`` at each
    1,000-frame episode's start (and one more start), at most ``buffer_size + frame_stack``."""
    cfg = config("env.render_size=10", "env.frame_stack=3", "env.action_repeat=4", "train.env_frames=10001",
                 "agent.buffer_size=100000")
    written = math.ceil(10001 / 4) + (math.ceil(10001 / 1000) + 1) * 3  # 2501 + 12 * 3 frames
    need = written * 3 * 10 * 10
    pages = {"SC_PAGE_SIZE": 1}
    monkeypatch.setattr(curl_task.os, "sysconf", lambda name: pages.get(name, pages.get("total")))
    pages["total"] = math.ceil(need / 0.9)  # 90 % of it holds the frames
    curl_task.check_replay_memory(cfg)
    pages["total"] = math.ceil(need / 0.9) - 2
    with pytest.raises(cl.ConfigError, match="more than 90 %"):
        curl_task.check_replay_memory(cfg)
    small = config("env.render_size=10", "env.frame_stack=3", "env.action_repeat=4", "train.env_frames=10001",
                   "agent.buffer_size=1000")  # the ring holds buffer_size + frame_stack frames at most
    pages["total"] = math.ceil((1000 + 3) * 300 / 0.9)
    curl_task.check_replay_memory(small)
    pages["total"] -= 2
    with pytest.raises(cl.ConfigError, match="more than 90 %"):
        curl_task.check_replay_memory(small)
    tiny = config("env.render_size=3", "env.frame_stack=3", "env.action_repeat=4", "train.env_frames=10001")
    pages["total"] = written * 30  # the frames take exactly 90 % (27 bytes each): not more, so accepted
    curl_task.check_replay_memory(tiny)
    pages["total"] = 0  # a system that reports no memory: nothing to compare with
    curl_task.check_replay_memory(tiny)


def test_the_cpu_estimate_counts_one_second_per_batch_128_update() -> None:
    """docs/curl.md: about 13 h for `paper` (100k cartpole frames, batch 512) on a CPU; ≈50× faster on a GPU."""
    paper = resolve_config(CurlTask(), preset="paper", device="cpu")
    steps = math.ceil(100_000 / 8)
    updates = steps - paper.agent.init_steps
    cpu, gpu = CurlTask().estimate_seconds(paper, "cpu"), CurlTask().estimate_seconds(paper, "cuda:0")
    assert cpu == pytest.approx(updates * 512 / 128, rel=0.002) and 12.5 < cpu / 3600 < 13.5
    assert gpu == pytest.approx(updates * 512 / 128 / 50, rel=0.1)
    short = resolve_config(CurlTask(), preset="paper", device="cpu", sets=["train.env_frames=800"])
    assert 0 < CurlTask().estimate_seconds(short, "cpu") < 1  # all 100 steps are warm-up: not one 4 s update


def test_the_queue_is_fed_only_with_one_positive_key_set() -> None:
    assert CurlTask().sampler_inputs_for(config()) == {"query_key", "queue"}
    assert CurlTask().sampler_inputs_for(config("agent.num_positives=2")) == {"query_key"}


def test_the_return_is_maximised() -> None:
    """compare/tune rank curl runs by their evaluation return, the higher the better."""
    assert CurlTask.primary_metric == "eval/episode_return" and CurlTask.higher_is_better is True


def test_an_encoder_that_leaves_one_pixel_fits() -> None:
    """At an 84 px crop, 21 layers leave a 1 × 1 map ((84 - 3) // 2 + 1 - 2 · 20 = 1): the most the error offers."""
    curl_task.check_encoder_fits(config("agent.crop=84", "encoder.num_layers=21"))
    curl_task.check_encoder_fits(config("agent.crop=3", "encoder.num_layers=1"))  # the smallest crop that fits
    with pytest.raises(cl.ConfigError, match="at most 21 layers"):
        curl_task.check_encoder_fits(config("agent.crop=84", "encoder.num_layers=22"))
    with pytest.raises(cl.ConfigError, match="at most 1 layers at that crop"):  # not "agent.crop >= 3": it is 3
        curl_task.check_encoder_fits(config("agent.crop=3", "encoder.num_layers=2"))
