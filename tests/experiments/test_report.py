"""``platform report``'s run collection on damaged run records (from a bad-input sweep)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_results import write_run as write_run_record

from contrastlab.experiments.report import collect_runs


def write_run(root: Path, name: str, info: dict, summary: dict) -> Path:
    """A minimal finished run directory: config.yaml, run.json, summary.json."""
    run_dir = write_run_record(root / "runs" / "toy" / "dcl", name,
                               {"plugin": "toy", "preset": "smoke", "status": "completed", **info},
                               {"metrics": {"score": 0.5}, "primary_metric": "score", **summary})
    (run_dir / "config.yaml").write_text("seed: 1\n")
    return run_dir


@pytest.mark.parametrize(("info", "summary"), [
    ({"seed": [1]}, {}), ({"seed": "one"}, {}), ({"overrides": 5}, {}), ({}, {"metrics": "x"}),
    ({"plugin": 5}, {}), ({"plugin": ["toy"]}, {}),  # reported as a task named "5" (train/eval refuse it: no plugin)
])  # fmt: skip
def test_a_damaged_run_record_is_skipped_with_a_note(tmp_path: Path, info: dict, summary: dict) -> None:
    """A run.json ``seed`` that is no integer, or a summary.json ``metrics`` that is no mapping, ended
    ``platform report`` in a TypeError/ValueError/AttributeError traceback."""
    good = write_run(tmp_path, "good", {"seed": 2}, {})
    bad = write_run(tmp_path, "bad", info, summary)
    notes: list[str] = []
    records = collect_runs([tmp_path], notes.append)
    assert [r.run_dir for r in records] == [good]
    assert len(notes) == 1 and "skipped 1 folder(s)" in notes[0] and str(bad) in notes[0], notes


def _run_with_events(root: Path, name: str, seed: int, events: int = 1):
    from contrastlab.experiments.results import RunRecord

    run_dir = root / name
    run_dir.mkdir(parents=True)
    for i in range(events):
        (run_dir / f"events.out.tfevents.{i}.host").write_bytes(b"event %d" % i)
    return RunRecord(run_dir=run_dir, plugin="toy", loss="dcl", seed=seed, preset=None, overrides={},
                     status="completed")


@pytest.mark.parametrize("stale", ["folder", "file", "symlink"])
def test_tensorboard_logdir_links_each_seed_and_replaces_what_was_there(tmp_path: Path, stale: str) -> None:
    """``OUT/tensorboard/<row>/<column>/s<seed>`` is a relative link to each run with event files (runs without
    any get none), names are made path-safe, and whatever stood at the logdir before is replaced."""
    import os

    from contrastlab.experiments.report import link_tensorboard
    from contrastlab.experiments.results import Group

    runs = [_run_with_events(tmp_path / "runs", "a", 1), _run_with_events(tmp_path / "runs", "b", 2),
            _run_with_events(tmp_path / "runs", "c", 3, events=0)]
    logdir = tmp_path / "out" / "tensorboard"
    logdir.parent.mkdir()
    if stale == "folder":
        (logdir / "old" / "x").mkdir(parents=True)
    elif stale == "file":
        logdir.write_text("not a logdir")
    else:
        (tmp_path / "elsewhere").mkdir()
        logdir.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    groups = [Group(row="toy / env.task=swing up", column="dcl τ+=0.1", runs=runs[:2]),
              Group(row="///", column="dcl", runs=runs[2:])]
    assert link_tensorboard(groups, logdir) == logdir
    assert logdir.is_dir() and not logdir.is_symlink() and not (logdir / "old").exists()
    if stale == "symlink":  # the link is replaced, the folder it pointed to is left alone
        assert (tmp_path / "elsewhere").is_dir()
    links = sorted(p.relative_to(logdir).as_posix() for p in logdir.glob("*/*/*"))
    assert links == ["toy_env.task=swing_up/dcl_+=0.1/s1", "toy_env.task=swing_up/dcl_+=0.1/s2"]
    for seed, run in ((1, runs[0]), (2, runs[1])):
        link = logdir / "toy_env.task=swing_up" / "dcl_+=0.1" / f"s{seed}"
        assert link.is_symlink() and not os.path.isabs(os.readlink(link))
        assert link.resolve() == run.run_dir.resolve()


def test_tensorboard_logdir_copies_event_files_where_links_are_refused(tmp_path: Path, monkeypatch) -> None:
    from contrastlab.experiments.report import link_tensorboard
    from contrastlab.experiments.results import Group

    def refuse(self, *args, **kwargs):
        raise OSError("symlinks not allowed here")

    monkeypatch.setattr(Path, "symlink_to", refuse)
    run = _run_with_events(tmp_path / "runs", "a", 4, events=2)
    logdir = link_tensorboard([Group(row="", column="dcl", runs=[run])], tmp_path / "tb")
    copy = logdir / "run" / "dcl" / "s4"
    assert copy.is_dir() and not copy.is_symlink()
    assert sorted(p.name for p in copy.iterdir()) == ["events.out.tfevents.0.host", "events.out.tfevents.1.host"]
    assert (copy / "events.out.tfevents.1.host").read_bytes() == b"event 1"


@pytest.mark.parametrize("failed_first", [True, False])
def test_a_repeated_run_keeps_the_completed_one_whichever_is_found_first(tmp_path: Path, failed_first: bool) -> None:
    """The same (configuration, seed) in two folders counts once, and the completed record is the one kept."""
    completed = write_run(tmp_path / "a", "s1", {}, {})
    failed = write_run(tmp_path / "b", "s1-again", {"status": "failed", "error": "boom"}, {})
    homes = [tmp_path / "b", tmp_path / "a"] if failed_first else [tmp_path / "a", tmp_path / "b"]
    notes: list[str] = []
    (record,) = collect_runs(homes, notes.append)
    assert record.run_dir == completed and record.status == "completed"
    assert len(notes) == 1 and notes[0].startswith("1 run(s) repeat") and str(failed) in notes[0], notes
    assert str(completed) not in notes[0]


def test_of_two_completed_repeats_the_first_found_is_kept(tmp_path: Path) -> None:
    """"A repeat ... already found is not counted again": the later-found one is the repeat."""
    first = write_run(tmp_path / "a", "s1", {}, {})
    later = write_run(tmp_path / "b", "s1-again", {}, {})
    notes: list[str] = []
    (record,) = collect_runs([tmp_path / "a", tmp_path / "b"], notes.append)
    assert record.run_dir == first and len(notes) == 1 and str(later) in notes[0] and str(first) not in notes[0]


def test_row_keys_write_overrides_and_config_values_one_way(tmp_path: Path) -> None:
    """``--rows`` values read from an override and from config.yaml name the same row: ``true``, ``0.001``,
    ``null``, ``[10, 20]`` (flow style on one line), whichever way they were given."""
    from contrastlab.experiments.report import add_row_keys

    from_config = write_run(tmp_path, "from-config", {}, {})
    (from_config / "config.yaml").write_text(
        "seed: 1\neval: {linear: true, ks: [10, 20], note: null}\noptim: {lr: 0.001}\n")
    overridden = write_run(tmp_path, "overridden", {"seed": 2, "overrides": [
        "eval.linear=True", "eval.ks=[10,20]", "eval.note=null", "optim.lr=1e-3"]}, {})
    (overridden / "config.yaml").write_text("seed: 2\n")
    records = collect_runs([tmp_path])
    keys = ["eval.linear", "eval.ks", "eval.note", "optim.lr"]
    add_row_keys(records, keys)
    expected = {"eval.linear": "true", "eval.ks": "[10, 20]", "eval.note": "null", "optim.lr": "0.001"}
    for record in records:
        assert {k: record.overrides[k] for k in keys} == expected, record.run_dir
