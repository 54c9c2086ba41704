#!/usr/bin/env bash
# The GPU suite (issue 13): everything contrastlab measures on one CUDA GPU, in <= 40 minutes on an H100.
#
#   bash benchmarks/gpu_suite.sh                      # all steps, results into docs/results.md
#   bash benchmarks/gpu_suite.sh --steps tests,losses,curl
#   bash benchmarks/gpu_suite.sh --steps runs,report --frames 100000 --seeds "1 2" --losses "infonce dcl"
#   bash benchmarks/gpu_suite.sh --dry-run            # tiny sizes on the CPU: checks the suite itself (tested)
#   bash benchmarks/gpu_suite.sh --steps runs --set train.save_buffer=false   # extra overrides for every run
#   bash benchmarks/gpu_suite.sh --steps pack --pack-ks "1 4" --pack-frames 10000
#   bash benchmarks/gpu_device.sh ...                 # the same on the device tool's machine (docs/gpu.md)
#
# Steps (comma-separated in --steps; default: all of them, in this order):
#   tests   pytest -m cuda (losses on the GPU against float64 CPU, bf16 autocast, CURL updates on the GPU)
#   losses  benchmarks/losses.py --device cuda (every loss vs InfoNCE and vs paper-style code)
#   curl    benchmarks/curl_reference.py: CURL updates/s at batch 512, ours vs the reference agent, same GPU;
#           then ours with the speed flags channels_last, +bf16, +compile (issue 10)
#   pack    K = 1 2 4 8 (--pack-ks) concurrent 20k-frame (--pack-frames) curl runs on the GPU (what compare
#           --runs-per-gpu K does): total frames/s per K
#   runs    cartpole-swingup, --frames env frames (default 100k), paper preset, each loss × seed, all at once
#           on the one GPU (runs that were interrupted are resumed when the suite is started again)
#   report  benchmarks/gpu_report.py: OUT/gpu_suite.json and the table between the gpu-suite markers of
#           --results-md (default docs/results.md; OUT/results.md with --dry-run)
#
# Logs and JSON go to --out (default gpu-suite/). PYTHON selects the interpreter (default .venv/bin/python
# when present, else python3); CURL_REFERENCE_DIR the reference CURL agent for the `curl` step.
# A step that fails does not stop the suite: it prints one line (and the end of a failed run's log), the next
# step runs (the report too), and the suite exits with 1 at the end. Each step writes its exit status and seconds
# to OUT/steps/<step>.txt ("<exit status> <seconds>"; one file per step, so archives of calls made on fresh machines
# unpack over each other without losing any), which the report shows.
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS="tests,losses,curl,pack,runs,report"
PACK_FRAMES=""
PACK_KS=""
OUT="gpu-suite"
FRAMES=100000
SEEDS="1 2"
LOSSES="infonce dcl"
DRY=0
RESULTS_MD=""
RUNS_DIR=""
EXTRA=()
die() { echo "gpu_suite.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1; shift; continue ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --steps|--pack-ks|--pack-frames|--out|--frames|--seeds|--losses|--runs-dir|--set|--results-md)
      [ $# -ge 2 ] || die "$1 needs a value (see --help)" ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  case "$1" in
    --steps) STEPS="$2" ;;
    --pack-ks) PACK_KS="$2" ;;
    --pack-frames) PACK_FRAMES="$2" ;;
    --out) OUT="$2" ;;
    --frames) FRAMES="$2" ;;
    --seeds) SEEDS="$2" ;;
    --losses) LOSSES="$2" ;;
    --runs-dir) RUNS_DIR="$2" ;;
    --set) EXTRA+=(--set "$2") ;;
    --results-md) RESULTS_MD="$2" ;;
  esac
  shift 2
done
for step in ${STEPS//,/ }; do
  case "$step" in tests|losses|curl|pack|runs|report) ;; *)
    die "unknown step '$step'; valid: tests, losses, curl, pack, runs, report" ;;
  esac
done
# numbers are checked here, before any step runs: a typo must not surface minutes later, after the GPU steps
positive() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 takes positive whole numbers, got '$2'"; }
positive --frames "$FRAMES"
[ -z "$PACK_FRAMES" ] || positive --pack-frames "$PACK_FRAMES"
for k in $PACK_KS; do positive --pack-ks "$k"; done
for seed in $SEEDS; do [[ "$seed" =~ ^[0-9]+$ ]] || die "--seeds takes whole numbers, got '$seed'"; done
[ -n "${SEEDS// /}" ] || die "--seeds needs at least one seed"
[ -n "${LOSSES// /}" ] || die "--losses needs at least one loss"
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export MUJOCO_GL="${MUJOCO_GL:-egl}" PYTHONUNBUFFERED=1
mkdir -p "$OUT"
RUNS_DIR="${RUNS_DIR:-$OUT/runs}"
[ -n "$RESULTS_MD" ] || { if [ "$DRY" = 1 ]; then RESULTS_MD="$OUT/results.md"; else RESULTS_MD=docs/results.md; fi; }
has() { [[ ",$STEPS," == *",$1,"* ]]; }
log() { echo "[gpu-suite $(date +%H:%M:%S)] $*"; }

if [ "$DRY" = 1 ]; then
  DEVICE=cpu
else
  DEVICE=cuda
  "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
    || { echo "gpu_suite.sh: no CUDA GPU visible to $PYTHON (use --dry-run to check the suite on a CPU)" >&2; exit 2; }
fi
"$PYTHON" - "$OUT/device.json" "$DEVICE" <<'EOF'
import json, platform, sys, torch
name = torch.cuda.get_device_name() if sys.argv[2] == "cuda" else f"cpu ({platform.processor() or 'unknown'})"
json.dump({"device": name, "torch": torch.__version__, "python": platform.python_version(),
           "cuda": torch.version.cuda}, open(sys.argv[1], "w"), indent=2)
print("device:", name, "torch", torch.__version__)
EOF

# The end of a failed process's log, so that the device tool's reply (the output's tail) shows why it failed.
show_failure() {
  echo "gpu_suite.sh: $2 failed; the end of $1:" >&2
  tail -n 15 "$1" | sed 's/^/    /' >&2
}

step_tests() {
  log "tests: pytest -m cuda"
  local args=(-q -m cuda -p no:cacheprovider) rc=0
  if [ "$DRY" = 1 ]; then args+=(--collect-only); fi
  "$PYTHON" -m pytest "${args[@]}" 2>&1 | tee "$OUT/tests.log" || rc=$?
  echo "$rc" > "$OUT/tests.rc"
  return "$rc"
}

step_losses() {
  log "losses: benchmarks/losses.py --device $DEVICE"
  local largs=(--device cuda)
  if [ "$DRY" = 1 ]; then largs=(--device cpu --quick --threads 1); fi
  "$PYTHON" benchmarks/losses.py "${largs[@]}" 2>&1 | tee "$OUT/losses.log"
}

step_curl() {
  log "curl: updates/s at batch 512, ours vs the reference CURL"
  local cargs=(--device cuda --batch 512 --updates 50 --rounds 3 --fill 1000) flagsets flags fargs f tag failed=0
  if [ "$DRY" = 1 ]; then cargs=(--device cpu --batch 16 --updates 1 --rounds 1 --fill 40); fi
  : > "$OUT/curl.log"
  # the baseline is the plain path (float32, NCHW): channels_last is on by default, so it is switched off here
  "$PYTHON" benchmarks/curl_reference.py "${cargs[@]}" --set agent.channels_last=false \
    --json "$OUT/curl_reference.json" 2>&1 | tee -a "$OUT/curl.log" || failed=$((failed + 1))
  # issue 10: the GPU speed flags, each against the same reference (the cuda tests check their numbers); one that
  # fails does not keep the others from being measured
  flagsets=("channels_last" "channels_last bf16" "channels_last bf16 compile")
  if [ "$DRY" = 1 ]; then flagsets=("channels_last"); fi
  for flags in "${flagsets[@]}"; do
    fargs=(); for f in $flags; do fargs+=(--set "agent.$f=true"); done
    tag="${flags// /+}"
    log "curl: batch 512 with $tag"
    "$PYTHON" benchmarks/curl_reference.py "${cargs[@]}" "${fargs[@]}" --json "$OUT/curl_reference_$tag.json" \
      2>&1 | tee -a "$OUT/curl.log" || failed=$((failed + 1))
  done
  if [ "$failed" -gt 0 ]; then
    echo "gpu_suite.sh: curl: $failed of $((1 + ${#flagsets[@]})) measurements failed (see $OUT/curl.log)" >&2
    return 1
  fi
}

step_pack() {
  # issue 10: K concurrent curl runs on the one GPU (what `platform compare --runs-per-gpu K` does); the
  # aggregate environment frames/s per K is in pack.log; the best K goes into docs/curl.md ("Speed")
  local pframes pks pargs k i threads start wall ppids plogs pfail failed=0
  if [ "$DRY" = 1 ]; then
    pframes=${PACK_FRAMES:-40}; pks=${PACK_KS:-"1 2"}
    pargs=(--preset smoke --device cpu --set agent.init_steps=2 --set agent.batch_size=8 --set env.render_size=48
           --set agent.crop=40 --set agent.hidden_dim=32 --set checkpoint_every=$pframes)
  else
    pframes=${PACK_FRAMES:-20000}; pks=${PACK_KS:-"1 2 4 8"}; pargs=(--preset paper --device cuda)
  fi
  for k in $pks; do
    # fresh runs each time (a repeated call must not meet the completed runs of the last one); each run gets its
    # share of the CPU threads, as `platform compare --runs-per-gpu K` gives its children
    rm -rf "$OUT/pack/k$k" "$OUT"/pack-k"$k"-*.log
    threads=$(( $(nproc) / k )); [ "$threads" -ge 1 ] || threads=1
    log "pack: $k concurrent run(s) of $pframes env frames"
    start=$(date +%s); ppids=(); plogs=()
    for i in $(seq 1 "$k"); do
      OMP_NUM_THREADS=$threads "$PYTHON" -m contrastlab.cli train --plugin curl --loss infonce --seed "$i" "${pargs[@]}" \
        --set "train.env_frames=$pframes" --set "train.eval_every_frames=$pframes" --set train.eval_episodes=1 \
        --set train.save_buffer=false --logdir "$OUT/pack/k$k" --run-name "run$i" > "$OUT/pack-k$k-$i.log" 2>&1 &
      ppids+=($!); plogs+=("$OUT/pack-k$k-$i.log")
    done
    pfail=0
    for i in "${!ppids[@]}"; do
      wait "${ppids[i]}" || { pfail=$((pfail + 1)); show_failure "${plogs[i]}" "pack K=$k run $((i + 1))"; }
    done
    wall=$(( $(date +%s) - start )); [ "$wall" -gt 0 ] || wall=1
    echo "K=$k runs: $wall s wall, $(( k * pframes / wall )) env frames/s in total, $pfail failed" | tee -a "$OUT/pack.log"
    failed=$((failed + pfail))
  done
  [ "$failed" -eq 0 ]
}

step_runs() {
  local rargs loss seed name dir pids=() names=() failed=0 i
  if [ "$DRY" = 1 ]; then
    rargs=(--preset smoke --device cpu --set "train.env_frames=$FRAMES" --set train.eval_every_frames=$FRAMES
           --set train.eval_episodes=1 --set agent.init_steps=10 --set agent.batch_size=8
           --set env.render_size=48 --set agent.crop=40 --set agent.hidden_dim=32 --set checkpoint_every=$FRAMES)
  else
    rargs=(--preset paper --device cuda --set "train.env_frames=$FRAMES")
  fi
  log "runs: cartpole-swingup, $FRAMES env frames, losses [$LOSSES] x seeds [$SEEDS], concurrently"
  for loss in $LOSSES; do
    for seed in $SEEDS; do
      name="cartpole-$loss-s$seed"
      dir="$RUNS_DIR/curl/$loss/$name"
      if [ -f "$dir/summary.json" ]; then log "  $name: finished earlier, skipped"; continue; fi
      if [ -d "$dir" ]; then
        log "  $name: resuming"
        "$PYTHON" -m contrastlab.cli train --resume "$dir" > "$OUT/$name.log" 2>&1 &
      else
        log "  $name: starting"
        "$PYTHON" -m contrastlab.cli train --plugin curl --loss "$loss" --seed "$seed" "${rargs[@]}" \
          --set env.domain=cartpole --set env.task=swingup "${EXTRA[@]}" --logdir "$RUNS_DIR" --run-name "$name" \
          > "$OUT/$name.log" 2>&1 &
      fi
      pids+=($!); names+=("$name")
    done
  done
  for i in "${!pids[@]}"; do
    wait "${pids[i]}" || { failed=$((failed + 1)); show_failure "$OUT/${names[i]}.log" "run ${names[i]}"; }
  done
  log "runs: done ($failed failed; logs in $OUT/)"
  [ "$failed" -eq 0 ]
}

step_report() {
  log "report: $OUT/gpu_suite.json and $RESULTS_MD"
  local rargs=(--out "$OUT" --runs-dir "$RUNS_DIR" --results-md "$RESULTS_MD" --frames "$FRAMES")
  if [ "$DRY" = 1 ]; then rargs+=(--dry-run); fi
  "$PYTHON" benchmarks/gpu_report.py "${rargs[@]}"
}

# Each step in a subshell with errexit: its first failing command ends the step, not the suite.
FAILED=()
for step in tests losses curl pack runs report; do
  has "$step" || continue
  start=$SECONDS
  set +e
  ( set -e; "step_$step" )
  rc=$?
  set -e
  mkdir -p "$OUT/steps"
  echo "$rc $((SECONDS - start))" > "$OUT/steps/$step.txt"
  if [ "$rc" -ne 0 ]; then
    FAILED+=("$step")
    echo "gpu_suite.sh: step '$step' failed (exit $rc) after $((SECONDS - start)) s; going on with the next step" >&2
  fi
done
if [ "${#FAILED[@]}" -gt 0 ]; then
  log "finished; failed steps: ${FAILED[*]}"
  exit 1
fi
log "finished"
