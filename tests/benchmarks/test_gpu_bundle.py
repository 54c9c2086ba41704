"""``benchmarks/gpu_bundle.py`` and ``benchmarks/gpu_device.sh``: the bundle that lets the GPU suite run on a lent
machine without a package index (docs/gpu.md). Downloads are not exercised here (no index in CI); the unpacking,
pruning, packing and the device-side wrapper are."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEVICE_SH = ROOT / "benchmarks" / "gpu_device.sh"


def fake_wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def test_unpack_lays_wheels_out_as_installed_and_prunes_what_the_suite_never_imports(tmp_path: Path,
                                                                                     load_benchmark) -> None:
    bundle = load_benchmark("gpu_bundle")
    wheels = [
        fake_wheel(tmp_path / "a-1.0-py3-none-any.whl", {
            "a/__init__.py": "VALUE = 1\n", "a/tests/test_a.py": "", "a/__pycache__/x.pyc": "",
            "a-1.0.dist-info/METADATA": "Name: a\n", "a-1.0.data/purelib/a_extra.py": "EXTRA = 2\n",
            "a-1.0.data/platlib/a/_native.py": "NATIVE = 3\n"}),
        fake_wheel(tmp_path / "dm_control-1.0-py3-none-any.whl", {
            "dm_control/suite/__init__.py": "", "dm_control/locomotion/big.xml": "x" * 1000}),
    ]
    site = tmp_path / "site"
    size = bundle.unpack(wheels, site, prune=("dm_control/locomotion",))
    assert (site / "a" / "__init__.py").read_text() == "VALUE = 1\n"
    assert (site / "a_extra.py").read_text() == "EXTRA = 2\n"  # a .data/purelib file lands at the top level
    assert (site / "a" / "_native.py").read_text() == "NATIVE = 3\n"  # merged into the existing package
    assert (site / "dm_control" / "suite" / "__init__.py").is_file()
    for gone in ("a/tests", "a/__pycache__", "a-1.0.data", "dm_control/locomotion"):
        assert not (site / gone).exists(), gone
    assert size == sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    archive = tmp_path / "site.tar.xz"
    assert bundle.pack(site, archive) == archive.stat().st_size
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {"a/__init__.py", "a_extra.py", "dm_control/suite/__init__.py"} <= names
    assert not any(name.startswith("site") or "locomotion" in name for name in names)


def test_packages_are_pinned_to_the_versions_installed_here(load_benchmark) -> None:
    bundle = load_benchmark("gpu_bundle")
    assert bundle.pinned("pluggy") == f"pluggy=={importlib.metadata.version('pluggy')}"
    for dist in ("stable-baselines3", "dm-control", "mujoco", "pydantic", "gymnasium"):
        assert dist in bundle.PACKAGES  # what the device image lacks (docs/gpu.md)
        importlib.metadata.version(dist)  # and installed here, so it can be pinned


def make_bundle(folder: Path, python_version: str) -> Path:
    site = folder / "src-site"
    site.mkdir(parents=True)
    (site / "bundle_marker.py").write_text("MARK = 'from the bundle'\n")
    with tarfile.open(folder / "site.tar.xz", "w:xz") as tar:
        tar.add(site / "bundle_marker.py", arcname="bundle_marker.py")
    (folder / "site.python").write_text(python_version + "\n")
    return folder


def run_device(tmp_path: Path, bundle: Path, *args: str, python: Path | None = None, **env_extra: str
               ) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    env = {**os.environ, "BUNDLE": str(bundle), "SITE": str(tmp_path / "site"), "PYTHON": str(python or sys.executable),
           "OUT": str(out), "OMP_NUM_THREADS": "1", "PYTHONPATH": "", **env_extra}
    return subprocess.run(["bash", str(DEVICE_SH), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_device_wrapper_help_shows_its_own_and_the_suites_options(tmp_path: Path) -> None:
    proc = run_device(tmp_path, tmp_path / "nowhere", "--help")  # no bundle needed for --help
    assert proc.returncode == 0 and "GPU_DEVICE_TIMEOUT" in proc.stdout and "--pack-ks" in proc.stdout


def test_device_wrapper_refuses_a_missing_bundle_and_one_built_for_another_python(tmp_path: Path) -> None:
    missing = run_device(tmp_path, tmp_path / "nowhere", "--dry-run", "--steps", "report")
    assert missing.returncode == 2 and "gpu_bundle.py" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    wrong = run_device(tmp_path, make_bundle(tmp_path / "old", "2.7"), "--dry-run", "--steps", "report")
    assert wrong.returncode != 0 and "rebuild it with --python-version" in wrong.stderr
    assert not (tmp_path / "site").exists()  # refused before unpacking: a rebuilt bundle is not shadowed
    assert not (tmp_path / "out" / "gpu-suite.tgz").exists()  # nothing ran


def test_bundle_script_refuses_a_missing_reference_agent_before_downloading(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_bundle.py"), "--out", str(tmp_path / "b"),
                           "--reference-dir", str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--no-reference" in proc.stderr
    assert not (tmp_path / "b").exists()


def test_copy_writable_replaces_a_read_only_copy(tmp_path: Path, load_benchmark) -> None:
    bundle = load_benchmark("gpu_bundle")
    src = tmp_path / "ref"
    src.mkdir()
    (src / "curl_sac.py").write_text("A = 1\n")
    (src / "curl_sac.py").chmod(0o444)
    src.chmod(0o555)
    try:
        for _ in range(2):  # the second copy replaces the first
            bundle.copy_writable(src, tmp_path / "copy")
        assert (tmp_path / "copy" / "curl_sac.py").read_text() == "A = 1\n"
        assert all(p.stat().st_mode & 0o200 for p in [tmp_path / "copy", *(tmp_path / "copy").rglob("*")])
    finally:
        src.chmod(0o755)


def test_device_wrapper_stops_the_suite_at_its_time_limit_and_still_returns_its_output(tmp_path: Path) -> None:
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    bundle = make_bundle(tmp_path / "bundle", here)
    proc = run_device(tmp_path, bundle, "--dry-run", "--steps", "tests", "--out", str(tmp_path / "gs"),
                      GPU_DEVICE_TIMEOUT="2")
    assert proc.returncode == 124, proc.stdout[-1000:] + proc.stderr[-1000:]
    assert "stopping the suite after the time limit" in proc.stderr
    assert (tmp_path / "out" / "gpu-suite.tgz").is_file()  # what the suite wrote before the stop comes back


def test_a_call_stopped_at_its_time_limit_still_brings_back_its_report(tmp_path: Path) -> None:
    """``--steps tests,losses,report`` (docs/gpu.md, call 4) stopped in its first step: the report is made from what
    the earlier calls and the stopped step left, and returned with the archive."""
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    bundle = make_bundle(tmp_path / "bundle", here)
    suite = tmp_path / "gs"
    suite.mkdir()
    (suite / "pack.log").write_text("K=1 runs: 60 s wall, 300 env frames/s in total, 0 failed\n")  # an earlier call
    proc = run_device(tmp_path, bundle, "--dry-run", "--steps", "tests,losses,report", "--out", str(suite),
                      GPU_DEVICE_TIMEOUT="2")
    assert proc.returncode == 124, proc.stdout[-1000:] + proc.stderr[-1000:]
    assert "the report of what the suite wrote before the stop" in proc.stderr
    assert "| 1 | 60 | 300 |" in (tmp_path / "out" / "results.md").read_text()
    assert (suite / "steps" / "report.txt").read_text().startswith("0 ")  # made after the stop
    assert not (suite / "steps" / "losses.txt").exists()  # never reached


def test_device_wrapper_unpacks_a_rebuilt_bundle_again(tmp_path: Path) -> None:
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    bundle = make_bundle(tmp_path / "bundle", here)
    assert run_device(tmp_path, bundle, "--dry-run", "--steps", "report", "--out", str(tmp_path / "gs")
                      ).returncode == 0
    assert "<!-- gpu-suite:begin -->" in (tmp_path / "out" / "results.md").read_text()  # the report comes back
    (tmp_path / "site" / "stale.py").write_text("")
    rebuilt = tmp_path / "bundle2"
    rebuilt.mkdir()
    with tarfile.open(rebuilt / "site.tar.xz", "w:xz") as tar:
        new = tmp_path / "new_marker.py"
        new.write_text("")
        tar.add(new, arcname="new_marker.py")
    (rebuilt / "site.python").write_text(here + "\n")
    assert run_device(tmp_path, rebuilt, "--dry-run", "--steps", "report", "--out", str(tmp_path / "gs")
                      ).returncode == 0
    assert (tmp_path / "site" / "new_marker.py").is_file() and not (tmp_path / "site" / "stale.py").exists()


@pytest.mark.slow
def test_device_wrapper_puts_the_bundle_on_the_path_and_returns_the_suite_output(tmp_path: Path) -> None:
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    bundle = make_bundle(tmp_path / "bundle", here)
    seen = tmp_path / "pythonpath.txt"
    python = tmp_path / "python.sh"  # records the PYTHONPATH the suite's processes get, then runs Python
    python.write_text(f'#!/usr/bin/env bash\necho "$PYTHONPATH" >> "{seen}"\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    suite_out = tmp_path / "gs"
    proc = run_device(tmp_path, bundle, "--dry-run", "--steps", "tests", "--out", str(suite_out), python=python)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (tmp_path / "site" / "bundle_marker.py").is_file()  # unpacked into SITE
    assert f"python {here} (bundle built for {here})" in proc.stdout
    paths = seen.read_text().split()
    assert paths and all(p.split(":")[:2] == [str(tmp_path / "site"), str(ROOT / "src")] for p in paths)
    assert (suite_out / "tests.rc").read_text().strip() == "0"
    returned = {p.name for p in (tmp_path / "out").iterdir()}
    assert "gpu-suite.tgz" in returned and "results.md" not in returned  # no report step, no results.md
    with tarfile.open(tmp_path / "out" / "gpu-suite.tgz") as tar:
        assert any(name.endswith("tests.log") for name in tar.getnames())


def test_build_replaces_an_earlier_bundle_and_leaves_nothing_when_it_fails(tmp_path: Path, monkeypatch,
                                                                           load_benchmark) -> None:
    bundle = load_benchmark("gpu_bundle")
    out, ref = tmp_path / "device", tmp_path / "ref"
    ref.mkdir()
    (ref / "curl_sac.py").write_text("A = 1\n")
    (out / "gl").mkdir(parents=True)
    (out / "gl" / "old.deb").write_text("")  # from an earlier build with --gl
    (out / "site.python").write_text("3.9\n")

    def fake_download(requirements: list[str], dest: Path, python_version: str) -> list[Path]:
        dest.mkdir(parents=True)
        return [fake_wheel(dest / "a-1.0-py3-none-any.whl", {"a/__init__.py": ""})]

    monkeypatch.setattr(bundle, "download", fake_download)
    bundle.build(out, "3.12", ref, gl=False)
    assert sorted(p.name for p in out.iterdir()) == ["curl_reference", "site.python", "site.tar.xz"]
    assert (out / "site.python").read_text() == "3.12\n"
    with tarfile.open(out / "site.tar.xz") as tar:
        assert "a/__init__.py" in tar.getnames()

    def failing_download(requirements: list[str], dest: Path, python_version: str) -> list[Path]:
        raise RuntimeError("no index")

    monkeypatch.setattr(bundle, "download", failing_download)
    with pytest.raises(RuntimeError, match="no index"):
        bundle.build(out, "3.12", ref, gl=False)
    assert list(out.iterdir()) == []  # no half bundle, no earlier bundle, no build folder to carry


def fake_tools(folder: Path, calls: Path) -> Path:
    """``ldconfig`` (``-p`` lists the libraries named in ``$FAKE_LIBS``) and ``dpkg`` that record their calls."""
    folder.mkdir()
    (folder / "ldconfig").write_text(
        '#!/usr/bin/env bash\nif [ "$1" = -p ]; then for lib in $FAKE_LIBS; do\n'
        '  printf "\\t%s (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/%s\\n" "$lib" "$lib"; done; exit 0; fi\n'
        f'echo "ldconfig $*" >> "{calls}"\n')
    (folder / "dpkg").write_text(f'#!/usr/bin/env bash\necho "dpkg $*" >> "{calls}"\n')
    for tool in ("ldconfig", "dpkg"):
        (folder / tool).chmod(0o755)
    return folder


def test_device_wrapper_installs_the_gl_loaders_when_any_of_them_is_missing(tmp_path: Path) -> None:
    """An image with libEGL but without libOpenGL (PyOpenGL's GL library for EGL) still gets the loaders."""
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    bundle = make_bundle(tmp_path / "bundle", here)
    (bundle / "gl").mkdir()
    (bundle / "gl" / "libopengl0_1.6.0-1_amd64.deb").write_text("")
    calls = tmp_path / "calls.txt"
    path = f"{fake_tools(tmp_path / 'bin', calls)}:{os.environ['PATH']}"
    for libs, installed in (("libEGL.so.1", True), ("libEGL.so.1 libOpenGL.so.0 libGLdispatch.so.0", False)):
        calls.write_text("")
        proc = run_device(tmp_path, bundle, "--dry-run", "--steps", "report", "--out", str(tmp_path / "gs"),
                          PATH=path, FAKE_LIBS=libs)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert ("dpkg -x" in calls.read_text()) == installed, libs
        assert ("missing here: libOpenGL.so.0 libGLdispatch.so.0" in proc.stdout) == installed


def test_device_wrapper_says_in_one_line_whether_rendering_works(tmp_path: Path) -> None:
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    bundle = make_bundle(tmp_path / "bundle", here)
    args = ("--dry-run", "--steps", "runs", "--frames", "40", "--seeds", "1", "--losses", "nosuchloss",
            "--out", str(tmp_path / "gs"))  # a step that renders, failing at once (nothing trains)
    works = run_device(tmp_path, bundle, *args)
    assert "gpu_device.sh: rendering works (MUJOCO_GL=egl, one frame in" in works.stdout, works.stderr[-2000:]
    broken = run_device(tmp_path, bundle, *args, MUJOCO_GL="nosuchgl")
    (line,) = [ln for ln in broken.stderr.splitlines() if "rendering" in ln]
    assert line.startswith("gpu_device.sh: rendering FAILED: ") and "nosuchgl" in line
    assert "Traceback" not in broken.stderr.split("gpu_device.sh: rendering")[0]  # one line, no traceback first
    no_render = run_device(tmp_path, bundle, "--dry-run", "--steps", "report", "--out", str(tmp_path / "gs"))
    assert "rendering" not in no_render.stdout + no_render.stderr  # the report alone renders nothing: no check
