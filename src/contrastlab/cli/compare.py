"""``platform compare`` and ``platform report``: the command-line side of loss comparisons.

The lead's ``cli.py`` calls :func:`add_compare_commands`. Grid logic lives in :mod:`.compare`, aggregation in
:mod:`.report`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from contrastlab.cli.common import console, err_console, not_empty, print_commands, say, shell_command, user_errors
from contrastlab.experiments import grid as cmp
from contrastlab.experiments import runner
from contrastlab.experiments.interrupts import sigterm_as_interrupt
from contrastlab.experiments.out_folder import (
    acquire_lock,
    refuse_busy_out,
    refuse_inside_a_run,
    refuse_other_plugin,
)
from contrastlab.experiments.plan import eta_lines, make_plan, make_tuned_plan
from contrastlab.platform.errors import ConfigError, RunDirError
from contrastlab.platform.run import resolve_device
from contrastlab.platform.rundir import RunDir, check_writable_dir

HELP = {
    "plugin": "Task plugin to run, e.g. --plugin simclr (see `platform list plugins`); not needed with --recipe.",
    "loss": "Comma-separated losses to compare, e.g. --loss infonce,dcl,hcl (not with --recipe).",
    "seeds": "Run seeds 1..N for every configuration, e.g. --seeds 3 (default: 1, or the recipe's count).",
    "seed_list": "Exact seeds instead of --seeds, e.g. --seed-list 1,2,7.",
    "preset": "Plugin preset for every run, e.g. --preset paper. Required for plugins with GPU-sized presets "
    "(curl, simclr, pu, recsys) unless --recipe gives it.",
    "recipe": "A whole experiment: a built-in recipe name (dcl-table3) or a recipe YAML file; fixes the plugin, "
    "preset, losses, tasks and grid. --seeds, --preset and --set still override it.",
    "set": "Fixed override for every run (repeatable), e.g. --set train.max_steps=50 (simclr). "
    "A loss.* key only reaches the losses that have that hyperparameter.",
    "grid": "Grid axis KEY=V1,V2,... (repeatable; axes multiply), e.g. --grid loss.tau_plus=0.01,0.05,0.1. "
    "Losses without that hyperparameter run once per seed.",
    "jobs": "Runs at a time on CPU, e.g. --jobs 2 (default: 1). Each run gets OMP_NUM_THREADS=cores/N "
    "unless it is already set.",
    "devices": "CUDA devices, one run per device at a time, e.g. --devices 0,1 (each run gets --device "
    "cuda:K). Exclusive with --jobs.",
    "runs_per_gpu": "Runs at a time on each --devices GPU, e.g. --runs-per-gpu 4 (default: 1); small models such "
    "as curl leave most of a GPU idle (docs/curl.md, \"Speed\").",
    "out": "Output directory, e.g. --out results/table3 (default: compare/<plugin or recipe>-<hash of the grid>).",
    "rows": "Comma-separated config keys naming the table rows, e.g. --rows env.task (default: every "
    "varying key not under loss.).",
    "dry_run": "Print the preset, run count, ETA and the expanded grid (new/resume/finished), then stop.",
    "backend": "Where the runs execute: local (a process pool on this machine, the default) or ray (one Ray task "
    "per run on a Ray cluster; needs contrastlab\\[ray]; see docs/compare.md).",
    "address": "Ray cluster to use with --backend ray: auto (the cluster `ray start` started here), HOST:PORT of a "
    "head node, or omit to start a private local Ray instance.",
    "cpus_per_run": "CPUs each run declares to Ray, e.g. --cpus-per-run 2 (default: 1); more than the cluster has "
    "in total, or than any one node has, is refused.",
    "gpus_per_run": "GPUs each run declares to Ray, e.g. --gpus-per-run 0.25 packs 4 runs per GPU (default: 0); "
    "more than the cluster has in total (e.g. any on a cluster without GPUs), or than any one node has, is refused.",
    "max_retries": "Ray backend: retries of a run whose process failed or whose worker was lost (default: 2).",
    "shared_fs": "Ray backend: whether workers see --out (default: detected per task through a marker file); "
    "--no-shared-fs always ships finished run directories back to the driver.",
    "tuned": "A `platform tune` output directory (repeatable): compare each study's best configuration on fresh "
    "seeds, e.g. --tuned tune/infonce --tuned tune/dcl --seeds 5 (see docs/tune.md).",
    "dirs": "Run directories, or folders containing them, e.g. compare/simclr-1a2b3c4d runs/simclr.",
    "report_out": "Where to write the outputs, e.g. --out report/ (default: DIR, when it is one compare or tune "
    "output folder; required otherwise).",
    "curve": "Metric tag to plot as the learning curve, e.g. --curve eval/knn_top1 "
    "(default: the plugin's primary metric).",
    "baseline": "Configuration label the paired comparison of results.md subtracts, seed by seed, e.g. "
    "--baseline 'dcl tau_plus=0.1' (default: each task's infonce configuration).",
}
"""Help text of every option (each with an example)."""


def recorded_rows(dirs: Sequence[Path]) -> list[str] | None:
    """The table row keys a ``compare.json`` in ``dirs`` recorded (a recipe's), if they all agree."""
    found = set()
    for d in dirs:
        spec = runner.read_json(Path(d) / "compare.json") or {}
        if spec.get("rows") is not None:  # [] is a choice too: one row (compare --tuned), losses as columns
            found.add(tuple(spec["rows"]))
    return list(found.pop()) if len(found) == 1 else None


def check_row_keys(rows: Sequence[str], configs: dict[str, Any]) -> None:
    """Refuse ``--rows`` keys that are no config key of the grid's runs, before anything runs or is written."""
    from contrastlab.platform.config import flatten_keys

    known = set().union(*(flatten_keys(c.model_dump()) for c in configs.values()))
    for key in rows:
        if key not in known:
            sections = sorted({k.split(".")[0] + "." for k in known if "." in k})
            raise ConfigError(f"--rows {key} is not a config key of these runs; their keys start with "
                              f"{', '.join(sections)} (see platform config)")


def check_seeds(seeds: Sequence[int]) -> None:
    """Refuse a seed the runs' config would refuse (``--seed-list -1``), before anything runs or is written: the
    seed is no ``--set`` item, so :func:`~contrastlab.experiments.grid.validate_points` never saw it, and every run
    started, failed, and left a report of failures."""
    from pydantic import TypeAdapter, ValidationError

    from contrastlab.platform.task import TaskConfig

    field = TaskConfig.model_fields["seed"]
    adapter = TypeAdapter(Annotated[(int, *field.metadata)])
    for seed in seeds:
        try:
            adapter.validate_python(seed)
        except ValidationError as exc:
            raise ConfigError(f"seed {seed}: {exc.errors()[0]['msg']} (see --seeds / --seed-list)") from None


def report_home(dirs: Sequence[Path], out: Path | None = None) -> Path:
    """Where ``platform report`` writes: ``out``, else the one DIR given when it is a compare or tune output. A
    report written among plain runs (no ``--out``, or an ``--out`` that is a plain DIR or inside a run) would put
    its ``tensorboard/`` links beside them (``platform tensorboard`` would then show every run twice): refused."""
    from contrastlab.platform.rundir import find_run_dirs

    def is_output_folder(folder: Path) -> bool:
        return any((folder / name).is_file() for name in ("compare.json", "best.json"))

    runs = find_run_dirs(dirs)
    if out is not None:
        target = Path(out).resolve()

        def within(folder: Path) -> bool:
            return target == Path(folder).resolve() or Path(folder).resolve() in target.parents

        if any(within(r) for r in runs) or any(within(d) and not is_output_folder(Path(d)) for d in dirs):
            raise ConfigError(f"--out {out} is inside the runs being read; choose a folder outside them, "
                              "e.g. --out report/")
        return Path(out)
    home = Path(dirs[0])
    if len(dirs) == 1 and (is_output_folder(home) or not runs):  # no runs: the report's own one-line error says so
        return home
    what = "several DIRs" if len(dirs) > 1 else f"{dirs[0]}, which is not a compare or tune output folder,"
    raise ConfigError(f"give --out (e.g. --out report/): with {what} the report would be written among the runs")


def row_keys(rows: str | None) -> list[str]:
    """``--rows a,b`` as a list (empty items dropped)."""
    return [key.strip() for key in (rows or "").split(",") if key.strip()]


def print_results(out: Path) -> None:
    """Echo the main table of ``results.md``, its paired comparison against the baseline, and where every output is."""
    sections = (out / "results.md").read_text().split("\n## ")
    paired = [s for s in sections[1:] if s.startswith("Against the baseline")]  # the answer to "does it help?"
    text = "\n## ".join([sections[0], *paired]).rstrip("\n")
    console.print(text, markup=False, highlight=False, soft_wrap=True)
    for name in ("results.csv", "summary.csv", "results.md", "curves.png", "aggregate.png", "final.png"):
        say(f"{name:13s} {out / name}")
    board = out / "tensorboard"
    print_commands(
        "TensorBoard (either command):",
        shell_command("platform", "tensorboard", board),
        shell_command("tensorboard", "--logdir", board),
    )


def refuse_unreadable_runs(run_dirs: Sequence[Path]) -> None:
    """Refuse, before anything runs, a run of ``--out`` to be resumed whose ``run.json`` cannot be read (its
    ``platform train --resume`` would fail): one line naming it and how to start that run afresh."""
    for run_dir in run_dirs:
        try:
            RunDir(run_dir).read_info()
        except RunDirError as exc:
            raise RunDirError(f"{exc}; move {run_dir} aside to train that run afresh") from None


def check_backend(
    backend: str,
    address: str | None,
    jobs: int | None,
    devices: str | None,
    cpus: float | None,
    gpus: float | None,
    retries: int | None,
) -> dict | None:
    """Validate the backend options before anything runs; the Ray keyword arguments, or ``None`` for local.
    An unreachable ``--address`` (or one where no Ray head answers), a missing ``ray`` package, or a cluster with
    fewer GPUs (CPUs) than ``--gpus-per-run`` (``--cpus-per-run``) is a one-line error here (nothing written
    yet). ``cpus``, ``gpus`` and ``retries`` are ``None`` when not given: Ray's defaults (1, 0, 2) apply, and
    the local backend refuses any that is given."""
    if backend not in ("local", "ray"):
        raise ConfigError(f"--backend {backend}: choose local or ray")
    if backend == "local":
        given = {"--address": address, "--cpus-per-run": cpus, "--gpus-per-run": gpus, "--max-retries": retries}
        for name, value in given.items():
            if value is not None:
                raise ConfigError(f"{name} needs --backend ray")
        return None
    if jobs is not None or devices is not None:
        raise ConfigError("--jobs/--devices are for --backend local; with ray use --cpus-per-run/--gpus-per-run")
    cpus = 1.0 if cpus is None else cpus
    gpus = 0.0 if gpus is None else gpus
    retries = 2 if retries is None else retries
    for name, value in (("--cpus-per-run", cpus), ("--gpus-per-run", gpus)):
        if not math.isfinite(value):
            raise ConfigError(f"{name} {value:g}: must be finite")
    if cpus < 0 or gpus < 0 or cpus + gpus <= 0:
        raise ConfigError(f"--cpus-per-run {cpus:g} --gpus-per-run {gpus:g}: must be ≥ 0 and not both 0")
    if gpus > 1 and not float(gpus).is_integer():  # Ray refuses it at the first submission, with a traceback
        raise ConfigError(f"--gpus-per-run {gpus:g}: above 1 it must be a whole number of GPUs (Ray's rule)")
    if retries < 0:
        raise ConfigError(f"--max-retries {retries}: must be ≥ 0")
    from contrastlab.experiments.ray_cluster import check_address, connect_checked, import_ray

    import_ray()
    check_address(address)
    if address is not None:  # connect now: a missing cluster, or one that cannot fit a run, fails before any write
        connect_checked(address, cpus, gpus)
    return {"address": address, "cpus_per_run": cpus, "gpus_per_run": gpus, "max_retries": retries}


def add_compare_commands(app: typer.Typer) -> None:
    """Add ``compare`` and ``report`` to ``app``."""

    @app.command("compare")
    @user_errors
    def compare(
        plugin: Annotated[str | None, typer.Option("--plugin", "-p", help=HELP["plugin"])] = None,
        loss: Annotated[str | None, typer.Option(help=HELP["loss"])] = None,
        recipe: Annotated[str | None, typer.Option(help=HELP["recipe"])] = None,
        seeds: Annotated[int | None, typer.Option(help=HELP["seeds"])] = None,
        seed_list: Annotated[str | None, typer.Option(help=HELP["seed_list"])] = None,
        preset: Annotated[str | None, typer.Option(help=HELP["preset"])] = None,
        set_: Annotated[list[str] | None, typer.Option("--set", help=HELP["set"])] = None,
        grid: Annotated[list[str] | None, typer.Option(help=HELP["grid"])] = None,
        jobs: Annotated[int | None, typer.Option(help=HELP["jobs"])] = None,
        devices: Annotated[str | None, typer.Option(help=HELP["devices"])] = None,
        runs_per_gpu: Annotated[int | None, typer.Option(help=HELP["runs_per_gpu"])] = None,
        out: Annotated[Path | None, typer.Option(help=HELP["out"])] = None,
        rows: Annotated[str | None, typer.Option(help=HELP["rows"], callback=not_empty)] = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help=HELP["dry_run"])] = False,
        backend: Annotated[str, typer.Option(help=HELP["backend"])] = "local",
        address: Annotated[str | None, typer.Option(help=HELP["address"], callback=not_empty)] = None,
        cpus_per_run: Annotated[float | None, typer.Option(help=HELP["cpus_per_run"])] = None,
        gpus_per_run: Annotated[float | None, typer.Option(help=HELP["gpus_per_run"])] = None,
        max_retries: Annotated[int | None, typer.Option(help=HELP["max_retries"])] = None,
        shared_fs: Annotated[bool | None, typer.Option("--shared-fs/--no-shared-fs", help=HELP["shared_fs"])] = None,
        tuned: Annotated[list[Path] | None, typer.Option(help=HELP["tuned"])] = None,
    ) -> None:
        """Run a loss × hyperparameter × seed grid as separate processes, then write the results table, plots
        and a side-by-side TensorBoard logdir.

        Before anything runs it prints the preset, the number of runs and an ETA. Outputs in --out: results.csv,
        summary.csv, results.md (mean ± std [95 % CI]; best in bold only where intervals separate, else "tie"),
        curves.png, aggregate.png, final.png, tensorboard/.

        Repeating the command skips finished runs and resumes unfinished ones (see docs/compare.md). Ctrl-C
        (exit 130) or SIGTERM (`kill PID`, exit 143) stops the running runs, which end interrupted.

        A failed run never stops the others; results.md lists it with its error, and the exit code is 1.

        Examples:

          platform compare --plugin simclr --loss infonce,dcl --seeds 3 --preset smoke

          platform compare --recipe dcl-table3 --devices 0 --runs-per-gpu 4

          platform compare --plugin curl --loss infonce,dcl \\
            --grid loss.tau_plus=0.01,0.1 --preset paper --seeds 3

          platform compare --plugin pu --loss infonce,pucl --grid loss.alpha=0.3,0.5 \\
            --preset paper --devices 0,1

          platform compare --plugin simclr --loss infonce,dcl --preset cifar10-paper \\
            --seeds 5 --backend ray --address auto --gpus-per-run 0.25
        """
        ray_opts = check_backend(backend, address, jobs, devices, cpus_per_run, gpus_per_run, max_retries)
        sets = [cmp.parse_set(s) for s in set_ or []]
        cmp.refuse_device_set([k for k, _ in sets], "--devices" if devices is not None else
                              "--gpus-per-run" if ray_opts and ray_opts["gpus_per_run"] > 0 else None)
        if jobs is not None and devices is not None:
            raise ConfigError("--jobs and --devices are exclusive: --devices runs one process per listed GPU")
        if jobs is not None and jobs < 1:
            raise ConfigError(f"--jobs {jobs}: must be ≥ 1")
        if runs_per_gpu is not None and devices is None:
            raise ConfigError("--runs-per-gpu needs --devices (it packs runs onto the listed GPUs)")
        slots: list[str | None] = ([*cmp.device_slots(cmp.parse_devices(devices), runs_per_gpu or 1)]
                                   if devices is not None else [None] * (jobs or 1))
        given = {"--plugin": plugin, "--loss": loss, "--recipe": recipe, "--grid": grid, "--preset": preset}
        extra_opts = [name for name, value in given.items() if value]
        if tuned and extra_opts:
            raise ConfigError(
                f"--tuned takes the plugin, loss, preset and values from the studies; drop {', '.join(extra_opts)}"
            )
        if tuned:
            plan = make_tuned_plan(tuned, seeds, seed_list, sets)
        else:
            plan = make_plan(plugin, loss, recipe, seeds, seed_list, preset, sets, grid or [])
        configs = cmp.validate_points(plan.points)
        check_seeds(sorted({p.seed for p in plan.points}))
        out_dir = out or plan.default_out
        points = cmp.drop_loss_free_repeats(plan.points, configs, plan.plugin,
                                            started=lambda p: runner.run_state(p.run_dir(out_dir)) != "fresh")
        if len(points) < len(plan.points):
            err_console.print(f"note: {cmp.count(len(plan.points) - len(points), 'run')} left out: configurations "
                              f"that train no loss run once per seed, not once per loss", highlight=False,
                              soft_wrap=True)
            plan = dataclasses.replace(plan, points=points)
        check_row_keys(row_keys(rows), configs)
        if devices is None and ray_opts is None:  # local runs on their own device setting: no CUDA here, error now
            for config in configs.values():
                resolve_device(config.device)
        if not dry_run:
            check_writable_dir(out_dir, "--out")
            refuse_busy_out(out_dir)  # before the header: the refusal is the command's only line
            if ray_opts is not None and ray_opts["address"] is None:
                from contrastlab.experiments.ray_cluster import connect_checked

                # start the private Ray instance now: a run size it cannot hold is refused before anything is written
                connect_checked(None, ray_opts["cpus_per_run"], ray_opts["gpus_per_run"])
        refuse_inside_a_run(out_dir)
        refuse_other_plugin(out_dir, plan.plugin.name)
        states = [runner.run_state(p.run_dir(out_dir)) for p in plan.points]
        refuse_unreadable_runs([p.run_dir(out_dir) for p, s in zip(plan.points, states, strict=True) if s == "resume"])
        counts = {s: states.count(s) for s in ("completed", "resume", "fresh")}
        where = f"{len(slots)} at a time" if ray_opts is None else "on Ray, as many at a time as resources allow"
        say(f"{plan.title}: preset {plan.preset}, {cmp.count(len(plan.points), 'run')} → {out_dir}: "
            f"{counts['completed']} finished (skipped), {counts['resume']} to resume, {counts['fresh']} new; {where}; "
            f"logs in {out_dir / 'logs'}", stderr=True)
        pending = [p for p, s in zip(plan.points, states, strict=True) if s != "completed"]
        eta = eta_lines(plan, pending, configs, slots, out_dir) if ray_opts is None else []
        for line in [*plan.warnings, *eta]:
            style = "bold yellow" if line.startswith("warning:") else None
            err_console.print(escape(line), style=style, highlight=False, soft_wrap=True)
        if dry_run:
            if plan.about:
                say(plan.about)
            for p, s in zip(plan.points, states, strict=True):
                label = p.label if plan.plugin.uses_loss(configs[p.config_hash]) else (  # as the tables name it
                    f"none (filed under {p.loss}){p.label.removeprefix(p.loss)}")
                say(f"{s:9s} {label:32s} seed {p.seed:<3d} {p.run_dir(out_dir)}")
            return
        lock = acquire_lock(out_dir)
        try:
            spec = {**plan.spec, "preset": plan.preset, "rows": row_keys(rows) or plan.rows}
            spec["runs"] = [str(p.run_dir(out_dir)) for p in plan.points]
            (out_dir / "compare.json").write_text(json.dumps(spec, indent=2))
            with sigterm_as_interrupt() as term:  # `kill PID` stops the runs like Ctrl-C (exit 143, not 130)
                try:
                    if ray_opts is None:
                        results = runner.run_grid(plan.points, out_dir, slots=slots, console=err_console)
                    else:
                        from contrastlab.experiments.ray_runner import run_grid_ray

                        results = run_grid_ray(
                            plan.points, out_dir, console=err_console, shared_fs=shared_fs, **ray_opts
                        )
                except KeyboardInterrupt:
                    err_console.print(
                        "interrupted; run the same command again to resume the unfinished runs", soft_wrap=True
                    )
                    raise typer.Exit(term.exit_code) from None
            from contrastlab.experiments.report import build_report

            dirs = [p.run_dir(out_dir) for p in plan.points if p.run_dir(out_dir).is_dir()]
            build_report(dirs, out_dir, rows=row_keys(rows) or plan.rows)
        finally:
            lock.unlink(missing_ok=True)
        print_results(out_dir)
        failed = [r for r in results if r.status == "failed"]
        if failed:
            logs = out_dir / "logs"
            total = cmp.count(len(results), "run")
            err_console.print(escape(f"{len(failed)} of {total} failed; see results.md and {logs}"), soft_wrap=True)
            raise typer.Exit(1)

    @app.command("report")
    @user_errors
    def report(
        dirs: Annotated[list[Path], typer.Argument(help=HELP["dirs"])],
        out: Annotated[Path | None, typer.Option(help=HELP["report_out"])] = None,
        rows: Annotated[str | None, typer.Option(help=HELP["rows"], callback=not_empty)] = None,
        curve: Annotated[str | None, typer.Option(help=HELP["curve"], callback=not_empty)] = None,
        baseline: Annotated[str | None, typer.Option(help=HELP["baseline"], callback=not_empty)] = None,
    ) -> None:
        """Rebuild results.csv, summary.csv, results.md, curves.png, aggregate.png, final.png and the TensorBoard
        logdir from run dirs (see docs/compare.md, "platform report").

        Examples:

          platform report compare/simclr-1a2b3c4d

          platform report runs/curl/infonce runs/curl/dcl \\
            --out table3 --rows env.domain
        """
        from contrastlab.experiments.report import build_report

        out_dir = report_home(dirs, out)
        check_writable_dir(out_dir, "--out" if out is not None else "output directory (DIR; see --out)")
        build_report(dirs, out_dir, rows=row_keys(rows) or recorded_rows(dirs), curve=curve, baseline=baseline,
                     note=lambda text: say(f"note: {text}", stderr=True))
        print_results(out_dir)
