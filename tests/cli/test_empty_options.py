"""An option given as an empty string (``--device "$UNSET"``) is a usage error, as an empty ``--plugin`` is.

These options used to read ``""`` as "left out" and go on with the default (a run on the GPU when the user meant
to name a device, a report with the recorded rows), while ``--plugin ""`` and ``--preset ""`` were refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrastlab.testing import run_cli


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["train", "--plugin", "curl", "--loss", "pucl", "--preset", "smoke", "--device", ""], "--device"),
        (["eval", "RUN", "--device", " "], "--device"),
        (["report", "RUN", "--rows", ""], "--rows"),
        (["report", "RUN", "--curve", ""], "--curve"),
        (["report", "RUN", "--baseline", ""], "--baseline"),
        (["compare", "--plugin", "recsys", "--loss", "dcl", "--preset", "smoke", "--dry-run", "--rows", ""],
         "--rows"),
        (["compare", "--plugin", "recsys", "--loss", "dcl", "--backend", "ray", "--address", ""], "--address"),
        (["tune", "--plugin", "recsys", "--loss", "dcl", "--preset", "smoke", "--study", ""], "--study"),
        (["tune", "--plugin", "recsys", "--loss", "dcl", "--preset", "smoke", "--storage", ""], "--storage"),
        (["tune", "--plugin", "recsys", "--loss", "dcl", "--preset", "smoke", "--prune-on", ""], "--prune-on"),
        (["tune", "--plugin", "recsys", "--loss", "dcl", "--preset", "smoke", "--device", ""], "--device"),
    ],
)
def test_an_empty_option_is_refused_in_one_line_before_anything_runs(
    args: list[str], option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # anything written by mistake would land here
    (tmp_path / "RUN").mkdir()
    code, out = run_cli(args)
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert code == 2 and "Traceback" not in out, out
    assert len(errors) == 1 and f"'{option}': empty" in errors[0], out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["RUN"] and not any((tmp_path / "RUN").iterdir())


def test_a_value_with_content_still_passes() -> None:
    """The check refuses only blank values: a named device reaches the device check (an unknown one, its error)."""
    code, out = run_cli(["train", "--plugin", "curl", "--loss", "pucl", "--preset", "smoke", "--device", "tpu"])
    assert code != 0 and "unknown device 'tpu'" in out, out
