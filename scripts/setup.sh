#!/usr/bin/env bash
# Create .venv and install contrastlab (extras dev, ray, tune) with pinned torch/mujoco (constraints.txt); fetch Fashion-MNIST via apt.
# Idempotent: re-running skips the install when pyproject.toml and constraints.txt are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"

no_venv="[setup] error: cannot make a virtual environment with pip (on Debian/Ubuntu: sudo apt-get install python3-venv), then run this again"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV" || { echo "$no_venv" >&2; exit 1; }
fi
# A venv without pip: its creation failed half way (no python3-venv), or another tool made it: add pip, keep the rest.
if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  echo "[setup] $VENV has no pip: adding it (python -m ensurepip)"
  "$VENV/bin/python" -m ensurepip --upgrade >/dev/null || { echo "$no_venv" >&2; exit 1; }
fi

stamp="$VENV/.contrastlab-setup"
want="$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[setup] installing contrastlab (torch==2.13.0, mujoco==3.17.0 pinned by constraints.txt)"
  "$VENV/bin/python" -m pip install --quiet -c constraints.txt -e ".[dev,ray,tune]"
  echo "$want" > "$stamp"
else
  echo "[setup] environment up to date"
fi

# Fashion-MNIST (the default dataset of the simclr and pu plugins) from Debian, when missing.
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
    echo "[setup] installing Fashion-MNIST (apt-get install -y dataset-fashion-mnist)"
    { $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist; } \
      >/dev/null 2>&1 || echo "[setup] warning: could not install dataset-fashion-mnist; it will be downloaded when online"
  else
    echo "[setup] note: apt-get not available; Fashion-MNIST will be downloaded on first use when online"
  fi
fi
