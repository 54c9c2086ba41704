"""``platform tune``: Optuna search over config keys (logic in :mod:`contrastlab.experiments.tune`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from contrastlab.cli.common import err_console, not_empty, print_commands, say, shell_command, user_errors
from contrastlab.cli.compare import HELP as COMPARE_HELP
from contrastlab.cli.compare import check_backend
from contrastlab.experiments.grid import refuse_device_set
from contrastlab.experiments.interrupts import TermState, sigterm_as_interrupt
from contrastlab.platform.errors import ConfigError

HELP = {
    "plugin": "Task plugin to tune, e.g. --plugin simclr.",
    "loss": "The loss every trial trains with, e.g. --loss dcl.",
    "search": "KEY=DIST (repeatable): uniform(a,b), log-uniform(a,b), int(a,b), log-int(a,b) or choice(v1,v2,...), "
    "e.g. --search 'loss.tau_plus=log-uniform(0.001,0.3)'.",
    "trials": "Trials to finish (COMPLETE or PRUNED) in the study, counting those of earlier runs (default: 20). "
    "Failed trials do not count; 3 failed trials in a row stop the command (exit code 1).",
    "seeds_per_trial": "Seeds 1..N trained per trial; the objective is their mean primary metric (default: 1).",
    "out": "Output directory: trials/, best.yaml, best.json, trials.csv/md, history.png, importance.png "
    "(default: tune/<plugin>-<loss>).",
    "storage": "Optuna storage URL (default: sqlite:///OUT/study.db), e.g. postgresql://user@db/tune to run "
    "workers on several machines.",
    "study": "Study name in the storage (default: <plugin>-<loss>). Resuming it needs the same plugin, loss, "
    "preset, --set, --search, --seeds-per-trial and --prune-on as when it was created.",
    "pruner": "median (stop a trial whose first seed's curve is below the median of earlier trials at the same "
    "step; 5 start-up trials) or none. Local backend only: on Ray trials are not pruned.",
    "prune_on": "Metric tag whose curve the pruner watches (default: the primary metric), e.g. --prune-on "
    "eval/knn_top1 for simclr, whose primary eval/linear_top1 is only measured at the end of a run. A tag the "
    "plugin does not log is refused, and so is a loss curve (it is read in the objective's direction).",
    "device": "--device of every run, e.g. cuda:0 (default: the config's); a CUDA device this machine lacks is "
    "refused before anything runs (local backend).",
    "parallel": "Trials at a time in this worker (default: 1; useful with --backend ray).",
    "set": "Fixed override for every run of every trial (repeatable), e.g. --set train.max_steps=50 (simclr). A "
    "loss.* key must be a hyperparameter of --loss (else it is refused); a searched key cannot also be set.",
}


def add_tune_commands(app: typer.Typer) -> None:
    """Add ``tune`` to ``app``."""

    @app.command("tune")
    @user_errors
    def tune(
        plugin: Annotated[str, typer.Option("--plugin", "-p", help=HELP["plugin"])],
        loss: Annotated[str, typer.Option(help=HELP["loss"])],
        search: Annotated[list[str], typer.Option(help=HELP["search"])],
        trials: Annotated[int, typer.Option(help=HELP["trials"])] = 20,
        seeds_per_trial: Annotated[int, typer.Option(help=HELP["seeds_per_trial"])] = 1,
        preset: Annotated[str | None, typer.Option(help="Plugin preset of every trial, e.g. --preset smoke. Required "
                          "for plugins with GPU-sized presets (curl, simclr, pu, recsys).")] = None,
        set_: Annotated[list[str] | None, typer.Option("--set", help=HELP["set"])] = None,
        out: Annotated[Path | None, typer.Option(help=HELP["out"])] = None,
        storage: Annotated[str | None, typer.Option(help=HELP["storage"], callback=not_empty)] = None,
        study: Annotated[str | None, typer.Option(help=HELP["study"], callback=not_empty)] = None,
        pruner: Annotated[str, typer.Option(help=HELP["pruner"])] = "median",
        prune_on: Annotated[str | None, typer.Option(help=HELP["prune_on"], callback=not_empty)] = None,
        device: Annotated[str | None, typer.Option(help=HELP["device"], callback=not_empty)] = None,
        parallel: Annotated[int, typer.Option(help=HELP["parallel"])] = 1,
        backend: Annotated[str, typer.Option(help=COMPARE_HELP["backend"])] = "local",
        address: Annotated[str | None, typer.Option(help=COMPARE_HELP["address"], callback=not_empty)] = None,
        cpus_per_run: Annotated[float | None, typer.Option(help=COMPARE_HELP["cpus_per_run"])] = None,
        gpus_per_run: Annotated[float | None, typer.Option(help=COMPARE_HELP["gpus_per_run"])] = None,
        max_retries: Annotated[int | None, typer.Option(help=COMPARE_HELP["max_retries"])] = None,
    ) -> None:
        """Search hyperparameters with Optuna, optimising (maximising or minimising as the plugin declares) its
        primary metric (see docs/tune.md).

        Outputs in --out: best.yaml (for `platform train --config`), best.json (for `platform compare --tuned`),
        trials.csv, trials.md, history.png, importance.png, and every trial's runs under trials/. One line per run
        start (each seed of a trial) and per trial end goes to stderr. Repeating the command resumes the study;
        Ctrl-C (exit 130) or SIGTERM (`kill PID`, exit 143) stops it and queues the interrupted trial's parameters to
        run first on resume.

        Examples:

          platform tune --plugin simclr --loss dcl --preset cifar10-paper \\
            --search 'loss.tau_plus=log-uniform(0.001,0.3)' --trials 40

          platform tune --plugin recsys --loss hcl --preset smoke \\
            --search 'loss.tau_plus=uniform(0.01,0.3)' \\
            --search 'loss.beta=uniform(0.1,2)' --trials 20 --seeds-per-trial 2 \\
            --backend ray --address auto --parallel 4
        """
        from contrastlab.experiments import tune as tn
        from contrastlab.experiments.grid import count
        from contrastlab.experiments.plan import require_preset
        from contrastlab.experiments.tune_search import parse_fixed
        from contrastlab.experiments.tune_study import check_existing
        from contrastlab.experiments.tune_trials import TooManyFailuresError
        from contrastlab.platform.plugins import get_task_plugin
        from contrastlab.platform.rundir import check_writable_dir

        for option, value in (("--trials", trials), ("--seeds-per-trial", seeds_per_trial), ("--parallel", parallel)):
            if value < 1:
                raise ConfigError(f"{option} {value}: must be ≥ 1")
        if pruner not in ("median", "none"):
            raise ConfigError(f"--pruner {pruner}: choose median or none")
        params = [tn.parse_search(s) for s in search]
        keys = [p.key for p in params]
        twice = sorted({key for key in keys if keys.count(key) > 1})
        if twice:
            raise ConfigError(f"--search: {', '.join(twice)} {'is' if len(twice) == 1 else 'are'} given twice")
        sets = [parse_fixed(s) for s in set_ or []]
        refuse_device_set([s.split("=", 1)[0] for s in sets], "--device" if device is not None else
                          "--gpus-per-run" if backend == "ray" and (gpus_per_run or 0) > 0 else None)
        clash = sorted(set(keys) & {s.split("=", 1)[0] for s in sets})
        if clash:
            raise ConfigError(f"--set and --search both give {', '.join(clash)}")
        ray_opts = check_backend(backend, address, None, None, cpus_per_run, gpus_per_run, max_retries)
        if ray_opts is not None and device is not None:
            raise ConfigError(
                f"--device {device}: on the Ray backend a run trains on a GPU when it gets one (--gpus-per-run > 0) "
                "and on the CPU otherwise; drop --device"
            )
        task = get_task_plugin(plugin)
        chosen = require_preset(task, preset, "tune")
        out_dir = (out or Path("tune") / f"{task.name}-{loss}").resolve()
        spec = tn.TuneSpec(task, loss, chosen, sets, params, list(range(1, seeds_per_trial + 1)), out_dir, device)
        spec.ray, spec.prune_on, spec.pruner = ray_opts, prune_on, pruner
        tn.import_optuna()
        url = storage or f"sqlite:///{out_dir / 'study.db'}"
        tn.check_storage(url if storage else "sqlite://")
        name = study or f"{task.name}-{loss}"
        check_existing(spec, url, name)  # a resumed study's setup first: it explains a preset's missing data
        spec.validate()
        if ray_opts is not None and address is None:  # the private local instance: start it now, check its size
            from contrastlab.experiments.ray_runner import connect_checked

            connect_checked(None, ray_opts["cpus_per_run"], ray_opts["gpus_per_run"])
        check_writable_dir(out_dir, "--out")
        out_dir.mkdir(parents=True, exist_ok=True)
        the_study = tn.open_study(spec, url, name, pruner)
        before = tn.finished(the_study)
        say(f"tune {task.name}/{loss}: preset {chosen}, study '{name}' in {url}: {before} of "
            f"{count(trials, 'trial')} finished; {task.primary_metric} ({spec.direction}), {seeds_per_trial} "
            f"seed(s) per trial, backend {backend}", stderr=True)
        note = tn.ray_pruning_note(spec)
        if note:
            say(note, stderr=True)
        gave_up = None
        term = TermState()
        try:
            with sigterm_as_interrupt() as term:  # `kill PID` stops the trials like Ctrl-C (exit 143, not 130)
                tn.optimize(the_study, spec, trials, parallel)
        except TooManyFailuresError as exc:
            gave_up = exc
        except KeyboardInterrupt:
            tn.write_best(the_study, spec)  # the best trial so far, for `compare --tuned`
            err_console.print("interrupted; run the same command again to resume the study", soft_wrap=True)
            raise typer.Exit(term.exit_code) from None
        finally:
            from contrastlab.experiments.tune_report import write_plots, write_tables

            write_tables(the_study, out_dir, task.primary_metric)
            write_plots(the_study, out_dir, task.primary_metric)
        best, top = tn.write_best(the_study, spec), tn.best_trial(the_study)  # read once for the lines below
        say((out_dir / "trials.md").read_text())
        for name_ in ("trials.csv", "trials.md", "history.png", "importance.png"):
            say(f"{name_:15s} {out_dir / name_}")
        if best is not None:
            say(f"{'best.yaml':15s} {best}")
            say(f"{'best.json':15s} {out_dir / 'best.json'}")
            print_commands(
                "Train the best config:", shell_command("platform", "train", "--plugin", task.name, "--config", best)
            )
        elif top is not None:  # its runs are on the machine of another worker of --storage
            say(f"{'best.json':15s} {out_dir / 'best.json'} (best.yaml: the best trial's runs are not on this "
                f"machine: {top.user_attrs.get('dir', '?')})")
        if gave_up is not None:
            raise gave_up
        if top is None:
            err_console.print("no trial completed; see trials.md and the logs under trials/", soft_wrap=True)
            raise typer.Exit(1)
