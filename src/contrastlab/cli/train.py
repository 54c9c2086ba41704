"""``platform train`` and ``platform eval``: pre-flight checks, the run lifecycle, and the final summary."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import torch
import typer
from rich.markup import escape
from rich.table import Table

from contrastlab.cli.common import (
    PRESET_DEFAULT,
    console,
    err_console,
    not_empty,
    print_commands,
    say,
    shell_command,
    user_errors,
)
from contrastlab.experiments.grid import fmt_duration
from contrastlab.platform.config import flatten_items, load_yaml_file, resolve_config
from contrastlab.platform.errors import ConfigError, ContrastlabError, RunDirError, StorageError
from contrastlab.platform.plugins import get_task_plugin
from contrastlab.platform.run import Run, metric_numbers, read_run_info, resolve_device
from contrastlab.platform.rundir import check_writable_dir
from contrastlab.platform.runlock import training_pid
from contrastlab.platform.stopping import GracefulStop
from contrastlab.platform.task import EvalOptions, TaskConfig, TaskPlugin

CPU_WARN_SECONDS = 30 * 60


def warn_if_cpu_heavy(plugin: TaskPlugin, config: TaskConfig, preset: str, device: torch.device) -> None:
    """On a CPU, warn with an ETA when the preset is sized for a GPU, and suggest ``--preset smoke``."""
    if device.type != "cpu":
        return
    estimate = plugin.estimate_seconds(config, "cpu")
    heavy = preset in plugin.gpu_presets or (estimate is not None and estimate > CPU_WARN_SECONDS)
    if not heavy:
        return
    eta = f" (estimated {fmt_duration(estimate)} on this CPU)" if estimate else ""
    err_console.print(
        f"[bold yellow]warning:[/] preset '{preset}' is sized for a GPU but no CUDA device is available{eta}; "
        f"for a quick check use --preset smoke",
        highlight=False, soft_wrap=True,
    )


def note_if_busy(threads: int | None = None) -> str | None:
    """On a CPU already busier than its cores, one note on the terminal (printed and returned; not in logs) that
    torch's OpenMP threads spin-wait for each other, and what to set. Measured on the 2-core machine: a recsys run
    took 58-67 s with the defaults and 3 s with ``OMP_WAIT_POLICY=PASSIVE`` (same metrics); on an idle machine
    PASSIVE made CURL updates about 5 % slower, so it is not set for you (it must be set before torch loads)."""
    if not err_console.is_terminal:
        return None
    threads = torch.get_num_threads() if threads is None else threads
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not reported on this system
        return None
    cores = os.cpu_count() or 1
    if threads < 2 or load <= cores or "OMP_WAIT_POLICY" in os.environ:
        return None
    note = (f"note: this machine is busy (load average {load:.1f} on {cores} cores): torch's {threads} threads "
            f"spin while they wait for each other, which can make training many times slower; start the command "
            f"with OMP_WAIT_POLICY=PASSIVE (same results) or OMP_NUM_THREADS=1")
    err_console.print(note, highlight=False, soft_wrap=True)
    return note


def print_summary(run: Run, summary: dict) -> None:
    """The final table plus the exact TensorBoard command."""
    table = Table(title=escape(f"{run.plugin.name} / {run.config.loss.name} (seed {run.config.seed})"))
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary["metrics"].items():
        table.add_row(escape(key), f"{value:.4g}")  # a plugin's metric name is text, not markup
    table.add_row("wall time", fmt_duration(summary["wall_time_s"]))
    table.add_row("labels used", str(summary["labels_used"]))
    console.print(table)
    say(f"run directory: {run.dir}")
    print_commands(
        "TensorBoard (either command):",
        shell_command("platform", "tensorboard", run.dir),
        shell_command("tensorboard", "--logdir", run.dir),
    )


def recorded_overrides(
    config_file: Path | None, sampler: str | None, encoder: str | None, sets: list[str]
) -> list[str]:
    """Everything that changed the config beyond the preset, as ``--set key=value`` items (in resolution order), so
    ``platform report`` groups runs by their real configuration."""
    items: list[str] = []
    if config_file is not None:
        for key, value in sorted(flatten_items(load_yaml_file(config_file)).items()):
            items.append(f"--set {key}={value if isinstance(value, str) else json.dumps(value)}")
    for section, name in (("sampler", sampler), ("encoder", encoder)):
        if name is not None:
            items.append(f"--set {section}.name={name}")
    return items + [f"--set {item}" for item in sets]


def keep_checkpoints_value(value: int) -> int:
    """``--keep-checkpoints N`` on ``--resume``: at least 1."""
    if value < 1:
        raise ConfigError(f"--keep-checkpoints {value}: keep_checkpoints must be >= 1")
    return value


def resume_command(run: Run) -> str:
    """The shell command that continues ``run``."""
    return shell_command("platform", "train", "--resume", run.dir)


@contextmanager
def _repeat_ctrl_c_ignored() -> Iterator[None]:
    """SIGINT ignored inside the block (main thread only), then its handler back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def execute(run: Run) -> dict:
    """Run ``plugin.train`` under ``run``; Ctrl-C, SIGTERM and crashes leave a resumable run.

    For plugins with ``checkpoint_on_stop``, the first Ctrl-C or SIGTERM saves a checkpoint at the plugin's next
    checkpoint point before the run stops (:mod:`contrastlab.platform.stopping`); a second one stops at once.
    """
    stop = GracefulStop(wanted=run.plugin.checkpoint_on_stop, announce=lambda line: say(line, stderr=True))
    try:
        with stop:
            run.graceful_stop = stop
            metrics = run.plugin.train(run.config, run)
            # the summary is moments away: a signal now is deferred (a second one, 2 s later, still stops), since
            # one that cut it short left the run "running" beside its summary.json (SIGTERM) or "interrupted"
            stop.hold()
            summary = run.finish(metrics)  # in the try: a summary.json that cannot be written says how to resume
        if stop.requested:
            say("the stop came during the last step or the final evaluation, so the run finished instead", stderr=True)
        return summary
    except KeyboardInterrupt:
        with _repeat_ctrl_c_ignored():  # a terminal's repeated Ctrl-C must not cut the messages short
            run.mark("interrupted")
            latest = run.latest_checkpoint_step() if stop.saved_step is None else stop.saved_step
            restart = "--resume starts it again from the beginning" if latest is None else ""
            if stop.saved_step is not None:
                saved = f"stopped after saving a checkpoint at step {stop.saved_step}"
            elif stop.expired:
                where = restart or f"--resume continues from step {latest}"
                saved = f"interrupted: no checkpoint point within {stop.grace_s:g} s, so none was saved; {where}"
            elif latest is None:
                saved = f"interrupted before its first checkpoint; {restart}"
            else:
                saved = "interrupted"
            print_commands(f"{saved}; continue with:", resume_command(run), stderr=True)
        raise typer.Exit(128 + int(stop.signum or signal.SIGINT)) from None  # 143 after `kill`, 130 after Ctrl-C
    except Exception as exc:
        run.mark("failed", error=f"{type(exc).__name__}: {exc}")
        if isinstance(exc, StorageError):  # a full disk, a read-only folder: once fixed, --resume continues
            fail_with_resume(str(exc), run, getattr(exc, "exit_code", 2))
        if isinstance(exc, ContrastlabError):
            raise
        if run.is_main:
            run.rundir.error_log.write_text(traceback.format_exc())
        say(f"traceback saved to {run.rundir.error_log}", stderr=True)
        start_over = "" if run.latest_checkpoint_step() is not None else (
            "no checkpoint was saved, so --resume starts it again from the beginning with this run's config.yaml "
            "(a changed setting needs a new run); ")
        print_commands(f"{start_over}fix the cause, then continue with:", resume_command(run), stderr=True)
        raise
    finally:
        run.graceful_stop = None


def fail_with_resume(message: str, run: Run, code: int) -> None:
    """``error: message`` on one line, then the command that continues ``run`` once the cause is fixed; exit."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    print_commands("fix the cause, then continue with:", resume_command(run), stderr=True)
    raise typer.Exit(code)


def add_train_commands(app: typer.Typer) -> None:
    """Add ``train`` and ``eval`` to ``app``."""

    @app.command("train")
    @user_errors
    def train(
        plugin: Annotated[
            str | None,
            typer.Option("--plugin", "-p", help="Task plugin: curl, simclr, pu, graph, recsys, or a third-party one."),
        ] = None,
        loss: Annotated[
            str | None,
            typer.Option(help="One loss, e.g. infonce, dcl, hcl, bcl, pucl, punce, debiased_pos (default: the "
                         "plugin's: punce for pu, infonce for the others). Several losses side by side: "
                         "`platform compare --loss a,b`."),
        ] = None,
        sampler: Annotated[str | None, typer.Option(help="Sampler (default: the plugin's).")] = None,
        encoder: Annotated[str | None, typer.Option(help="Encoder (default: the plugin's).")] = None,
        preset: Annotated[
            str | None,
            typer.Option(help="Preset, e.g. smoke (a quick CPU check; curl: about 35 s) or paper (GPU-sized) "
                         f"({PRESET_DEFAULT})."),
        ] = None,
        config_file: Annotated[
            Path | None, typer.Option("--config", help="YAML file of overrides (see `platform config`).")
        ] = None,
        set_: Annotated[
            list[str] | None,
            typer.Option(
                "--set", help="Override a key, repeatable: --set loss.tau_plus=0.05 --set train.env_frames=800"
            ),
        ] = None,
        seed: Annotated[
            int | None, typer.Option(help="Random seed (default: 1; same seed + config = same CPU metrics).")
        ] = None,
        device: Annotated[
            str | None,
            typer.Option(help="auto (CUDA when available, else CPU), cpu, cuda or cuda:K (default: the preset's "
                         "device, else auto; the smoke presets of simclr, graph and recsys say cpu).",
                         callback=not_empty),
        ] = None,
        logdir: Annotated[Path | None, typer.Option(help="Root directory of runs (default: runs).")] = None,
        run_name: Annotated[
            str | None, typer.Option(help="Name of the run directory instead of <time>-s<seed>.")
        ] = None,
        resume: Annotated[
            Path | None,
            typer.Option(help="Continue a killed, interrupted or failed run from its last checkpoint (refused when its "
                         "config.yaml changed since then, except device, keep_checkpoints and data paths)."),
        ] = None,
        keep_checkpoints: Annotated[
            int | None,
            typer.Option(
                "--keep-checkpoints",
                help="Keep only the newest N checkpoints (default 2; 1 uses the least disk). "
                "Same as --set keep_checkpoints=N.",
            ),
        ] = None,
    ) -> None:
        """Train a task plugin with any registered loss; writes a run directory with TensorBoard curves.

        Examples:

          platform train --plugin curl --loss pucl --preset smoke

          platform train --plugin simclr --loss dcl --set loss.tau_plus=0.1 --seed 2

          platform train --resume runs/curl/pucl/20261121-120000-s1

        Ctrl-C or SIGTERM saves a checkpoint at the next step, stops the run and prints its --resume command.
        """
        if resume is not None:
            given = {"--plugin": plugin, "--loss": loss, "--sampler": sampler, "--encoder": encoder, "--preset": preset,
                     "--config": config_file, "--set": set_ or None, "--seed": seed, "--logdir": logdir,
                     "--run-name": run_name}
            clash = [name for name, value in given.items() if value is not None]
            if clash:
                raise ConfigError(f"--resume continues a run with its own config.yaml; drop {', '.join(clash)} "
                                  "(only --device and --keep-checkpoints apply to a resumed run)")
            if read_run_info(resume).get("status") == "completed":
                evaluate = shell_command("platform", "eval", resume)
                raise RunDirError(f"run {resume} already completed; see its summary.json (or: {evaluate})")
            keep = None if keep_checkpoints is None else keep_checkpoints_value(keep_checkpoints)  # before Run.open
            check_writable_dir(resume, "--resume")
            run = Run.open(resume, device=device)  # runs the pre-flight check again; rewinds the logs
            if keep is not None:
                run.keep_checkpoints = keep
            say(f"resuming {run.dir} from step {run.latest_checkpoint_step() or 0}", stderr=True)
        else:
            if plugin is None:
                raise ConfigError("--plugin is required (or --resume RUN_DIR); see `platform list plugins`")
            if loss is not None and "," in loss:
                compare = shell_command("platform", "compare", "--plugin", plugin, "--loss", loss,
                                        *(["--preset", preset] if preset else []))
                raise ConfigError(f"--loss {loss}: platform train trains one loss; to train several side by side "
                                  f"use {compare}")
            task = get_task_plugin(plugin)
            preset_name = task.default_preset if preset is None else preset
            config = resolve_config(
                task,
                preset=preset_name,
                config_file=config_file,
                sets=[*(set_ or []), *([] if keep_checkpoints is None else [f"keep_checkpoints={keep_checkpoints}"])],
                loss=loss,
                sampler=sampler,
                encoder=encoder,
                seed=seed,
                device=device,
            )
            device_obj = resolve_device(config.device)
            overrides = recorded_overrides(config_file, sampler, encoder, set_ or [])
            # Run.create runs the pre-flight check (components, labels, the plugin's own) before writing anything
            run = Run.create(task, config, logdir or Path("runs"), preset=preset_name, overrides=overrides,
                             run_name=run_name)
            warn_if_cpu_heavy(task, config, preset_name, device_obj)
            say(f"run directory: {run.dir}", stderr=True)
            if not task.uses_loss(config):
                say(f"note: this {task.name} configuration trains no contrastive loss, so loss '{config.loss.name}' "
                    "is not used (the run is filed under it; platform report lists it under loss 'none')",
                    stderr=True)
        note_if_busy()
        summary = execute(run)
        print_summary(run, summary)
        primary = run.plugin.primary_metric  # (a resumed run too)
        if primary and primary not in summary.get("metrics", {}):  # e.g. simclr with eval.linear=false, or a slip
            returned = ", ".join(sorted(summary.get("metrics", {}))) or "none"
            say(f"note: this run has no '{primary}', the primary metric of plugin '{run.plugin.name}' (its final "
                f"metrics: {returned}); platform compare and platform tune rank runs by it", stderr=True)

    @app.command("eval")
    @user_errors
    def evaluate(
        run_dir: Annotated[Path, typer.Argument(help="A run directory written by `platform train`.")],
        device: Annotated[
            str | None,
            typer.Option(help="auto, cpu, cuda or cuda:K (default: the device in the run's config.yaml).",
                         callback=not_empty),
        ] = None,
        episodes: Annotated[
            int | None,
            typer.Option(min=1, help="Evaluation episodes, RL plugins (default: the run's config; curl: its "
                         "train.eval_episodes, 2 in smoke, 10 in paper)."),
        ] = None,
        video: Annotated[Path | None, typer.Option(help="Save one evaluation episode as GIF/MP4 (RL plugins).")] = None,
    ) -> None:
        """Re-evaluate a run's latest checkpoint through its plugin; writes eval.json (the metrics and the
        checkpoint's step) in the run directory.

        Examples:

          platform eval runs/curl/pucl/20261121-120000-s1 --video episode.gif

          platform eval runs/simclr/dcl/20261121-130000-s1
        """
        run = Run.open(run_dir, device=device, resume=False)
        step = run.latest_checkpoint_step()
        if step is None:
            trainer = training_pid(run.dir)
            training = f" yet: it is being trained now by another process (pid {trainer})" if trainer else ""
            raise RunDirError(f"run {run_dir} has no checkpoint to evaluate{training}")
        check_writable_dir(run_dir, "RUN_DIR", hint="; platform eval writes eval.json there")
        options = EvalOptions(episodes=episodes, video=video)
        for name in sorted(f.name for f in dataclasses.fields(options)):  # dropped before any option is checked
            if getattr(options, name) is not None and name not in run.plugin.eval_options:
                err_console.print(f"note: plugin '{run.plugin.name}' has no evaluation {name}; --{name} is ignored",
                                  highlight=False, soft_wrap=True)
                options = dataclasses.replace(options, **{name: None})
        video = options.video
        if video is not None:
            if video.is_dir():
                raise ConfigError(f"--video {video} is a directory; give a file name, e.g. {video / 'episode.gif'}")
            check_writable_dir(video.parent, "--video", shown=video)
        run.plugin.check_eval(options)
        recording = f", recording a video to {video}" if video is not None else ""
        say(f"evaluating {run.dir} (checkpoint at step {step}{recording})", stderr=True)
        status, done = run.rundir.info().get("status"), f"{run.rundir.progress():.0%} done"
        trainer = training_pid(run.dir) if status != "completed" else None
        if trainer is not None:
            say(f"note: this run is being trained now by another process (pid {trainer}), {done}, so these are the "
                "metrics of a partly trained model", stderr=True)
        elif status != "completed":  # a stopped run's checkpoint is not the trained model: say so before its numbers
            state = "no process is training it: killed?" if status == "running" else f"status {status or 'unknown'}"
            print_commands(f"note: this run has not completed ({state}, {done}), so these are the metrics of a partly "
                           "trained model; to finish it:", resume_command(run), stderr=True)
        metrics = metric_numbers(run.plugin.name, run.plugin.evaluate(run, options), "evaluate")
        record = dict(metrics)  # + which checkpoint (a run may go on afterwards)
        run.rundir.eval_json.write_text(json.dumps({**record, "checkpoint_step": step}, indent=2))
        # the run's names, not its path: rich wraps a title to the table's width, which cut the path mid-name
        table = Table(title=escape(f"eval: {run.plugin.name} / {run.config.loss.name} (seed {run.config.seed})"))
        table.add_column("metric")
        table.add_column("value", justify="right")
        for key, value in metrics.items():
            table.add_row(escape(key), f"{float(value):.4g}")
        console.print(table)
        say(f"eval.json: {run.rundir.eval_json}")
        if video is not None and video.is_file():
            say(f"video: {video}")
        run.close()
