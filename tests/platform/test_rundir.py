"""The run-directory layout lives in one module: paths, placing new runs, reading them, finding them."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from contrastlab.platform.errors import ConfigError, RunDirError, StorageError
from contrastlab.platform.rundir import RunDir, check_writable_dir, find_run_dirs

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


def test_new_run_path_places_runs_and_never_reuses_a_directory(tmp_path: Path) -> None:
    first = RunDir.new_run_path(tmp_path, "curl", "pucl", 3)
    assert first.path.parent == tmp_path / "curl" / "pucl" and first.path.name.endswith("-s3")
    assert not first.path.exists()  # placing creates nothing
    first.path.mkdir(parents=True)
    second = RunDir.new_run_path(tmp_path, "curl", "pucl", 3)
    assert second.path != first.path and second.path.name.startswith(first.path.name)
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
