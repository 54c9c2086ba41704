"""Pack what the lent GPU machine lacks, so that ``benchmarks/gpu_suite.sh`` runs there in its first call.

The machine the ``device`` tool lends (H100/H200, Python 3.12, x86-64) has torch, numpy, scipy, matplotlib,
tensorboard, typer, rich, pluggy, pytest and more, but not stable-baselines3, gymnasium, dm-control, mujoco or
pydantic, and it reaches no package index. Its files arrive with the working tree, at most 64 MiB in all. The
wheels of the missing packages take ≈ 90 MB (dm-control 56, mujoco 27), so they cannot travel as they are.

This script, run here (where pip reaches an index):

1. downloads the wheels of :data:`PACKAGES` for the device's Python (``--python-version``, manylinux x86-64) at
   the versions installed in this environment (the versions the test suite ran with);
2. unpacks them into one folder (a wheel is a zip of its installed files) and drops what no step of the GPU
   suite imports (:data:`PRUNE`: dm-control's locomotion and the dog domain's meshes, mujoco's experimental
   renderers, test folders, byte-code);
3. writes ``OUT/site.tar.xz`` (≈ 20 MB) and a copy of the reference CURL agent (``OUT/curl_reference``, the
   ``curl`` step's side-by-side baseline; a transport copy that never enters the repository: ``.device/`` is in
   ``.gitignore``) and, with ``--gl``, the EGL loader packages that headless MuJoCo rendering needs
   (``OUT/gl/*.deb``, the device README's recipe).

``benchmarks/gpu_device.sh`` unpacks that on the device and runs the suite. Usage::

    .venv/bin/python benchmarks/gpu_bundle.py --gl    # here, after make setup; writes .device/ (git-ignored)
    # then, with the device tool: run(carry=[".device"], command="bash benchmarks/gpu_device.sh --steps curl")

``--python-version 3.11`` builds the same bundle for this machine's Python, to check it here (docs/gpu.md).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PACKAGES = (
    "stable-baselines3", "gymnasium", "farama-notifications", "cloudpickle",
    "dm-control", "dm-env", "dm-tree", "labmaze", "mujoco", "glfw", "PyOpenGL", "etils",
    "pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions",
    "typer", "click", "rich", "shellingham", "pluggy",
)
"""Distributions the bundle carries: every runtime dependency of the curl plugin and the CLI that the device image
lacks, plus the small pure-Python ones whose version the CLI relies on (typer, click, rich, pluggy), which then
take precedence over the image's own."""

PRUNE = (
    "dm_control/locomotion", "dm_control/suite/dog_assets", "mujoco/experimental",
    "mujoco/include", "labmaze/tests",
)
"""Unpacked paths dropped from the bundle: nothing the GPU suite runs imports them (the dog domain then cannot
load its model there)."""

PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
"""Wheel platform tags accepted for the device (x86-64 Linux)."""

GL_PACKAGES = ("libvulkan1", "libegl1", "libglvnd0", "libopengl0", "libgl1", "libglx0", "libgles2")
"""Debian packages of the GL/EGL loaders (the device README's list for headless rendering)."""


def pinned(dist: str) -> str:
    """``dist==version`` as installed in this environment (the version the test suite ran with)."""
    return f"{dist}=={importlib.metadata.version(dist)}"


def download(requirements: list[str], dest: Path, python_version: str) -> list[Path]:
    """Download the binary wheels of ``requirements`` (no dependencies) for CPython ``python_version``."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--implementation",
           "cp", "--python-version", python_version, "-d", str(dest)]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run([*cmd, *requirements], check=True)
    return sorted(dest.glob("*.whl"))


def unpack(wheels: list[Path], site: Path, prune: tuple[str, ...] = PRUNE) -> int:
    """Unpack ``wheels`` into ``site`` (as ``pip install --target`` lays them out, without scripts), then delete
    ``prune``, test folders and byte-code; returns the bytes left."""
    site.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
    for data_dir in site.glob("*.data"):  # a wheel's purelib/platlib trees belong at the top level
        for scheme in ("purelib", "platlib"):
            if (data_dir / scheme).is_dir():
                shutil.copytree(data_dir / scheme, site, dirs_exist_ok=True)  # merges into existing packages
        shutil.rmtree(data_dir)
    for rel in prune:
        shutil.rmtree(site / rel, ignore_errors=True)
    for junk in [*site.rglob("__pycache__"), *site.rglob("tests")]:
        if junk.is_dir():
            shutil.rmtree(junk, ignore_errors=True)
    return sum(f.stat().st_size for f in site.rglob("*") if f.is_file())


def pack(site: Path, archive: Path) -> int:
    """``site``'s contents as ``archive`` (tar.xz, paths relative to ``site``); returns its size in bytes."""
    with tarfile.open(archive, "w:xz", preset=6) as tar:
        for item in sorted(site.iterdir()):
            tar.add(item, arcname=item.name)
    return archive.stat().st_size


def download_gl(dest: Path) -> list[Path]:
    """The amd64 ``.deb`` files of :data:`GL_PACKAGES` (``apt-get download`` into ``dest``)."""
    dest.mkdir(parents=True, exist_ok=True)
    lists = dest.parent / "apt-lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    opts = ["-oAPT::Architecture=amd64", "-oAPT::Architectures=amd64", f"-oDir::State::Lists={lists}"]
    subprocess.run(["apt-get", *opts, "-qq", "update"], check=True)
    subprocess.run(["apt-get", *opts, "-qq", "download", *GL_PACKAGES], check=True, cwd=dest)
    shutil.rmtree(lists, ignore_errors=True)
    return sorted(dest.glob("*.deb"))


def make_writable(path: Path) -> None:
    """Add the owner's write bit to ``path`` and everything under it (the shared reference tree is read-only)."""
    for item in [path, *path.rglob("*")]:
        item.chmod(item.stat().st_mode | 0o200)


def remove(path: Path) -> None:
    """Delete the file or folder ``path`` if it exists, read-only parts included."""
    if path.is_dir():
        make_writable(path)
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def copy_writable(src: Path, dest: Path) -> None:
    """Copy the folder ``src`` to ``dest`` (replacing it) with owner-writable modes, so the next build can replace
    it again."""
    remove(dest)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    make_writable(dest)


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


OUTPUTS = ("site.tar.xz", "site.python", "curl_reference", "gl", "build", "apt-lists")
"""Everything a build writes into its output folder; all of it is removed first, so a failed or narrower build
never leaves an earlier build's files to be carried."""


def build(out: Path, python_version: str, reference_dir: Path | None, gl: bool) -> None:
    """Write the bundle into ``out`` (module docstring); on failure nothing of it is left there."""
    out.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        remove(out / name)
    work = out / "build"
    try:
        wheels = download([pinned(d) for d in PACKAGES], work / "wheels", python_version)
        print(f"{len(wheels)} wheels, {sum(w.stat().st_size for w in wheels) / 2**20:.1f} MiB")
        unpacked = unpack(wheels, work / "site")
        size = pack(work / "site", work / "site.tar.xz")
        if reference_dir is not None:
            copy_writable(reference_dir, out / "curl_reference")
            print(f"reference CURL agent copied to {out / 'curl_reference'}")
        if gl:
            debs = download_gl(out / "gl")
            print(f"{len(debs)} EGL loader packages in {out / 'gl'}")
        (out / "site.python").write_text(python_version + "\n")
        (work / "site.tar.xz").replace(out / "site.tar.xz")  # last: a bundle exists only when complete
        print(f"site: {unpacked / 2**20:.1f} MiB unpacked -> {out / 'site.tar.xz'}: {size / 2**20:.1f} MiB")
    except BaseException:
        for name in OUTPUTS:
            with contextlib.suppress(OSError):  # the build's own error is the one to see
                remove(out / name)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(out / "apt-lists", ignore_errors=True)


def main() -> None:
    """Build the bundle (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".device", help="output folder (git-ignored)")
    parser.add_argument("--python-version", default="3.12", help="the device's Python (default 3.12)")
    parser.add_argument("--reference-dir", type=Path, default=ROOT.parent / "shared" / "reference" / "curl",
                        help="the reference CURL agent, copied for the suite's curl step")
    parser.add_argument("--no-reference", action="store_true",
                        help="build without the reference agent (the suite's curl step then fails on the device)")
    parser.add_argument("--gl", action="store_true", help="also download the EGL loader .deb files")
    args = parser.parse_args()
    if not args.no_reference and not (args.reference_dir / "curl_sac.py").is_file():
        parser.error(f"no reference CURL agent (curl_sac.py) in {args.reference_dir}: give --reference-dir, "
                     "or --no-reference to build without it")
    out = args.out.resolve()
    build(out, args.python_version, None if args.no_reference else args.reference_dir, args.gl)
    total = tree_bytes(out)
    print(f"{out}: {total / 2**20:.1f} MiB to carry (the device tool's limit is 64 MiB with the working tree)")


if __name__ == "__main__":
    main()
