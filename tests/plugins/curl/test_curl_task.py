"""The curl plugin end to end: pre-flight errors, a tiny run on the frame axis, checkpoints, resume, eval."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import contrastlab as cl
from contrastlab.platform.config import resolve_config
from contrastlab.platform.preflight import preflight
from contrastlab.platform.run import Run
from contrastlab.platform.task import EvalOptions
from contrastlab.plugins.curl.task import CurlTask

TINY = ["env.render_size=32", "agent.crop=28", "agent.hidden_dim=32", "agent.batch_size=8",
        "agent.buffer_size=100", "agent.init_steps=10", "encoder.num_filters=8", "encoder.latent_dim=16",
        "train.env_frames=320", "train.eval_every_frames=160", "train.eval_episodes=1", "train.log_every_frames=80",
        "checkpoint_every=160"]


def config(*sets: str, loss: str = "infonce"):
    return resolve_config(CurlTask(), preset="smoke", sets=list(sets), loss=loss, device="cpu")


def test_plugin_declarations() -> None:
    task = CurlTask()
    assert "curl" in cl.list_plugins()
    cfg = config()
    assert cfg.sampler.name == "query_key" and cfg.encoder.name == "pixel_conv" and cfg.loss.name == "infonce"
    assert task.label_kinds(cfg) == frozenset() and task.gpu_presets == {"paper"}
    paper = resolve_config(task, preset="paper", device="cpu")
    assert paper.agent.batch_size == 512 and paper.train.env_frames == 100_000
    assert paper.agent.learning_rate("cheetah") == 2e-4 and paper.agent.learning_rate("walker") == 1e-3
    # ≈1 s per update at batch 128 on a CPU
    assert task.estimate_seconds(paper, "cpu") > 100_000 / 8 * 3
    assert task.estimate_seconds(cfg, "cpu") < 180


@pytest.mark.parametrize(
    ("sets", "loss", "error", "match"),
    [
        (["env.domain=cheeta"], "infonce", cl.ConfigError, r"valid: .*cheetah"),
        (["env.task=walk", "env.domain=cheetah"], "infonce", cl.ConfigError, "valid: run"),
        (["agent.crop=120"], "infonce", cl.ConfigError, "crop"),
        (["env.action_repeat=0"], "infonce", cl.ConfigError, "action_repeat"),
        (["encoder.num_layers=45"], "infonce", cl.ConfigError, r"num_layers=45 leaves no pixels.*at most 21 layers"),
        (["agent.crop=2", "encoder.num_layers=1"], "infonce", cl.ConfigError, r"valid: agent.crop >= 3"),
        ([], "supcon", cl.IncompatibleError, "no labels"),
    ],
)
def test_bad_input_is_refused_before_training(sets, loss, error, match) -> None:
    with pytest.raises(error, match=match):
        preflight(CurlTask(), config(*sets, loss=loss))  # the core check (labels) and the plugin's own


def test_missing_renderer_says_what_to_install(monkeypatch) -> None:
    import contrastlab.envs.dmc as dmc

    def broken(*args, **kwargs):
        raise RuntimeError("no EGL display")

    monkeypatch.setattr("dm_control.suite.load", broken)
    with pytest.raises(cl.DeviceError, match=r"libegl1.*libosmesa6"):
        dmc.check_rendering()


def scalars(run_dir: Path) -> dict[str, list[int]]:
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@pytest.mark.slow
def test_smoke_run_logs_on_frame_axis_checkpoints_resumes_and_evaluates(tmp_path: Path, capsys) -> None:
    task = CurlTask()
    cfg = config(*TINY, loss="pucl")
    task.check(cfg)
    run = Run.create(task, cfg, tmp_path)
    killed_at_160 = tmp_path / "checkpoints-at-160"
    save = run.save_checkpoint

    def save_and_snapshot(state, step, **kwargs):
        if step == 160:  # as if the first 160 frames had taken 1000 s longer: a resume from here must count them
            state = {**state, "loop": {**state["loop"], "train_seconds": state["loop"]["train_seconds"] + 1000}}
        path = save(state, step, **kwargs)
        if step == 160:  # what the folder holds if the process is killed before the 320-frame checkpoint
            shutil.copytree(run.dir / "checkpoints", killed_at_160)
        return path

    run.save_checkpoint = save_and_snapshot
    metrics = task.train(cfg, run)
    run.finish(metrics)
    assert metrics["train/env_frames"] == 320 and metrics["train/updates"] == 40 - 10
    assert metrics["perf/frames_per_second"] == pytest.approx(320 / metrics["perf/train_seconds"])
    assert "eval/episode_return" in metrics and metrics["eval/episode_return"] >= 0
    tags = scalars(run.dir)
    assert tags["eval/episode_return_vs_env_frames"] == [0, 160, 320]
    for tag in ("critic_loss", "actor_loss", "entropy_loss", "contrastive_loss", "contrastive_top1", "ent_coef",
                "clamped_frac"):  # clamped_frac: PUCL's floor statistic (issue 13)
        assert tags[f"train/{tag}_vs_env_frames"] == [160, 240, 320], tag  # updates start after 80 frames
    summary = json.loads((run.dir / "summary.json").read_text())
    assert 0.0 <= summary["metrics"]["train/clamped_frac"] <= 1.0
    assert "perf/frames_per_second_vs_env_frames" in tags and "perf/updates_per_second_vs_env_frames" in tags
    ckpts = sorted(p.name for p in (run.dir / "checkpoints").glob("*.pt"))
    assert ckpts == ["step_000000000160.pt", "step_000000000320.latest.pt", "step_000000000320.pt"]
    # the replay buffer is saved with the newest checkpoint only
    assert "replay_buffer" not in torch.load(run.dir / "checkpoints" / "step_000000000160.pt", weights_only=False)
    assert "replay_buffer" in torch.load(run.dir / "checkpoints" / "step_000000000320.latest.pt", weights_only=False)

    # simulate a run killed after the 160-frame checkpoint, then resume it
    shutil.rmtree(run.dir / "checkpoints")
    shutil.copytree(killed_at_160, run.dir / "checkpoints")
    resumed = Run.open(run.dir)
    assert resumed.resumed
    metrics2 = task.train(resumed.config, resumed)
    resumed.finish(metrics2)
    assert metrics2["train/env_frames"] == 320 and metrics2["train/updates"] == metrics["train/updates"]
    # the rate covers the whole run's training (frames over seconds summed across the resume), not the resumed part
    assert 1000 < metrics2["perf/train_seconds"] < 1000 + resumed.elapsed()
    assert metrics2["perf/frames_per_second"] == pytest.approx(320 / metrics2["perf/train_seconds"])
    rows = [json.loads(line) for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r["step"] for r in rows if "eval/episode_return_vs_env_frames" in r]
    assert evals == [0, 160, 320]  # nothing logged twice after the resume
    assert (run.dir / "checkpoints" / "step_000000000320.pt").is_file()

    # platform eval RUN_DIR, with a GIF of one episode
    video = tmp_path / "episode.gif"
    capsys.readouterr()
    out = task.evaluate(Run.open(run.dir, resume=False), EvalOptions(episodes=1, video=video))
    assert out["eval/env_frames"] == 320 and out["eval/episodes"] == 1
    assert video.is_file() and video.stat().st_size > 1000
    progress = capsys.readouterr().err  # episode count while evaluating, then the video being written
    assert "eval (video: episode 1) 1/1" in progress and "wrote episode.gif" in progress


def test_a_resume_without_the_replay_buffer_refills_it_with_new_random_actions_and_episodes(tmp_path: Path,
                                                                                            monkeypatch) -> None:
    """The 160-frame checkpoint of a 320-frame run loses its buffer once the 320-frame one is written. Resumed
    from it, the run takes init_steps (10) random-action steps into the empty buffer before its next update,
    instead of updating on batches drawn from one, two, three... transitions. Nor does it write the checkpoint it
    resumed from again. Its environment and action sampler go on from their saved states: the episode begun at the
    resume does not start where the run's first episode did, and the refill's random actions are not the run's
    first ones (both were re-seeded from the config)."""
    task, cfg = CurlTask(), config(*TINY, "train.eval_episodes=1")
    starts = record_episode_starts(monkeypatch, cfg.seed)
    run = Run.create(task, cfg, tmp_path)
    full = task.train(cfg, run)
    run.finish(full)
    first_actions = run_actions(run.dir)
    for part in (run.dir / "checkpoints").glob("step_000000000320*"):
        part.unlink()
    assert "replay_buffer" not in Run.open(run.dir).load_checkpoint()
    resumed, saved = Run.open(run.dir), []
    save = resumed.save_checkpoint
    resumed.save_checkpoint = lambda state, step, **kw: saved.append(step) or save(state, step, **kw)
    again = task.train(resumed.config, resumed)
    summary = resumed.finish(again)
    assert saved == [320]  # not the 160-frame checkpoint it resumed from, again
    assert summary["resumed_without_replay_buffer_at_frame"] == 160
    assert full["train/updates"] == 30 and again["train/updates"] == 30 - 10
    assert len(starts) == 2 and starts[0] != starts[1], "the resumed run began an episode where the run did"
    refill = run_actions(run.dir)[:10]  # the refilled buffer: its 10 random-action steps first
    assert not any(np.allclose(refill[:3], first_actions[i:i + 3]) for i in range(len(first_actions) - 2))


def test_a_resume_from_a_checkpoint_at_an_episodes_end_plays_the_episode_that_began_there(tmp_path: Path,
                                                                                         monkeypatch) -> None:
    """cartpole's episodes are 1000 frames, so a checkpoint every 1000 frames (the paper preset's 50k too) comes
    right after SB3's automatic reset: the resumed run skipped the episode begun there and started the next."""
    replaced = ("train.env_frames", "checkpoint_every", "train.eval_every_frames")
    sets = [s for s in TINY if s.split("=")[0] not in replaced]
    task, cfg = CurlTask(), config(*sets, "train.env_frames=2000", "checkpoint_every=1000",
                                   "train.eval_every_frames=2000")
    starts = record_episode_starts(monkeypatch, cfg.seed)
    run = Run.create(task, cfg, tmp_path)
    run.finish(task.train(cfg, run))
    straight = list(starts)
    for part in (run.dir / "checkpoints").glob("step_000000002000*"):
        part.unlink()
    starts.clear()
    resumed = Run.open(run.dir)
    task.train(resumed.config, resumed)
    assert len(straight) == 3 and starts == straight[1:]


def test_frames_before_a_checkpoint_without_train_seconds_stay_out_of_the_rate(tmp_path: Path) -> None:
    """A checkpoint from before ``train_seconds`` existed: the frames it holds are not covered by the summed time,
    so they are left out of ``perf/frames_per_second``, and the next checkpoint remembers that for later resumes
    (it holds ``train_seconds`` of the resumed part only)."""
    task, cfg = CurlTask(), config(*TINY, "train.eval_episodes=1")
    run = Run.create(task, cfg, tmp_path)
    run.finish(task.train(cfg, run))
    for part in (run.dir / "checkpoints").glob("step_000000000320*"):
        part.unlink()
    old = run.dir / "checkpoints" / "step_000000000160.pt"
    state = torch.load(old, weights_only=False)
    del state["loop"]["train_seconds"]  # as the previous version wrote it
    torch.save(state, old)
    resumed = Run.open(run.dir)
    metrics = task.train(resumed.config, resumed)
    resumed.finish(metrics)
    assert metrics["perf/frames_per_second"] == pytest.approx((320 - 160) / metrics["perf/train_seconds"])
    latest = torch.load(run.dir / "checkpoints" / "step_000000000320.pt", weights_only=False)
    assert latest["loop"]["untimed_frames"] == 160  # a resume from here still leaves those frames out


def test_a_refill_cut_by_a_stop_goes_on_after_the_next_resume(tmp_path: Path) -> None:
    """Stopped at frame 200, inside the refill after a buffer-less resume at 160 (which ends at frame 240), the
    run saves its few refilled transitions; resumed, it finishes the refill before updating: the same 20 updates
    as a resume that was never stopped."""
    task, cfg = CurlTask(), config(*TINY, "train.eval_episodes=1")
    run = Run.create(task, cfg, tmp_path)
    run.finish(task.train(cfg, run))
    for part in (run.dir / "checkpoints").glob("step_000000000320*"):
        part.unlink()
    stopped = Run.open(run.dir)
    due, save = stopped.checkpoint_due, stopped.save_checkpoint

    def save_then_stop(state, step, **kwargs):
        path = save(state, step, **kwargs)
        if step == 200:
            raise KeyboardInterrupt
        return path

    stopped.checkpoint_due = lambda step: step == 200 or due(step)
    stopped.save_checkpoint = save_then_stop
    with pytest.raises(KeyboardInterrupt):
        task.train(stopped.config, stopped)
    stopped.mark("interrupted")
    state = Run.open(run.dir).load_checkpoint()
    assert state["step"] == 200 and "replay_buffer" in state and state["agent"]["learning_starts"] == 30
    resumed = Run.open(run.dir)
    assert task.train(resumed.config, resumed)["train/updates"] == 20


def record_episode_starts(monkeypatch, run_seed: int) -> list[tuple[float, ...]]:
    """The physics state at every reset of the training environment (the one built with ``run_seed``;
    evaluation environments repeat their own starts by design), appended as the runs go."""
    from contrastlab.envs import DMCPixelEnv
    from contrastlab.plugins.curl import task as curl_task

    starts: list[tuple[float, ...]] = []
    training_envs: list[DMCPixelEnv] = []
    make_env, reset = curl_task.make_env, DMCPixelEnv.reset

    def recording_make_env(config, seed=None):
        env = make_env(config, seed=seed)
        if seed == run_seed:
            training_envs.append(env)
        return env

    def recording_reset(self, **kwargs):
        out = reset(self, **kwargs)
        if any(self is env for env in training_envs):
            starts.append(tuple(self._env.physics.get_state()))
        return out

    monkeypatch.setattr(curl_task, "make_env", recording_make_env)
    monkeypatch.setattr(DMCPixelEnv, "reset", recording_reset)
    return starts


def run_actions(run_dir: Path) -> np.ndarray:
    """The actions stored in the newest checkpoint's replay buffer, in the order they were taken."""
    buffer = Run.open(run_dir, resume=False).load_checkpoint()["replay_buffer"]
    return np.asarray(buffer["actions"])[: buffer["transitions"]]


@pytest.mark.slow
def test_same_seed_same_metrics(tmp_path: Path) -> None:
    sets = [*TINY, "train.env_frames=160", "train.eval_every_frames=160", "train.log_every_frames=160"]
    results = []
    for i in range(2):
        cfg = config(*sets, loss="dcl")
        run = Run.create(CurlTask(), cfg, tmp_path / str(i))
        metrics = CurlTask().train(cfg, run)
        run.finish(metrics)
        rows = [json.loads(line) for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
        results.append([{k: v for k, v in r.items() if not k.startswith(("perf/", "wall_time"))} for r in rows])
    assert results[0] == results[1]
    assert any("train/critic_loss_vs_env_frames" in r for r in results[0])


def test_sigterm_mid_episode_saves_the_agent_and_replay_then_resume_finishes(tmp_path: Path, monkeypatch) -> None:
    """The first SIGTERM (the GPU suite's watchdog, `kill`) saves a checkpoint at the next environment step, with
    the replay buffer, instead of falling back to the last periodic one; `--resume` then completes the run."""
    import os
    import signal
    import time

    from contrastlab.plugins.curl.task import _TrainLoop
    from contrastlab.testing import run_cli

    on_step = _TrainLoop._on_step
    sent: list[int] = []

    def signal_at_200_frames(self) -> bool:
        if self.frames == 200 and not sent:  # mid-episode, between the 160- and 320-frame checkpoints
            sent.append(self.frames)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)
        return on_step(self)

    monkeypatch.setattr(_TrainLoop, "_on_step", signal_at_200_frames)
    sets = [arg for item in TINY for arg in ("--set", item)]
    code, out = run_cli(["train", "--plugin", "curl", "--loss", "pucl", "--device", "cpu", "--logdir",
                         str(tmp_path), *sets])
    assert code == 143 and sent == [200], out
    assert "stopped after saving a checkpoint at step 200; continue with:" in out, out
    (run_dir,) = tmp_path.glob("*/*/*")
    ckpts = sorted(p.name for p in (run_dir / "checkpoints").glob("*.pt"))
    assert ckpts == ["step_000000000160.pt", "step_000000000200.latest.pt", "step_000000000200.pt"]
    state = torch.load(run_dir / "checkpoints" / "step_000000000200.latest.pt", weights_only=False)
    assert state["replay_buffer"]["transitions"] == 200 // 8  # every step up to the signal, stored
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"

    code, out = run_cli(["train", "--resume", str(run_dir)])
    assert code == 0, out
    summary = json.loads((run_dir / "summary.json").read_text())["metrics"]
    assert summary["train/env_frames"] == 320 and summary["train/updates"] == 40 - 10
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "eval/episode_return_vs_env_frames" in r] == [0, 160, 320]


def test_sigterm_during_the_final_evaluation_lets_the_run_finish(tmp_path: Path, monkeypatch) -> None:
    import os
    import signal
    import time

    from contrastlab.plugins.curl.task import _TrainLoop
    from contrastlab.testing import run_cli

    evaluate = _TrainLoop.maybe_evaluate

    def signal_in_final_evaluation(self, force: bool = False) -> None:
        if force:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)
        evaluate(self, force)

    monkeypatch.setattr(_TrainLoop, "maybe_evaluate", signal_in_final_evaluation)
    sets = [arg for item in TINY for arg in ("--set", item)]
    code, out = run_cli(["train", "--plugin", "curl", "--loss", "pucl", "--device", "cpu", "--logdir",
                         str(tmp_path), *sets, "--set", "train.env_frames=240"])
    assert code == 0, out
    (run_dir,) = tmp_path.glob("*/*/*")
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
    assert "the stop came during the last step or the final evaluation, so the run finished instead" in out
    summary = json.loads((run_dir / "summary.json").read_text())["metrics"]
    assert summary["train/env_frames"] == 240 and 0.0 <= summary["train/clamped_frac"] <= 1.0


def test_eval_refuses_a_video_type_before_loading_the_run(tmp_path) -> None:
    from contrastlab.platform.task import EvalOptions

    with pytest.raises(cl.ConfigError, match=r"unsupported file type '\.txt'; use \.gif or \.mp4"):
        CurlTask().check_eval(EvalOptions(video=tmp_path / "ep.txt"))
    CurlTask().check_eval(EvalOptions(video=tmp_path / "ep.MP4"))
    assert CurlTask.eval_options == {"episodes", "video"}


def test_the_progress_rate_restarts_when_updates_start() -> None:
    """The bar's ETA is measured from the first update on, not over the fast random-action frames before it."""
    from types import SimpleNamespace

    from contrastlab.plugins.curl.task import _TrainLoop

    restarts = []
    loop = _TrainLoop.__new__(_TrainLoop)
    loop.repeat, loop.episode_return, loop.run = 8, 0.0, None
    loop.bar = SimpleNamespace(update=lambda *a, **k: None,
                               restart_rate=lambda: restarts.append(loop.model.num_timesteps))
    loop.locals = {"rewards": [0.0], "dones": [False]}
    for step in range(1, 6):
        loop.model = SimpleNamespace(num_timesteps=step, learning_starts=3)
        loop._on_step()
    assert restarts == [3]


def test_the_eta_is_held_through_the_warm_up() -> None:
    """Before the first update the bar showed an ETA from the random-action frames' pace, 10× too short."""
    from types import SimpleNamespace

    from contrastlab.plugins.curl.task import _TrainLoop

    held = []
    loop = _TrainLoop.__new__(_TrainLoop)
    loop.repeat, loop.bar = 8, SimpleNamespace(hold_eta=held.append)
    for start in (0, 3):  # a fresh run holds it for the warm-up; one resumed after it for its first step only
        loop.model = SimpleNamespace(num_timesteps=start, learning_starts=3, _n_updates=0)
        loop._on_training_start()
    assert held == ["warm-up, no updates yet", "resumed, no update yet"]


def test_evaluations_run_as_side_tasks_of_the_progress_bar(monkeypatch) -> None:
    """New-user trial: the evaluations at frame 0 and as the updates start were timed as if they were frames, so the
    warm-up's rate rose line after line and the first line after it read "2.3 frame/s ETA 00:05:38" (a minute left)."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from contrastlab.plugins.curl import task as curl_task

    inside, seen = [False], []

    @contextmanager
    def side_task():
        inside[0] = True
        yield
        inside[0] = False

    def evaluate(*args, **kwargs):
        seen.append(inside[0])
        return {"eval/episode_return": 1.0, "eval/episode_return_std": 0.0}

    monkeypatch.setattr(curl_task, "evaluate_agent", evaluate)
    loop = curl_task._TrainLoop.__new__(curl_task._TrainLoop)
    loop.config = config()
    loop.repeat, loop.eval_env, loop.model = 8, None, SimpleNamespace(num_timesteps=0)
    loop.state = {"next_eval": 0}
    loop.run = SimpleNamespace(log=lambda *a, **k: None)
    loop.bar = SimpleNamespace(side_task=side_task, update=lambda *a, **k: None)
    loop.maybe_evaluate()
    assert seen == [True] and loop.state["last_eval_frames"] == 0


def test_a_resumed_run_measures_its_eta_from_after_its_first_step() -> None:
    """New-user trial: the first line of a resumed smoke run read "1312/1600 (82%) 277.5 frame/s ETA 00:00:01" with
    about 10 s left: its one environment step so far had no update yet (SB3 updates after the step). The ETA is
    held through that step and measured from after it."""
    from types import SimpleNamespace

    from contrastlab.plugins.curl.task import _TrainLoop

    held, restarts = [], []
    loop = _TrainLoop.__new__(_TrainLoop)
    loop.repeat, loop.episode_return, loop.run = 8, 0.0, None
    loop.bar = SimpleNamespace(hold_eta=held.append, update=lambda *a, **k: None,
                               restart_rate=lambda: restarts.append(loop.model.num_timesteps))
    loop.locals = {"rewards": [0.0], "dones": [False]}
    loop.model = SimpleNamespace(num_timesteps=163, learning_starts=100, _n_updates=63)
    loop._on_training_start()
    for step in (164, 165, 166):
        loop.model.num_timesteps = step
        loop._on_step()
    assert len(held) == 1 and "resumed" in held[0] and restarts == [164]
