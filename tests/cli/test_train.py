"""``platform train`` options that conflict with ``--resume`` (from a bad-input sweep)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from contrastlab.testing import run_cli


def test_resume_refuses_a_logdir(tmp_path: Path) -> None:
    """A resumed run stays where it is, so ``--logdir`` cannot apply; it was silently ignored (exit 0 after
    training in the old place) while every other conflicting option was refused."""
    elsewhere = tmp_path / "elsewhere"
    code, out = run_cli(["train", "--resume", str(tmp_path / "some-run"), "--logdir", str(elsewhere)])
    assert code == 2 and "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "drop --logdir" in errors[0], out
    assert not elsewhere.exists()


def test_logdir_default_is_named_in_the_help() -> None:
    code, out = run_cli(["train", "--help"])
    assert code == 0 and "Root directory of runs (default: runs)" in " ".join(out.replace("│", " ").split()), out


def test_resume_refuses_a_bad_keep_checkpoints_before_touching_the_run(tmp_path: Path) -> None:
    """``--resume RUN --keep-checkpoints 0`` was refused only after Run.open had rewound the run's logs and
    rewritten its run.json."""
    import json

    import contrastlab_toy.plugin

    from contrastlab.testing import fresh_plugin_manager

    with fresh_plugin_manager(contrastlab_toy.plugin, package="contrastlab-toy"):
        code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path),
                             "--set", "train.steps=30", "--set", "checkpoint_every=10"])  # fmt: skip
        assert code == 0, out
        (run_dir,) = [p for p in tmp_path.glob("*/*/*") if p.is_dir()]
        info = json.loads((run_dir / "run.json").read_text())
        (run_dir / "run.json").write_text(json.dumps({**info, "status": "interrupted"}))
        (run_dir / "checkpoints" / "step_000000000030.pt").unlink()  # as if stopped after step 20's checkpoint
        before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
        code, out = run_cli(["train", "--resume", str(run_dir), "--keep-checkpoints", "0"])
        assert code == 2 and "keep_checkpoints must be >= 1" in out and "Traceback" not in out, out
        assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def _captured_err(monkeypatch) -> io.StringIO:
    """``train``'s stderr console redirected to a buffer."""
    from rich.console import Console

    from contrastlab.cli import train as train_cli

    buffer = io.StringIO()
    monkeypatch.setattr(train_cli, "err_console", Console(file=buffer, width=80))  # a log file's width
    return buffer


def _invoke(args: list[str]):
    """The CLI in-process, with stdout and stderr apart (``result.stdout``, ``result.stderr``)."""
    from typer.testing import CliRunner

    from contrastlab.cli import app

    return CliRunner().invoke(app, args)


class _Sized:
    """The two things :func:`warn_if_cpu_heavy` asks of a plugin."""

    gpu_presets = frozenset({"paper"})

    def __init__(self, estimate: float | None) -> None:
        self.estimate = estimate

    def estimate_seconds(self, config: object, device: str) -> float | None:
        return self.estimate


@pytest.mark.parametrize(
    ("preset", "estimate", "device", "warned"),
    [
        ("paper", None, "cpu", True),  # a GPU preset
        ("paper", None, "cuda", False),  # ... on a GPU
        ("smoke", None, "cpu", False),  # nothing known
        ("smoke", 30 * 60, "cpu", False),  # exactly the limit: not more than 30 minutes
        ("smoke", 30 * 60 + 1, "cpu", True),
        ("smoke", 60.0, "cpu", False),
    ],
)
def test_the_cpu_warning_comes_for_gpu_presets_and_runs_over_30_minutes(monkeypatch, preset: str,
                                                                        estimate: float | None, device: str,
                                                                        warned: bool) -> None:
    import torch

    from contrastlab.cli.train import warn_if_cpu_heavy
    from contrastlab.experiments.grid import fmt_duration

    buffer = _captured_err(monkeypatch)
    warn_if_cpu_heavy(_Sized(estimate), object(), preset, torch.device(device))  # type: ignore[arg-type]
    text = buffer.getvalue()
    assert (f"warning: preset '{preset}' is sized for a GPU" in text) is warned, text
    if warned:
        eta = f" (estimated {fmt_duration(estimate)} on this CPU)" if estimate else ""
        assert f"no CUDA device is available{eta}; for a quick check use --preset smoke" in text, text
        assert text.count("\n") == 1, text  # one line, however long: a log is not cut at 80 columns


def test_busy_note_needs_more_load_than_cores_and_a_terminal(monkeypatch) -> None:
    """A load average equal to the core count is not busy; a pipe (no terminal) gets no note; neither does a
    system that cannot report its load."""
    from rich.console import Console

    from contrastlab.cli import train as train_cli

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    terminal = io.StringIO()
    monkeypatch.setattr(train_cli, "err_console", Console(file=terminal, force_terminal=True, width=80))
    monkeypatch.setattr(train_cli.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(train_cli.os, "getloadavg", lambda: (2.0, 9.0, 9.0))
    assert train_cli.note_if_busy(threads=4) is None
    monkeypatch.setattr(train_cli.os, "getloadavg", lambda: (2.5, 0.0, 0.0))
    note = train_cli.note_if_busy(threads=4)
    assert note is not None and "load average 2.5 on 2 cores" in note
    assert terminal.getvalue() == note + "\n"  # printed as returned: one line, no colours added to its numbers
    monkeypatch.setattr(train_cli.os, "cpu_count", lambda: None)  # unknown: taken as one core
    assert "load average 2.5 on 1 cores" in (train_cli.note_if_busy(threads=4) or "")

    def unreported() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(train_cli.os, "getloadavg", unreported)
    assert train_cli.note_if_busy(threads=4) is None
    monkeypatch.setattr(train_cli.os, "getloadavg", lambda: (6.0, 6.0, 6.0))
    monkeypatch.setattr(train_cli, "err_console", Console(file=io.StringIO(), force_terminal=False))
    assert train_cli.note_if_busy(threads=4) is None


def test_recorded_overrides_list_the_config_file_then_components_then_sets(tmp_path: Path) -> None:
    """What ``platform report`` groups runs by: every leaf of ``--config`` (sorted, JSON for non-strings), then
    ``--sampler``/``--encoder``, then the ``--set`` items as given."""
    from contrastlab.cli.train import recorded_overrides

    config = tmp_path / "over.yaml"
    config.write_text("train:\n  steps: 30\n  lr: 0.5\nloss:\n  name: dcl\n  flags: [1, 2]\n")
    assert recorded_overrides(config, "mixed", None, ["seed=3", "loss.tau=0.2"]) == [
        "--set loss.flags=[1, 2]", "--set loss.name=dcl", "--set train.lr=0.5", "--set train.steps=30",
        "--set sampler.name=mixed", "--set seed=3", "--set loss.tau=0.2"]
    assert recorded_overrides(None, None, "mlp", []) == ["--set encoder.name=mlp"]
    assert recorded_overrides(None, None, None, []) == []


def test_keep_checkpoints_on_resume_is_at_least_one() -> None:
    from contrastlab.cli.train import keep_checkpoints_value
    from contrastlab.platform.errors import ConfigError

    assert keep_checkpoints_value(1) == 1
    with pytest.raises(ConfigError, match="--keep-checkpoints 0: keep_checkpoints must be >= 1"):
        keep_checkpoints_value(0)


def test_a_repeated_ctrl_c_is_ignored_while_the_interrupt_messages_print() -> None:
    """In the main thread SIGINT is ignored inside the block and its handler is back afterwards; in another thread
    (where no handler can be set) the block simply runs."""
    import signal
    import threading

    from contrastlab.cli.train import _repeat_ctrl_c_ignored

    before = signal.getsignal(signal.SIGINT)
    with _repeat_ctrl_c_ignored():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is before
    ran: list[bool] = []
    errors: list[BaseException] = []

    def in_a_thread() -> None:
        try:
            with _repeat_ctrl_c_ignored():
                ran.append(True)
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join()
    assert ran == [True] and errors == []


def test_a_resume_applies_keep_checkpoints_and_says_its_step_and_runs_default_to_runs(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    """Without ``--logdir`` a run goes under ./runs; ``--resume RUN --keep-checkpoints 1`` prunes to the newest
    checkpoint (the run's own setting kept 5) and says from which step it continues."""
    import json

    import contrastlab_toy.plugin

    from contrastlab.testing import fresh_plugin_manager

    monkeypatch.chdir(tmp_path)
    with fresh_plugin_manager(contrastlab_toy.plugin, package="contrastlab-toy"):
        result = _invoke(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--run-name", "r",
                          "--set", "train.steps=50", "--set", "checkpoint_every=10", "--keep-checkpoints", "5"])
        assert result.exit_code == 0, result.output
        run_dir = Path("runs") / "toy_clusters" / "dcl" / "r"
        assert result.stderr.splitlines()[0] == f"run directory: {run_dir}", result.stderr  # a note: stderr
        info = json.loads((run_dir / "run.json").read_text())
        (run_dir / "run.json").write_text(json.dumps({**info, "status": "interrupted"}))
        for step in (40, 50):  # as if stopped after step 30's checkpoint
            (run_dir / "checkpoints" / f"step_{step:012d}.pt").unlink()
        result = _invoke(["train", "--resume", str(run_dir), "--keep-checkpoints", "1"])
        assert result.exit_code == 0, result.output
        assert result.stderr.splitlines()[0] == f"resuming {run_dir} from step 30", result.stderr
        assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["step_000000000050.pt"]


def test_eval_of_a_run_without_a_checkpoint_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    import json

    import contrastlab_toy.plugin

    from contrastlab.testing import fresh_plugin_manager

    with fresh_plugin_manager(contrastlab_toy.plugin, package="contrastlab-toy"):
        code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path),
                             "--run-name", "r", "--set", "train.steps=4"])
        assert code == 0, out
        run_dir = tmp_path / "toy_clusters" / "dcl" / "r"
        result = _invoke(["eval", str(run_dir)])
        assert result.exit_code == 0, result.output
        assert not any(line.startswith("video:") for line in result.output.splitlines()), result.output  # none
        assert result.stderr.splitlines() == [f"evaluating {run_dir} (checkpoint at step 4)"], result.stderr
        assert json.loads((run_dir / "eval.json").read_text())["checkpoint_step"] == 4
        (run_dir / "eval.json").unlink()
        for checkpoint in (run_dir / "checkpoints").iterdir():
            checkpoint.unlink()
        code, out = run_cli(["eval", str(run_dir)])
    assert code == 2 and out.strip() == f"error: run {run_dir} has no checkpoint to evaluate", out
    assert not (run_dir / "eval.json").exists()


def test_a_crash_saves_its_traceback_to_error_log_and_marks_the_run_failed(tmp_path: Path, monkeypatch) -> None:
    """The promise printed on a crash, "traceback saved to .../error.log", holds: the file has the traceback."""
    import json

    import contrastlab_toy.plugin

    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.testing import fresh_plugin_manager

    def crash(self, config, run):
        raise RuntimeError("boom in train")

    with fresh_plugin_manager(contrastlab_toy.plugin, package="contrastlab-toy"):
        monkeypatch.setattr(type(get_task_plugin("toy_clusters")), "train", crash)
        result = _invoke(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path),
                          "--run-name", "r"])
    run_dir = tmp_path / "toy_clusters" / "dcl" / "r"
    assert result.exit_code != 0 and isinstance(result.exception, RuntimeError), result.output
    assert result.stderr.splitlines()[1:] == [  # after "run directory: ...", all on stderr
        f"traceback saved to {run_dir / 'error.log'}",
        "no checkpoint was saved, so --resume starts it again from the beginning with this run's config.yaml (a "
        "changed setting needs a new run); fix the cause, then continue with:",
        f"  platform train --resume {run_dir}"], result.stderr
    assert "resume" not in result.stdout, result.stdout
    saved = (run_dir / "error.log").read_text()
    assert saved.startswith("Traceback") and "RuntimeError: boom in train" in saved, saved
    info = json.loads((run_dir / "run.json").read_text())
    assert (info["status"], info["error"]) == ("failed", "RuntimeError: boom in train")


def test_fail_with_resume_puts_the_error_and_the_resume_command_on_stderr(capsys) -> None:
    """Both belong to the error (stdout may be a pipe to another program): one error line, then the command."""
    from types import SimpleNamespace

    import typer

    from contrastlab.cli.train import fail_with_resume

    with pytest.raises(typer.Exit) as stop:
        fail_with_resume("disk full", SimpleNamespace(dir=Path("/r/my run")), 3)  # type: ignore[arg-type]
    assert stop.value.exit_code == 3
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == [
        "error: disk full", "fix the cause, then continue with:", "  platform train --resume '/r/my run'"]


class _FakeStop:
    """A :class:`GracefulStop` stand-in whose outcome the test sets: a saved step, an expired grace period, a signal."""

    outcome: dict = {}

    def __init__(self, *, wanted: bool, announce) -> None:
        self.announce = announce
        self.saved_step, self.expired, self.signum = (self.outcome[k] for k in ("saved_step", "expired", "signum"))
        self.grace_s, self.requested = 5.0, False

    def __enter__(self) -> _FakeStop:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def hold(self) -> None:
        return None


@pytest.mark.parametrize(
    ("saved_step", "expired", "latest", "signum", "said", "code"),
    [
        (7, False, 7, 15, "stopped after saving a checkpoint at step 7", 143),
        (None, True, 20, None, "interrupted: no checkpoint point within 5 s, so none was saved; --resume continues "
                               "from step 20", 130),
        (None, True, None, 2, "interrupted: no checkpoint point within 5 s, so none was saved; --resume starts it "
                              "again from the beginning", 130),
        (None, False, None, None, "interrupted before its first checkpoint; --resume starts it again from the "
                                  "beginning", 130),
        (None, False, 20, None, "interrupted", 130),
    ],
)
def test_a_stopped_run_says_what_was_saved_and_exits_with_the_signals_status(
        monkeypatch, capsys, saved_step: int | None, expired: bool, latest: int | None, signum: int | None,
        said: str, code: int) -> None:
    """Each way a run can stop prints on stderr what it kept and its ``--resume`` command; the exit status is the
    shell's for the signal (130 for Ctrl-C, 143 for ``kill``); the run is marked interrupted."""
    from types import SimpleNamespace

    import typer

    from contrastlab.cli import train as train_cli

    monkeypatch.setattr(_FakeStop, "outcome", {"saved_step": saved_step, "expired": expired, "signum": signum})
    monkeypatch.setattr(train_cli, "GracefulStop", _FakeStop)
    marks: list[str] = []
    stops: list[_FakeStop] = []

    def train(config, run):
        stops.append(run.graceful_stop)
        raise KeyboardInterrupt

    run = SimpleNamespace(plugin=SimpleNamespace(checkpoint_on_stop=True, train=train), config=None,
                          mark=lambda status, **_: marks.append(status), latest_checkpoint_step=lambda: latest,
                          dir=Path("/r/x"), graceful_stop=None)
    with pytest.raises(typer.Exit) as stop:
        train_cli.execute(run)  # type: ignore[arg-type]
    assert stop.value.exit_code == code and marks == ["interrupted"] and run.graceful_stop is None
    stops[0].announce("stopping at the next checkpoint point")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == [
        f"{said}; continue with:", "  platform train --resume /r/x", "stopping at the next checkpoint point"]


def test_eval_video_options_of_a_plugin_that_records(tmp_path: Path) -> None:
    """For a plugin with evaluation videos: a directory as ``--video`` is one line and evaluates nothing; a file
    is announced in the "evaluating" line and printed once written."""
    import contrastlab_toy.plugin
    from contrastlab_toy.task import ToyTask

    import contrastlab as cl
    from contrastlab.testing import fresh_plugin_manager

    class VideoToy(ToyTask):
        name = "toy_video"
        eval_options = frozenset({"video"})

        def evaluate(self, run, options):
            if options.video is not None:
                options.video.write_bytes(b"GIF89a")
            return super().evaluate(run, options)

    class Module:
        @cl.hookimpl
        def register_plugins(self, register) -> None:
            register(VideoToy)

    with fresh_plugin_manager(contrastlab_toy.plugin, Module(), package="contrastlab-toy"):
        code, out = run_cli(["train", "--plugin", "toy_video", "--loss", "dcl", "--logdir", str(tmp_path),
                             "--run-name", "r", "--set", "train.steps=4"])
        assert code == 0, out
        run_dir = tmp_path / "toy_video" / "dcl" / "r"
        code, out = run_cli(["eval", str(run_dir), "--video", str(tmp_path)])
        assert code == 2 and out.strip() == (f"error: --video {tmp_path} is a directory; give a file name, e.g. "
                                             f"{tmp_path / 'episode.gif'}"), out
        assert not (run_dir / "eval.json").exists()
        video = tmp_path / "ep.gif"
        code, out = run_cli(["eval", str(run_dir), "--video", str(video)])
    lines = out.splitlines()
    assert code == 0 and f"evaluating {run_dir} (checkpoint at step 4, recording a video to {video})" in lines, out
    assert f"video: {video}" in lines, out
