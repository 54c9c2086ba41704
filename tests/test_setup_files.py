"""The two-command setup: pins, Makefile targets, CI script, README quick start."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_constraints_pin_torch_and_mujoco() -> None:
    pins = ROOT.joinpath("constraints.txt").read_text()
    assert re.search(r"^torch==2\.13\.0$", pins, re.M)
    assert re.search(r"^mujoco==3\.17\.0$", pins, re.M)


def test_pyproject_keeps_open_ranges_and_scripts() -> None:
    text = ROOT.joinpath("pyproject.toml").read_text()
    assert '"torch>=2.3"' in text
    assert 'platform = "_contrastlab_cli:main"' in text
    assert 'contrastlab = "_contrastlab_cli:main"' in text
    assert 'py-modules = ["_contrastlab_cli"]' in text


def test_makefile_demo_and_test_use_setup_and_pins() -> None:
    make = ROOT.joinpath("Makefile").read_text()
    assert "demo: setup" in make and "platform train --plugin curl --loss pucl --preset smoke" in make
    assert "test: setup" in make and "pytest" in make
    assert "MUJOCO_GL ?= egl" in make
    setup = ROOT.joinpath("scripts", "setup.sh").read_text()
    assert "-c constraints.txt" in setup and "dataset-fashion-mnist" in setup and "apt-get update" in setup


def test_ci_runs_exactly_the_test_command() -> None:
    ci = ROOT.joinpath(".ci", "run").read_text()
    commands = [line for line in ci.splitlines() if line.strip() and not line.startswith("#")]
    assert commands[-1].strip() == "make test"


def test_readme_quick_start_has_the_two_commands() -> None:
    readme = ROOT.joinpath("README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", quick, re.S)
    commands = [line for block in blocks for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert commands == ["make demo", "make test"]


INTERRUPT_DURING_IMPORT = """
import sys
from importlib.metadata import entry_points

class CtrlCOnTorch:  # a Ctrl-C that lands while torch is importing, at the same point every time
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, CtrlCOnTorch())
sys.argv = ["platform", "--help"]
(script,) = [e for e in entry_points(group="console_scripts") if e.name == "platform"]
script.load()()
"""


def test_ctrl_c_while_the_console_script_imports_is_one_line_and_exit_130() -> None:
    """Importing contrastlab (torch) takes a second or two before the CLI handles Ctrl-C: the installed ``platform``
    script catches an interrupt in that time instead of printing a KeyboardInterrupt traceback."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", INTERRUPT_DURING_IMPORT], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "interrupted while starting (nothing was run)" and "Traceback" not in done.stderr


def test_the_fallback_command_of_the_runners_starts_the_cli(tmp_path, monkeypatch) -> None:
    """Where no ``platform`` script sits beside the interpreter (contrastlab used from source with PYTHONPATH=src, as
    on the GPU machine), compare and tune start their runs with ``python -c ...``: that command must run the CLI."""
    import os
    import subprocess
    import sys

    from contrastlab.experiments import runner

    real = sys.executable
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # a folder with no `platform` script
    base = runner.platform_base_command()
    assert base[0] == str(tmp_path / "python") and base[1] == "-c", base
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([real, *base[1:], "list", "plugins", "--json"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and '"name": "curl"' in done.stdout, done.stderr


FAKE_PYTHON_WITHOUT_VENV = """#!/usr/bin/env bash
# python3 on Debian/Ubuntu without python3-venv: `-m venv DIR` leaves DIR/bin/python behind, without pip, and fails
dir="${@: -1}"
mkdir -p "$dir/bin"
printf '#!/usr/bin/env bash\\necho "No module named pip" >&2\\nexit 1\\n' > "$dir/bin/python"
chmod +x "$dir/bin/python"
echo "The virtual environment was not created successfully because ensurepip is not available." >&2
exit 1
"""


def test_setup_remakes_a_venv_whose_creation_failed_half_way(tmp_path: Path) -> None:
    """The first `make setup` without python3-venv left .venv/bin/python without pip; once the user installed
    python3-venv, the next one skipped the venv (its python existed) and failed with "No module named pip". Now
    it adds pip to that venv (ensurepip), and says what to install while it cannot."""
    import subprocess

    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON_WITHOUT_VENV)
    fake.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(fake), "VENV": str(tmp_path / "venv")}
    for _ in range(2):  # the second run must not take the half-made venv for a made one
        done = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], env=env, capture_output=True, text=True)
        assert done.returncode != 0, done.stdout + done.stderr
        assert "installing contrastlab" not in done.stdout, done.stdout + done.stderr
        assert "(on Debian/Ubuntu: sudo apt-get install python3-venv)" in done.stderr, done.stderr
    assert "has no pip: adding it (python -m ensurepip)" in done.stdout, done.stdout
