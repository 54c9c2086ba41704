#!/usr/bin/env bash
# Run benchmarks/gpu_suite.sh on the machine the device tool lends, from the bundle benchmarks/gpu_bundle.py makes.
#
#   python benchmarks/gpu_bundle.py --gl                                  # here: writes .device/ (git-ignored)
#   run(carry=[".device"], command="bash benchmarks/gpu_device.sh --steps tests,losses,curl")   # on the device
#
# Unpacks .device/site.tar.xz into /tmp/site (once per machine) and the EGL loaders of .device/gl/*.deb when the
# machine has no libEGL; sets PYTHONPATH (bundle, then src/), PYTHON=python3 (the image's torch),
# CURL_REFERENCE_DIR=.device/curl_reference and MUJOCO_GL=egl; runs the suite with the arguments given; then copies
# what came out into $OUT, the folder the device tool brings back: gpu-suite.tgz (logs, JSON and each run's
# config, metrics, summary and curves; no checkpoints), gpu_suite.json and results.md (with the report step).
# A warm machine keeps /tmp/site and gpu-suite/ between calls, so the steps can be split over several calls of at
# most 10 minutes each (docs/gpu.md). Exit status: the suite's.
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE="${BUNDLE:-.device}"
SITE="${SITE:-/tmp/site}"
if [ ! -f "$BUNDLE/site.tar.xz" ]; then
  echo "gpu_device.sh: no $BUNDLE/site.tar.xz; run 'python benchmarks/gpu_bundle.py --gl' here and carry $BUNDLE" >&2
  exit 2
fi
BUNDLE="$(cd "$BUNDLE" && pwd)"
if [ ! -f "$SITE/.unpacked" ]; then
  mkdir -p "$SITE" && tar -xJf "$BUNDLE/site.tar.xz" -C "$SITE" && touch "$SITE/.unpacked"
fi
if compgen -G "$BUNDLE/gl/*.deb" > /dev/null && ! ldconfig -p 2>/dev/null | grep -q 'libEGL.so.1'; then
  for f in "$BUNDLE"/gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
vendor=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
if [ -f "$vendor" ] && [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ]; then export __EGL_VENDOR_LIBRARY_FILENAMES="$vendor"; fi
export PYTHONPATH="$SITE:$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHON="${PYTHON:-python3}" MUJOCO_GL="${MUJOCO_GL:-egl}"
if [ -d "$BUNDLE/curl_reference" ] && [ -z "${CURL_REFERENCE_DIR:-}" ]; then
  export CURL_REFERENCE_DIR="$BUNDLE/curl_reference"
fi
"$PYTHON" - "$(cat "$BUNDLE/site.python" 2>/dev/null || echo '?')" <<'EOF'
import sys

import torch

built = sys.argv[1]
here = "%d.%d" % sys.version_info[:2]
print(f"python {here} (bundle built for {built}), torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}")
if built not in ("?", here):
    sys.exit(f"gpu_device.sh: the bundle was built for Python {built}; rebuild it with --python-version {here}")
EOF
rc=0
bash benchmarks/gpu_suite.sh "$@" || rc=$?
out="gpu-suite"
for ((i = 1; i <= $#; i++)); do [ "${!i}" = "--out" ] && { j=$((i + 1)); out="${!j}"; }; done
if [ -n "${OUT:-}" ] && [ -d "$out" ]; then
  tar -czf "$OUT/gpu-suite.tgz" --exclude='*.pt' --exclude='checkpoints' "$out"
  [ -f "$out/gpu_suite.json" ] && cp "$out/gpu_suite.json" "$OUT/"
  if [ -f "$out/results.md" ]; then cp "$out/results.md" "$OUT/"; else cp docs/results.md "$OUT/"; fi
  echo "gpu_device.sh: copied $out (no checkpoints) into \$OUT"
fi
exit "$rc"
