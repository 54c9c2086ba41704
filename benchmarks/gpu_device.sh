#!/usr/bin/env bash
# Run benchmarks/gpu_suite.sh on the machine the device tool lends, from the bundle benchmarks/gpu_bundle.py makes.
#
#   python benchmarks/gpu_bundle.py --gl                                  # here: writes .device/ (git-ignored)
#   run(carry=[".device"], command="bash benchmarks/gpu_device.sh --steps tests,curl")   # on the device
#
# Checks that the bundle was built for this Python, unpacks .device/site.tar.xz into /tmp/site (again only when the
# bundle changed) and the EGL loaders of .device/gl/*.deb when the machine has no libEGL; sets PYTHONPATH (bundle,
# then src/), PYTHON=python3 (the image's torch), CURL_REFERENCE_DIR=.device/curl_reference and MUJOCO_GL=egl;
# runs the suite with the arguments given, stopping it (SIGINT to all its processes, then SIGKILL) after
# GPU_DEVICE_TIMEOUT seconds (default 540, inside the tool's 600 s limit); then copies what the suite wrote into
# $OUT, the folder the tool brings back, also after a stop: gpu-suite.tgz (logs, JSON and each run's config,
# metrics, summary and curves; no checkpoints), gpu_suite.json and results.md (after the report step).
# Environment: BUNDLE (default .device), SITE (default /tmp/site), PYTHON, OUT, GPU_DEVICE_TIMEOUT.
# A warm machine keeps /tmp/site and gpu-suite/ between calls, so the steps can be split over several calls
# (docs/gpu.md). Exit status: the suite's (124 when it was stopped at the time limit).
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE="${BUNDLE:-.device}"
SITE="${SITE:-/tmp/site}"
PYTHON="${PYTHON:-python3}"
if [ ! -f "$BUNDLE/site.tar.xz" ]; then
  echo "gpu_device.sh: no $BUNDLE/site.tar.xz; run 'python benchmarks/gpu_bundle.py --gl' here and carry $BUNDLE" >&2
  exit 2
fi
BUNDLE="$(cd "$BUNDLE" && pwd)"
"$PYTHON" - "$(cat "$BUNDLE/site.python" 2>/dev/null || echo '?')" <<'EOF'
import sys

built = sys.argv[1]
here = f"{sys.version_info[0]}.{sys.version_info[1]}"
if built not in ("?", here):
    sys.exit(f"gpu_device.sh: the bundle was built for Python {built}; rebuild it with --python-version {here}")
EOF
stamp="$(cksum < "$BUNDLE/site.tar.xz")"
if [ "$(cat "$SITE/.bundle" 2>/dev/null || true)" != "$stamp" ]; then  # first call, or a rebuilt bundle
  rm -rf "$SITE" && mkdir -p "$SITE" && tar -xJf "$BUNDLE/site.tar.xz" -C "$SITE" && echo "$stamp" > "$SITE/.bundle"
fi
if compgen -G "$BUNDLE/gl/*.deb" > /dev/null && ! grep -q 'libEGL\.so\.1' < <(ldconfig -p 2>/dev/null || true); then
  for f in "$BUNDLE"/gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
vendor=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
if [ -f "$vendor" ] && [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ]; then export __EGL_VENDOR_LIBRARY_FILENAMES="$vendor"; fi
export PYTHONPATH="$SITE:$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHON MUJOCO_GL="${MUJOCO_GL:-egl}"
if [ -d "$BUNDLE/curl_reference" ] && [ -z "${CURL_REFERENCE_DIR:-}" ]; then
  export CURL_REFERENCE_DIR="$BUNDLE/curl_reference"
fi
"$PYTHON" -c "import sys, torch; print(f'python {sys.version_info[0]}.{sys.version_info[1]} \
(bundle built for $(cat "$BUNDLE/site.python" 2>/dev/null || echo '?')), torch {torch.__version__}, \
CUDA available: {torch.cuda.is_available()}')"

# the suite in its own process group (setsid), so that a stop reaches the training processes it starts in the
# background; without setsid only the suite's shell is signalled
SETSID=(); if command -v setsid > /dev/null; then SETSID=(setsid); fi
"${SETSID[@]}" bash benchmarks/gpu_suite.sh "$@" &
suite=$!
limit="${GPU_DEVICE_TIMEOUT:-540}"
fired="$(mktemp -u)"
"${SETSID[@]}" bash -c 'stop() { kill "-$1" -- "-$2" 2>/dev/null || kill "-$1" "$2" 2>/dev/null; }
  sleep "$1" && touch "$3" && echo "gpu_device.sh: stopping the suite after $1 s" >&2 \
  && stop INT "$2" && sleep 20 && stop KILL "$2"' _ "$limit" "$suite" "$fired" &
watchdog=$!
rc=0
wait "$suite" || rc=$?
kill -- "-$watchdog" 2>/dev/null || kill "$watchdog" 2>/dev/null || true
kill -KILL -- "-$suite" 2>/dev/null || true  # leave nothing running into the next call
if [ -e "$fired" ]; then rc=124; rm -f "$fired"; fi

out="gpu-suite"
args=("$@")
for ((i = 0; i < ${#args[@]} - 1; i++)); do [ "${args[i]}" = "--out" ] && out="${args[i + 1]}"; done
if [ -n "${OUT:-}" ] && [ -d "$out" ]; then
  tar -czf "$OUT/gpu-suite.tgz" --exclude='*.pt' --exclude='checkpoints' -C "$(dirname "$out")" "$(basename "$out")"
  if [ -f "$out/gpu_suite.json" ]; then cp "$out/gpu_suite.json" "$OUT/"; fi
  if [ -f "$out/results.md" ]; then cp "$out/results.md" "$OUT/"; else cp docs/results.md "$OUT/"; fi
  echo "gpu_device.sh: copied $out (no checkpoints) into \$OUT"
fi
exit "$rc"
