"""`platform eval` of a run that did not finish says so before its numbers."""

from __future__ import annotations

import json
from pathlib import Path

from contrastlab.platform.plugins import PluginManager
from contrastlab.testing import run_cli


def test_eval_of_an_interrupted_run_says_the_model_is_partly_trained(toy_pm: PluginManager, tmp_path: Path) -> None:
    """An interrupted run stopped at step 1 of 120 was scored with only `(checkpoint at step 1)` to tell it from a
    trained model: its numbers read as the result of the run."""
    code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.steps=4",
                         "--logdir", str(tmp_path), "--run-name", "x"])
    assert code == 0, out
    run_dir = tmp_path / "toy_clusters" / "dcl" / "x"
    code, out = run_cli(["eval", str(run_dir)])
    assert code == 0 and "note:" not in out, out  # a completed run: no note
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "status": "interrupted", "progress": 0.25}))
    code, out = run_cli(["eval", str(run_dir)])
    assert code == 0, out
    text = " ".join(out.split())
    assert "note: this run has not completed (status interrupted, 25% done)" in text, out
    assert f"platform train --resume {run_dir}" in text, out


def test_eval_prints_the_run_paths_whole(toy_pm: PluginManager, tmp_path: Path) -> None:
    """New-user trial: the table's title was `eval <run dir>`, which rich wrapped to the table's width, cutting the
    path mid-name ("compare/recsys-9586aecf/runs/re" / "csys/hcl/base-df9030-s1"). Every line that shows a path
    shows it whole, and the path of the eval.json written is printed on its own line."""
    code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.steps=4",
                         "--logdir", str(tmp_path / ("long-logdir-name-" * 3)), "--run-name", "x"])
    assert code == 0, out
    run_dir = tmp_path / ("long-logdir-name-" * 3) / "toy_clusters" / "dcl" / "x"
    code, out = run_cli(["eval", str(run_dir)])
    assert code == 0, out
    assert f"eval.json: {run_dir / 'eval.json'}" in out.splitlines(), out
    for line in out.splitlines():
        if "long-logdir" in line:
            assert str(run_dir) in line, out


def test_eval_tells_a_killed_run_from_one_in_training(run_left_running: Path, held_by_another_process) -> None:
    """New-user trial: a run killed outright (SIGKILL) keeps status "running" in run.json, and `platform eval` said
    "status running" of it, as of a run still training. Its note now says which it is, from the run's lock."""
    run_dir = run_left_running
    code, out = run_cli(["eval", str(run_dir)])
    text = " ".join(out.split())
    assert code == 0 and "status running" not in text, out
    assert "no process is training it: killed?, 50% done" in text and f"platform train --resume {run_dir}" in text
    with held_by_another_process(run_dir):  # another process trains it
        code, out = run_cli(["eval", str(run_dir)])
    text = " ".join(out.split())
    assert code == 0 and "being trained now by another process (pid 4242), 50% done" in text, out
    assert "--resume" not in text, out


def test_eval_of_a_run_in_training_before_its_first_checkpoint_says_it_is_training(run_left_running: Path,
                                                                                   held_by_another_process) -> None:
    """New-user trial: before the first checkpoint, eval said only "has no checkpoint to evaluate", as of a run
    that saved none; once one existed it said the run was being trained now."""
    run_dir = run_left_running
    for checkpoint in (run_dir / "checkpoints").iterdir():
        checkpoint.unlink()
    code, out = run_cli(["eval", str(run_dir)])
    assert code == 2 and out.strip() == f"error: run {run_dir} has no checkpoint to evaluate", out
    with held_by_another_process(run_dir):  # another process trains it
        code, out = run_cli(["eval", str(run_dir)])
    assert code == 2 and " ".join(out.split()) == (f"error: run {run_dir} has no checkpoint to evaluate yet: it is "
                                                   "being trained now by another process (pid 4242)"), out
    assert not (run_dir / "eval.json").exists()
