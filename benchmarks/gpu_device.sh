#!/usr/bin/env bash
# Run benchmarks/gpu_suite.sh on the machine the device tool lends, from the bundle benchmarks/gpu_bundle.py makes.
#
#   .venv/bin/python benchmarks/gpu_bundle.py --gl                        # here: writes .device/ (git-ignored)
#   run(carry=[".device"], command="bash benchmarks/gpu_device.sh --steps curl")   # on the device
#
# Checks that the bundle was built for this Python, unpacks .device/site.tar.xz into /tmp/site (again only when the
# bundle changed) and the EGL loaders of .device/gl/*.deb when libEGL, libOpenGL or libGLdispatch is missing; sets
# PYTHONPATH (bundle, then src/), PYTHON=python3 (the image's torch), CURL_REFERENCE_DIR=.device/curl_reference and
# MUJOCO_GL=egl; says in one line whether rendering works (when a step renders); runs the suite with the arguments
# given in its own process group. GPU_DEVICE_TIMEOUT seconds (default 510) after this script started, or when this
# script gets SIGTERM/SIGINT/SIGHUP, it sends SIGTERM to every process of the suite (a training run then stops as
# on Ctrl-C: marked interrupted, resumable), and SIGKILL to what is left 30 s later; after a stop at the time limit
# it still runs the report step if the call asked for it. Then it copies what the suite wrote into $OUT, the folder
# the tool brings back, also after a stop:
# gpu-suite.tgz (logs, JSON and each run's config, metrics, summary and curves; no checkpoints), gpu_suite.json,
# and results.md when the report step ran. A command the tool kills at its own limit returns nothing, so set
# GPU_DEVICE_TIMEOUT to about min(timeout_s, budget_left_s) - 90 (the stop's grace, a report, the copy).
# Environment: BUNDLE (default .device), SITE (default /tmp/site), PYTHON, OUT, GPU_DEVICE_TIMEOUT.
# A warm machine keeps /tmp/site and gpu-suite/ between calls, so the steps can be split over several calls
# (docs/gpu.md). Exit status: the suite's, 124 when it was stopped at the time limit.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
  echo "Other arguments go to gpu_suite.sh:"
  bash "$(dirname "$0")/gpu_suite.sh" --help
  exit 0
fi
cd "$(dirname "$0")/.."
BUNDLE="${BUNDLE:-.device}"
SITE="${SITE:-/tmp/site}"
PYTHON="${PYTHON:-python3}"
GRACE=30
if [ ! -f "$BUNDLE/site.tar.xz" ]; then
  echo "gpu_device.sh: no $BUNDLE/site.tar.xz; build it with '.venv/bin/python benchmarks/gpu_bundle.py --gl' and carry $BUNDLE" >&2
  exit 2
fi
if ! command -v setsid > /dev/null; then
  echo "gpu_device.sh: needs setsid (util-linux) to stop the suite's processes at the time limit" >&2
  exit 2
fi
BUNDLE="$(cd "$BUNDLE" && pwd)"
built="$(cat "$BUNDLE/site.python" 2>/dev/null || echo '?')"
"$PYTHON" - "$built" <<'EOF'
import sys

built = sys.argv[1]
here = f"{sys.version_info[0]}.{sys.version_info[1]}"
if built not in ("?", here):
    sys.exit(f"gpu_device.sh: the bundle was built for Python {built}; rebuild it with --python-version {here}")
EOF
stamp="$(cksum < "$BUNDLE/site.tar.xz")"
if [ "$(cat "$SITE/.bundle" 2>/dev/null || true)" != "$stamp" ]; then  # first call, or a rebuilt bundle
  rm -rf "$SITE"
  mkdir -p "$SITE"
  if ! tar -xJf "$BUNDLE/site.tar.xz" -C "$SITE"; then
    rm -rf "$SITE"
    echo "gpu_device.sh: cannot unpack $BUNDLE/site.tar.xz (truncated or corrupt?); rebuild it with gpu_bundle.py" >&2
    exit 2
  fi
  echo "$stamp" > "$SITE/.bundle"
fi
# MuJoCo's EGL rendering loads libEGL (glvnd) and, through PyOpenGL, libOpenGL or else libGL; both dispatch through
# libGLdispatch. The loaders go in when any of them is missing (an image may have libEGL without libOpenGL).
have="$(ldconfig -p 2>/dev/null || true)"
missing=()
for lib in libEGL.so.1 libOpenGL.so.0 libGLdispatch.so.0; do grep -qF "$lib " <<< "$have" || missing+=("$lib"); done
if [ "${#missing[@]}" -gt 0 ]; then
  if compgen -G "$BUNDLE/gl/*.deb" > /dev/null; then
    echo "gpu_device.sh: installing the GL/EGL loaders of $BUNDLE/gl (missing here: ${missing[*]})"
    for f in "$BUNDLE"/gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  else
    echo "gpu_device.sh: ${missing[*]} missing here and no $BUNDLE/gl/*.deb (build the bundle with --gl)" >&2
  fi
fi
vendor=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
if [ -f "$vendor" ] && [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ]; then export __EGL_VENDOR_LIBRARY_FILENAMES="$vendor"; fi
export PYTHONPATH="$SITE:$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHON MUJOCO_GL="${MUJOCO_GL:-egl}"
if [ -d "$BUNDLE/curl_reference" ] && [ -z "${CURL_REFERENCE_DIR:-}" ]; then
  export CURL_REFERENCE_DIR="$BUNDLE/curl_reference"
fi
"$PYTHON" -c "import sys, torch; print(f'python {sys.version_info[0]}.{sys.version_info[1]} (bundle built for \
$built), torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}')"

out="gpu-suite"
steps="all"
results_md=docs/results.md
args=("$@")
for ((i = 0; i < ${#args[@]} - 1; i++)); do
  case "${args[i]}" in
    --out) out="${args[i + 1]}" ;; --steps) steps="${args[i + 1]}" ;; --results-md) results_md="${args[i + 1]}" ;;
  esac
done
# One rendered frame before the suite, when a step renders: an EGL problem is then one line at the top of the
# reply, not a traceback in each step's log.
if [[ "$steps" == all || ",$steps," =~ ,(tests|curl|pack|runs), ]]; then
  "$PYTHON" - <<'EOF' || true
import sys
import time

start = time.perf_counter()
try:
    from contrastlab.envs import check_rendering  # the curl plugin's own check (one frame, dm-control's renderer)

    backend = check_rendering()
except Exception as exc:  # the message is the point; each step that renders fails with it again
    sys.exit(f"gpu_device.sh: rendering FAILED: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__} "
             "(the tests, curl, pack and runs steps need it)")
print(f"gpu_device.sh: rendering works (MUJOCO_GL={backend}, one frame in {time.perf_counter() - start:.1f} s)")
EOF
fi

# The suite in its own process group (setsid), so that a stop reaches the training processes it starts in the
# background. SIGTERM, not SIGINT: a non-interactive shell starts its background jobs with SIGINT ignored.
setsid bash benchmarks/gpu_suite.sh "$@" &
suite=$!
stop_suite() { kill -TERM -- "-$suite" 2>/dev/null || true; }
trap 'echo "gpu_device.sh: stopping the suite (signal)" >&2; stop_suite' TERM INT HUP
limit=$(( ${GPU_DEVICE_TIMEOUT:-510} - SECONDS ))  # counted from this script's start
(( limit > 0 )) || limit=1
fired="$(mktemp -u)"
setsid bash -c 'sleep "$1" && touch "$3" && echo "gpu_device.sh: stopping the suite after the time limit" >&2 \
  && kill -TERM -- "-$2" 2>/dev/null' _ "$limit" "$suite" "$fired" &
watchdog=$!
rc=0
while true; do  # `wait` returns early when a trapped signal arrives; wait again for the suite itself
  wait "$suite" && rc=0 || rc=$?
  kill -0 "$suite" 2>/dev/null || break
done
kill -- "-$watchdog" 2>/dev/null || true
for ((i = 0; i < GRACE; i++)); do  # the runs finish their interrupt handling (checkpoint state, run.json)
  kill -0 -- "-$suite" 2>/dev/null || break
  sleep 1
done
kill -KILL -- "-$suite" 2>/dev/null || true  # leave nothing running into the next call
trap - TERM INT HUP
if [ -e "$fired" ]; then
  rm -f "$fired"
  if (( rc >= 128 )); then rc=124; fi  # stopped (not a suite that ended just as the limit came)
  if (( rc == 124 )) && [[ "$steps" == all || ",$steps," == *,report,* ]]; then
    # the report step never came: make it now from what the steps wrote (seconds; bounded, inside the margin)
    echo "gpu_device.sh: the report of what the suite wrote before the stop" >&2
    timeout 30 bash benchmarks/gpu_suite.sh "$@" --steps report || true
  fi
fi

if [ -n "${OUT:-}" ] && [ -d "$out" ]; then
  tar -czf "$OUT/gpu-suite.tgz" --exclude='*.pt' --exclude='checkpoints' -C "$(dirname "$out")" "$(basename "$out")"
  if [ -f "$out/gpu_suite.json" ]; then cp "$out/gpu_suite.json" "$OUT/"; fi
  if [ -f "$out/results.md" ]; then cp "$out/results.md" "$OUT/"
  elif [[ "$steps" == all || ",$steps," == *,report,* ]] && [ -f "$results_md" ]; then
    cp "$results_md" "$OUT/results.md"
  fi
  echo "gpu_device.sh: copied $out (no checkpoints) into \$OUT"
fi
exit "$rc"
