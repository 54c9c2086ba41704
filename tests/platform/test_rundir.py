"""The run-directory layout lives in one module: paths, placing new runs, reading them, finding them."""

from __future__ import annotations

import ast
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import contrastlab.platform.rundir as rundir_module
from contrastlab.platform.errors import ConfigError, RunDirError, StorageError
from contrastlab.platform.rundir import (
    RunDir,
    check_writable_dir,
    find_run_dirs,
    first_missing,
    remove_created,
    strict_json,
)

ROOT = Path(__file__).resolve().parents[2]
LAYOUT_NAMES = {
    "run.json", "config.yaml", "metrics.jsonl", "summary.json", "eval.json", "error.log", "compare_error.txt",
    "checkpoints",
}  # fmt: skip


def test_paths() -> None:
    layout = RunDir("/r/curl/dcl/x-s1")
    assert layout.run_json == Path("/r/curl/dcl/x-s1/run.json")
    assert layout.config_yaml.name == "config.yaml" and layout.metrics_jsonl.name == "metrics.jsonl"
    assert layout.summary_json.name == "summary.json" and layout.eval_json.name == "eval.json"
    assert layout.checkpoint(1600) == Path("/r/curl/dcl/x-s1/checkpoints/step_000000001600.pt")
    assert layout.checkpoint_latest_part(1600).name == "step_000000001600.latest.pt"
    assert layout.error_log == Path("/r/curl/dcl/x-s1/error.log")
    assert layout.compare_error == Path("/r/curl/dcl/x-s1/compare_error.txt")
    assert layout.train_lock == Path("/r/curl/dcl/x-s1/.train.lock")


class _FixedClock(datetime):
    """``datetime.now()`` stuck at one second: two runs placed in the same second."""

    @classmethod
    def now(cls, tz: Any = None) -> datetime:
        return datetime(2026, 1, 2, 3, 4, 5, tzinfo=tz)


def test_new_run_path_places_runs_and_never_reuses_a_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(rundir_module, "datetime", _FixedClock)
    first = RunDir.new_run_path(tmp_path, "curl", "pucl", 3)
    assert first.path == tmp_path / "curl" / "pucl" / "20260102-030405-s3"
    assert not first.path.exists()  # placing creates nothing
    first.path.mkdir(parents=True)
    second = RunDir.new_run_path(tmp_path, "curl", "pucl", 3)
    assert second.path == first.path.with_name(f"{first.path.name}-2")  # -2, -3...: documented names
    second.path.mkdir()
    assert RunDir.new_run_path(tmp_path, "curl", "pucl", 3).path == first.path.with_name(f"{first.path.name}-3")
    named = RunDir.new_run_path(tmp_path, "curl", "pucl", 3, "mine")
    assert named.path == tmp_path / "curl" / "pucl" / "mine"
    (named.path / "sub").mkdir(parents=True)
    with pytest.raises(RunDirError, match="--resume"):
        RunDir.new_run_path(tmp_path, "curl", "pucl", 3, "mine")
    with pytest.raises(ConfigError, match="plain directory name"):
        RunDir.new_run_path(tmp_path, "curl", "pucl", 3, "a/b")


def test_read_info_and_checkpoint_listing(tmp_path: Path) -> None:
    layout = RunDir(tmp_path / "run")
    with pytest.raises(RunDirError, match="not found"):
        layout.read_info()
    layout.path.mkdir()
    with pytest.raises(RunDirError, match="not a run directory"):
        layout.read_info()
    layout.config_yaml.write_text("seed: 1\n")
    layout.run_json.write_text(json.dumps({"plugin": "toy"}))
    assert RunDir.is_run(layout.path) and layout.read_info() == {"plugin": "toy"}
    with pytest.raises(RunDirError, match=rf"run.json is a file; give its run directory, {layout.path}$"):
        RunDir(layout.run_json).read_info()  # `--resume RUN/run.json` said "run directory not found"
    layout.checkpoints.mkdir()
    for name in ("step_000000000020.pt", "step_000000000010.pt", "step_000000000030.pt.tmp",
                 "step_000000000020.latest.pt", "notes.txt"):
        (layout.checkpoints / name).write_bytes(b"x")
    assert [s for s, _ in layout.checkpoint_steps()] == [10, 20]
    checkpoint = layout.checkpoints / "step_000000000020.pt"  # `platform eval RUN/checkpoints/step_….pt`
    with pytest.raises(RunDirError, match=rf"step_000000000020.pt is a file; give its run directory, {layout.path}$"):
        RunDir(checkpoint).read_info()  # it named RUN/checkpoints, itself refused as "not a run directory"
    (tmp_path / "notes.txt").write_text("x")  # a file in no run directory: no folder to suggest
    with pytest.raises(RunDirError, match=r"notes.txt is a file; give a run directory of platform train$"):
        RunDir(tmp_path / "notes.txt").read_info()
    assert [s for s, _ in layout.latest_parts()] == [20]


def test_find_run_dirs_skips_checkpoint_folders(tmp_path: Path) -> None:
    for name in ("a", "b"):
        RunDir(tmp_path / "curl" / "dcl" / name).path.mkdir(parents=True)
        RunDir(tmp_path / "curl" / "dcl" / name).run_json.write_text("{}")
    (tmp_path / "curl" / "dcl" / "a" / "checkpoints" / "x").mkdir(parents=True)
    (tmp_path / "curl" / "dcl" / "a" / "checkpoints" / "x" / "run.json").write_text("{}")
    assert sorted(p.name for p in find_run_dirs([tmp_path])) == ["a", "b"]


def _layout_literals(path: Path) -> list[str]:
    """String constants in ``path`` that name a run-directory file (docstrings excluded)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            value = node.value
            if value in LAYOUT_NAMES or "tfevents" in value or value.startswith("step_"):
                found.append(value)
    return found


def test_no_other_module_knows_the_layout() -> None:
    offenders = {}
    for folder in ("src", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "rundir.py":
                continue
            found = _layout_literals(path)
            if found:
                offenders[str(path.relative_to(ROOT))] = found
    assert not offenders, f"use contrastlab.platform.rundir.RunDir instead of file names: {offenders}"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_place_where_nothing_can_be_created_is_refused_even_for_root(tmp_path: Path) -> None:
    """os.access says "writable" to root for /proc (and read-only mounts); the check tries to create a directory."""
    with pytest.raises(StorageError, match=r"^--out /proc/contrastlab-nope: cannot create anything in /proc"):
        check_writable_dir("/proc/contrastlab-nope", "--out")
    before = tmp_path.stat().st_mtime_ns
    check_writable_dir(tmp_path / "new" / "dir", "--out")
    assert list(tmp_path.iterdir()) == [] and tmp_path.stat().st_mtime_ns == before  # the probe leaves no trace


def test_claim_takes_the_next_name_when_another_process_made_the_chosen_one(tmp_path: Path) -> None:
    """Two `platform train` started in one second with one seed both chose `<time>-s<seed>`: the second wrote its
    config.yaml and run.json into the first's directory (mkdir with exist_ok). Claiming is atomic now."""
    chosen = RunDir.new_run_path(tmp_path, "toy", "dcl", 1)
    chosen.path.parent.mkdir(parents=True)
    chosen.path.mkdir()  # the other process, between the choice and the creation
    (chosen.path / "run.json").write_text("{}")
    claimed = RunDir(chosen.path).claim()
    assert claimed.path.name == f"{chosen.path.name}-2" and claimed.path.is_dir() and not any(claimed.path.iterdir())
    assert RunDir(chosen.path).claim().path.name == f"{chosen.path.name}-3"
    assert (chosen.path / "run.json").read_text() == "{}"
    numbered = RunDir(chosen.path.with_name(f"{chosen.path.name}-4"))  # what new_run_path chooses next
    numbered.path.mkdir()  # taken meanwhile too
    assert numbered.claim().path.name == f"{chosen.path.name}-5"  # not -4-2


@pytest.mark.parametrize("info", [{"status": "running"}, {"plugin": None}, {"plugin": 5}, {"plugin": ""}])
def test_a_run_json_that_names_no_plugin_is_one_line(tmp_path: Path, info: dict) -> None:
    """From a bad-input sweep: ``--resume``/``eval`` of a run whose run.json lacked ``plugin`` printed
    ``KeyError: 'plugin'`` with a traceback."""
    layout = RunDir(tmp_path / "run")
    layout.path.mkdir()
    layout.config_yaml.write_text("seed: 1\n")
    layout.run_json.write_text(json.dumps(info))
    with pytest.raises(RunDirError, match=r"run.json names no plugin \(its 'plugin' entry\)$"):
        layout.read_info()


@pytest.mark.parametrize(("value", "expected"), [
    (0, 0.0), (1, 1.0), (0.25, 0.25), (1.0, 1.0), (-0.1, 0.0), (1.5, 0.0), ("0.5", 0.0), (None, 0.0),
    (True, 0.0), (False, 0.0),
])  # fmt: skip
def test_progress_is_the_recorded_share_between_0_and_1_else_0(tmp_path: Path, value: object, expected: float) -> None:
    """compare's ETA reads ``progress``: the ends 0 and 1 count, anything outside or not a number is "unknown" (0).
    JSON ``true``/``false`` are no share of the run (Python's bool is an int: ``true`` read as 1.0 before)."""
    layout = RunDir(tmp_path)
    assert layout.progress() == 0.0  # no run.json
    layout.run_json.write_text(json.dumps({"progress": value}))
    assert layout.progress() == expected


def test_strict_json_writes_nan_and_inf_as_null_at_any_depth() -> None:
    data = {"a": float("nan"), "b": [1.5, float("inf"), (float("-inf"), 2)], "c": {"d": {"e": float("nan")}},
            "f": Path("/x"), "g": 3}
    text = strict_json(data)
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": {"e": None}}, "f": "/x", "g": 3}


def test_rewind_logs_cuts_back_to_the_saved_position(tmp_path: Path) -> None:
    """What a resume relies on: rows and events logged after the checkpoint are dropped, earlier ones kept."""
    layout = RunDir(tmp_path)
    assert layout.log_position() == {"metrics_bytes": 0, "events": {}}  # nothing logged yet
    layout.metrics_jsonl.write_text('{"step": 1}\n')
    old = tmp_path / "events.out.tfevents.1.host"
    old.write_bytes(b"0123")
    short = tmp_path / "events.out.tfevents.2.host"
    short.write_bytes(b"01")
    position = layout.log_position()
    assert position == {"metrics_bytes": 12, "events": {old.name: 4, short.name: 2}}
    with layout.metrics_jsonl.open("a") as f:
        f.write('{"step": 2}\n')
    old.write_bytes(b"0123456")
    short.write_bytes(b"0")  # already shorter than saved: left as it is
    new = tmp_path / "events.out.tfevents.3.host"
    new.write_bytes(b"later")
    layout.rewind_logs(position)
    assert layout.metrics_jsonl.read_text() == '{"step": 1}\n'
    assert old.read_bytes() == b"0123" and short.read_bytes() == b"0" and not new.exists()
    layout.rewind_logs(position)  # exactly at the position: nothing changes
    assert layout.metrics_jsonl.read_text() == '{"step": 1}\n' and old.read_bytes() == b"0123"
    layout.metrics_jsonl.write_text("{}\n")  # shorter than the position (3 bytes < 12): left as it is
    layout.rewind_logs(position)
    assert layout.metrics_jsonl.read_text() == "{}\n"
    layout.rewind_logs({})  # a checkpoint from before any logging: everything goes
    assert layout.metrics_jsonl.read_text() == "" and layout.events() == []
    layout.metrics_jsonl.unlink()
    layout.rewind_logs(position)  # no metrics.jsonl (yet): nothing to cut, and no error
    assert not layout.metrics_jsonl.exists()


def test_find_run_dirs_takes_a_run_itself_and_refuses_a_missing_folder(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "p" / "l" / "r")
    run.path.mkdir(parents=True)
    run.run_json.write_text("{}")
    nested = RunDir(run.path / "sub")  # inside a run: not a run of its own
    nested.path.mkdir()
    nested.run_json.write_text("{}")
    assert find_run_dirs([run.path]) == [run.path]
    assert find_run_dirs([tmp_path, run.path]) == [run.path]  # found twice, listed once
    with pytest.raises(RunDirError, match="not a directory"):
        find_run_dirs([tmp_path / "missing"])


@pytest.mark.parametrize("name", ["", ".", "..", "a\\b", "a/b"])
def test_a_run_name_that_is_no_plain_directory_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="plain directory name"):
        RunDir.new_run_path(tmp_path, "curl", "pucl", 3, name)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_run_name_folder_is_taken_and_a_completed_run_is_not_resumable(tmp_path: Path) -> None:
    named = RunDir.location(tmp_path, "curl", "pucl", "mine")
    named.path.mkdir(parents=True)  # the user made it, empty
    assert RunDir.new_run_path(tmp_path, "curl", "pucl", 3, "mine").path == named.path
    assert not named.make_named()  # it was there already: not this start's to remove
    named.config_yaml.write_text("seed: 3\n")
    named.run_json.write_text(json.dumps({"plugin": "curl", "status": "completed"}))
    with pytest.raises(RunDirError, match="already holds a completed run"):
        RunDir.new_run_path(tmp_path, "curl", "pucl", 3, "mine")
    assert RunDir.new_run_path(tmp_path, "curl", "pucl", 3, "mine", existing_ok=True).path == named.path
    fresh = RunDir.location(tmp_path, "curl", "pucl", "fresh")
    assert fresh.make_named() and fresh.path.is_dir()


def test_a_run_needs_both_files_and_summary_reads_summary_json(tmp_path: Path) -> None:
    """``run.json`` alone is the placeholder of a run that failed to start: a record, not a run."""
    layout = RunDir(tmp_path)
    layout.run_json.write_text("{}")
    assert RunDir.has_record(tmp_path) and not RunDir.is_run(tmp_path)
    layout.run_json.unlink()
    layout.config_yaml.write_text("seed: 1\n")
    assert not RunDir.has_record(tmp_path) and not RunDir.is_run(tmp_path)
    assert layout.summary() == {} and layout.info() == {}
    layout.summary_json.write_text(json.dumps({"metrics": {"acc": 0.5}}))
    assert layout.summary() == {"metrics": {"acc": 0.5}}
    layout.summary_json.write_text("[1, 2]")  # not an object
    assert layout.summary() == {}


def test_write_start_removes_a_part_written_run_json(tmp_path: Path, monkeypatch) -> None:
    """A disk that fills up in the middle of run.json leaves a part of the file; the start removes it with the
    config.yaml it made, so the user's empty --run-name folder stays empty."""
    import errno

    layout = RunDir(tmp_path)
    write_text = Path.write_text

    def full_disk_midway(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        if self.name == "run.json":
            write_text(self, text[:5])
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return write_text(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk_midway)
    with pytest.raises(OSError, match="No space left"):
        layout.write_start("seed: 1\n", '{"plugin": "toy"}')
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    layout.config_yaml.write_text("seed: 1\n")  # another start made it meanwhile
    with pytest.raises(ConfigError, match="just started by another platform train"):
        layout.write_start("seed: 2\n", "{}")
    assert layout.config_yaml.read_text() == "seed: 1\n" and not layout.run_json.exists()


def test_first_missing_and_the_clean_up_stop_at_what_existed(tmp_path: Path) -> None:
    """A failed start removes only the folders it made: an empty folder of the user's above them stays."""
    users = tmp_path / "empty"  # the user's own, empty
    users.mkdir()
    run_dir = users / "runs" / "toy" / "dcl" / "r"
    assert first_missing(users) is None and first_missing(tmp_path) is None
    made = first_missing(run_dir.parent)
    assert made == users / "runs"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text("{}")
    remove_created(run_dir, True, made)
    assert users.is_dir() and list(users.iterdir()) == []
