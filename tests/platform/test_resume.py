"""Resume: a changed config is refused; the logs are cut back to the checkpoint (metrics.jsonl and the event
files), so a killed run, resumed, logs every step once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from test_runs import read_metrics, scalars

from contrastlab.platform.plugins import PluginManager
from contrastlab.testing import run_cli


def _events_per_file(run_dir: Path, tag: str) -> list[int]:
    """The steps of ``tag`` in every event file, file by file (no purge: what a plain event-file reader sees)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    steps: list[int] = []
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(path))
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            steps += [e.step for e in acc.Scalars(tag)]
    return steps


def _toy_run(tmp_path: Path):
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    plugin = get_task_plugin("toy_clusters")
    return Run.create(plugin, resolve_config(plugin, loss="dcl", sets=["train.steps=20"], device="cpu"), tmp_path)


def test_resume_drops_rows_logged_after_the_checkpoint_at_its_own_step(toy_pm: PluginManager, tmp_path: Path) -> None:
    """A final evaluation is logged at the final checkpoint's step, after it: killed before summary.json, the
    resumed run logs it again, and the first copy must go (it used to stay: a step-based cut keeps step == N)."""
    from contrastlab.platform.run import Run

    run = _toy_run(tmp_path)
    run.log({"train/loss": 1.0}, 20)
    run.save_checkpoint({}, 20, final=True)
    run.log({"eval/acc": 0.5}, 20)  # then killed before finish()
    run.writer.flush()
    resumed = Run.open(run.dir)
    resumed.log({"eval/acc": 0.5}, 20)
    resumed.finish({"eval/acc": 0.5})
    rows = read_metrics(run.dir)
    assert [(r["step"], sorted(k for k in r if "/" in k)) for r in rows] == [(20, ["train/loss"]), (20, ["eval/acc"])]
    assert [s for s, _ in scalars(run.dir, "eval/acc")] == [20]
    assert _events_per_file(run.dir, "eval/acc") == [20] and _events_per_file(run.dir, "train/loss") == [20]


def test_resume_cuts_the_event_files_back_to_the_checkpoint(toy_pm: PluginManager, tmp_path: Path) -> None:
    """SIGKILL after events past the checkpoint reached the disk: the event files hold each step once after
    the resume (not only in TensorBoard's purged view), and files started after the checkpoint are gone."""
    from contrastlab.platform.run import Run

    run = _toy_run(tmp_path)
    run.log({"train/loss": 1.0}, 5)
    run.save_checkpoint({}, 5)
    run.log({"train/loss": 2.0}, 10)
    run.writer.flush()
    first = Run.open(run.dir)  # a resume that dies after logging, before its first checkpoint
    first.log({"train/loss": 3.0}, 10)
    first.writer.flush()
    assert len(run.rundir.events()) == 2
    second = Run.open(run.dir)
    assert len(run.rundir.events()) == 1
    second.log({"train/loss": 4.0}, 10)
    second.finish({})
    # each step once over all files (files written in one second sort by a counter as text: ".10" before ".9")
    assert sorted(_events_per_file(run.dir, "train/loss")) == [5, 10]
    assert scalars(run.dir, "train/loss") == [(5, 1.0), (10, 4.0)]
    assert [(r["step"], r["train/loss"]) for r in read_metrics(run.dir)] == [(5, 1.0), (10, 4.0)]


def test_resume_before_any_checkpoint_starts_the_logs_afresh(toy_pm: PluginManager, tmp_path: Path) -> None:
    from contrastlab.platform.run import Run

    run = _toy_run(tmp_path)
    run.log({"eval/acc": 0.1}, 0)
    run.log({"train/loss": 1.0}, 5)
    run.writer.flush()
    resumed = Run.open(run.dir)
    assert read_metrics(run.dir) == [] and run.rundir.events() == []
    resumed.log({"eval/acc": 0.1}, 0)
    resumed.finish({})
    assert _events_per_file(run.dir, "eval/acc") == [0] and _events_per_file(run.dir, "train/loss") == []


def test_summary_write_failure_marks_the_run_failed(toy_pm: PluginManager, tmp_path: Path) -> None:
    """A full disk at the very end (summary.json) leaves a failed, resumable run, not one marked running."""
    run = _toy_run(tmp_path)
    run.save_checkpoint({}, 20, final=True)
    (run.dir / "summary.json.tmp").mkdir()  # the atomic write's temporary file cannot be created
    from contrastlab.platform.errors import StorageError

    with pytest.raises(StorageError, match=r"summary\.json"):
        run.finish({"eval/acc": 0.5})
    info = json.loads((run.dir / "run.json").read_text())
    assert info["status"] == "failed" and "summary.json" in info["error"]


def test_resume_refuses_a_changed_config(toy_pm: PluginManager, tmp_path: Path) -> None:
    """config.yaml edited after a checkpoint: refused in one line (no traceback from load_state_dict), nothing
    touched; a data location or the device may change."""
    from contrastlab.platform.errors import RunDirError
    from contrastlab.platform.run import Run

    run = _toy_run(tmp_path)
    run.log({"train/loss": 1.0}, 10)
    run.save_checkpoint({}, 10)
    run.log({"train/loss": 2.0}, 20)
    run.close()
    config = yaml.safe_load((run.dir / "config.yaml").read_text())
    edited = json.loads(json.dumps(config))
    edited["encoder"]["hidden_dim"] = 7
    edited["device"] = "auto"
    (run.dir / "config.yaml").write_text(yaml.safe_dump(edited))
    before = (run.dir / "metrics.jsonl").read_text()
    with pytest.raises(RunDirError) as info:
        Run.open(run.dir)
    message = str(info.value)
    assert "\n" not in message and "encoder.hidden_dim: 300 -> 7" in message and "device" not in message
    assert (run.dir / "metrics.jsonl").read_text() == before
    code, out = run_cli(["train", "--resume", str(run.dir)])
    assert code != 0 and "Traceback" not in out and "config.yaml changed" in out, out
    config["device"] = "auto"
    (run.dir / "config.yaml").write_text(yaml.safe_dump(config))
    Run.open(run.dir).close()  # the device may change


def test_resume_of_a_config_from_another_plugin_names_the_file(toy_pm: PluginManager, tmp_path: Path) -> None:
    run = _toy_run(tmp_path)
    run.close()
    (run.dir / "config.yaml").write_text(yaml.safe_dump({"seed": 1, "data": {"name": "synthetic"}}))
    code, out = run_cli(["train", "--resume", str(run.dir)])
    assert code != 0 and "Traceback" not in out, out
    assert "does not fit plugin 'toy_clusters'" in out and "config.yaml" in out



def test_checkpoint_without_a_recorded_position_keeps_the_rows_up_to_its_step(
    toy_pm: PluginManager, tmp_path: Path
) -> None:
    """A checkpoint saved before positions and configs were recorded resumes as before: rows up to its step."""
    from contrastlab.platform.run import Run

    run = _toy_run(tmp_path)
    run.log({"train/loss": 1.0}, 10)
    run.save_checkpoint({}, 10)
    run.log({"train/loss": 2.0}, 20)
    run.close()
    path = run.rundir.checkpoint(10)
    old = torch.load(path, weights_only=False)
    torch.save({k: v for k, v in old.items() if k not in ("_log_position", "_config")}, path)
    resumed = Run.open(run.dir)
    assert [r["step"] for r in read_metrics(run.dir)] == [10]
    resumed.log({"train/loss": 3.0}, 20)
    resumed.finish({})
    assert scalars(run.dir, "train/loss") == [(10, 1.0), (20, 3.0)]


def test_resume_refuses_a_run_another_process_is_training(run_left_running: Path) -> None:
    """New-user trial: `platform train --resume RUN` while RUN's own `platform train` was still going started a
    second process on the same directory: both wrote its checkpoints, metrics.jsonl and event files. The second is
    now refused with one line naming the other's pid, and nothing in the run is touched."""
    import fcntl

    run_dir = run_left_running
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    with open(run_dir / ".train.lock", "a+") as held:  # the other process's lock
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.truncate(0)
        held.write("4242")
        held.flush()
        code, out = run_cli(["train", "--resume", str(run_dir)])
        assert code == 2 and "Traceback" not in out and len(out.strip().splitlines()) == 1, out
        assert out.startswith(f"error: run {run_dir} is being trained by another process (pid 4242)"), out
    after = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".train.lock"}
    assert after == {p: b for p, b in before.items() if p.name != ".train.lock"}
    code, out = run_cli(["train", "--resume", str(run_dir)])  # the other process gone: resumes
    assert code == 0, out


def test_a_run_in_training_holds_its_lock(toy_pm: PluginManager, tmp_path: Path) -> None:
    """A new run holds the lock from its creation, so a `--resume` started meanwhile is refused; the lock goes with
    the end of the run."""
    import fcntl

    run = _toy_run(tmp_path)
    with open(run.dir / ".train.lock", "a+") as other:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        run.finish({"eval/acc": 0.5})
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released


SAVED = {"seed": 1, "device": "cpu", "keep_checkpoints": 2, "loss": {"name": "dcl", "tau_plus": 0.1},
         "data": {"root": "/data/a", "download": False, "n": 8}, "train": {"steps": 20, "lr": 0.1}}


def _refusal(saved, current) -> str | None:
    """check_same_config's one-line refusal, or ``None`` when the resume may go on."""
    from contrastlab.platform.errors import RunDirError
    from contrastlab.platform.resume import check_same_config
    from contrastlab.platform.rundir import RunDir

    try:
        check_same_config(RunDir("/runs/x"), 10, saved, current)
    except RunDirError as exc:
        return str(exc)
    return None


def _edited(**changes) -> dict:
    config = json.loads(json.dumps(SAVED))
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        section = config
        for key in parents:
            section = section[key]
        if value is None:
            del section[leaf]
        else:
            section[leaf] = value
    return config


def test_the_config_check_allows_the_device_the_checkpoints_kept_and_data_locations() -> None:
    assert _refusal(SAVED, _edited(device="cuda", keep_checkpoints=5, data__root="/mnt/b", data__download=True)) is None
    assert _refusal(None, _edited(seed=2)) is None and _refusal(SAVED, None) is None  # nothing recorded: no check
    assert _refusal(SAVED, json.loads(json.dumps(SAVED))) is None


def test_the_config_check_refuses_any_other_change_naming_the_first_three() -> None:
    assert _refusal(SAVED, _edited(seed=2)) == (
        "cannot resume /runs/x: its config.yaml changed since the checkpoint at step 10 was saved (seed: 1 -> 2); "
        "put it back, or start a new run with the new config")
    three = _refusal(SAVED, _edited(seed=2, train__lr=0.2, loss__tau_plus=None))
    assert "(loss.tau_plus: 0.1 -> '<unset>', seed: 1 -> 2, train.lr: 0.1 -> 0.2);" in three
    four = _refusal(SAVED, _edited(seed=2, train__lr=0.2, train__steps=30, data__n=4))
    assert "(data.n: 8 -> 4, seed: 1 -> 2, train.lr: 0.1 -> 0.2 (+1 more));" in four
    five = _refusal(SAVED, _edited(seed=2, train__lr=0.2, train__steps=30, data__n=4, loss__extra=1))
    assert "(data.n: 8 -> 4, loss.extra: '<unset>' -> 1, seed: 1 -> 2 (+2 more));" in five


def _metrics(tmp_path: Path, rows: list[dict], tail: str = ""):
    from contrastlab.platform.rundir import RunDir

    layout = RunDir(tmp_path)
    layout.metrics_jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    return layout


def test_rewind_without_a_recorded_position_keeps_the_rows_up_to_the_checkpoint_step(tmp_path: Path) -> None:
    from contrastlab.platform.resume import rewind_logs

    rows = [{"step": 0, "a": 1}, {"step": 10, "a": 2}, {"step": 11, "a": 3}, {"a": 4}]
    layout = _metrics(tmp_path, rows, tail='{"step": 12, "a"')  # a line cut by a crash
    kept, purge_step = rewind_logs(layout, 10, None)
    assert kept == [rows[0], rows[1], rows[3]] and purge_step == 11  # a row without a step counts as step 0
    assert layout.metrics_jsonl.read_text() == "".join(json.dumps(r) + "\n" for r in kept)
    kept, purge_step = rewind_logs(_metrics(tmp_path, rows), 0, None)
    assert kept == [rows[0], rows[3]] and purge_step == 1


def test_rewind_to_a_recorded_position_cuts_at_its_byte_and_without_a_checkpoint_empties(tmp_path: Path) -> None:
    from contrastlab.platform.resume import rewind_logs

    rows = [{"step": 5, "a": 1}, {"step": 5, "a": 2}]
    layout = _metrics(tmp_path, rows)
    first = len(json.dumps(rows[0]) + "\n")
    assert rewind_logs(layout, 5, {"metrics_bytes": first, "events": {}}) == ([rows[0]], None)
    assert layout.metrics_jsonl.read_text() == json.dumps(rows[0]) + "\n"
    assert rewind_logs(layout, None, {"metrics_bytes": first, "events": {}}) == ([], None)  # no checkpoint: all go
    assert layout.metrics_jsonl.read_text() == ""
