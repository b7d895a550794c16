#!/usr/bin/env bash
# The whole GPU pass in one command: run it from the repo root on a machine with one CUDA GPU.
#
#   bash scripts/gpu_check.sh                 # results under runs/gpu/<UTC time>/
#   bash scripts/gpu_check.sh --out DIR       # results under DIR
#   bash scripts/gpu_check.sh --dry-run       # every step's code path on the CPU, tiny sizes (the test suite runs this)
#
# Installs nothing (a CUDA build of the pinned torch is assumed present). Steps, each with its own time
# limit; a failing step is reported and the others still run:
#   env            torch, CUDA and the GPU
#   cuda_tests     pytest -m cuda (the tests that skip without a GPU)
#   notebooks      every notebook executed with DEVICE = "cuda" (executed copies saved, originals untouched)
#   judge_record   the practice references recorded on the GPU (judge.py record --device cuda, into the output folder)
#   bench_greedy   python -m tree_spec.tools.bench --device cuda (synchronized wall time)
#   bench_t1       python -m tree_spec.tools.bench --device cuda --temperature 1.0
#   bench_graphs   python -m tree_spec.tools.graph_bench --device cuda: eager loops vs fixed shapes vs CUDA graphs
#   fast_suite     pytest -m "not slow" with torch's default device set to CUDA (MINI_LLM_TEST_DEVICE): the tests
#                  build theirs on the CPU by name, so a library tensor that follows the default device shows up
#                  (the dry run uses meta); 8 workers; last, since the explicit CUDA coverage is cuda_tests
# Everything lands in the output folder: summary.md (status and seconds per step), logs/, env.txt,
# fast_suite.xml, notebooks/, references/, bench/. Budget: 10 minutes on one GPU (the step limits add up to
# 600 s; the dry run gets 4x as long).
# Exit status: the number of failed steps (0 = all passed).
set -uo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

PYTHON=${PYTHON:-python}
STAMP=$(date -u +%Y%m%d-%H%M%S)
if [ "$DRY_RUN" = 1 ]; then
  DEVICE=cpu
  LIMIT_SCALE=4  # a shared 2-core CPU, not a GPU machine
  OUT=${OUT:-runs/gpu-dry-run/$STAMP}
  SUITE=(tests/test_check.py)  # a small slice (7 s here): the code path, not the coverage
  SUITE_DEVICE=meta             # stands in for CUDA as the default device: a tensor that follows it fails when read
  SUITE_WORKERS=0
  CUDA_SUITE=(tests/test_fixed_shape.py)
  NOTEBOOKS=(00)
  RECORD_ONLY=(01)
  BENCH_SIZE=(--quick --no-transformers)
  BENCH_T1_SIZE=(--quick --no-transformers)
  GRAPHS_SIZE=(--quick)
else
  DEVICE=cuda
  LIMIT_SCALE=1
  OUT=${OUT:-runs/gpu/$STAMP}
  SUITE=()
  SUITE_DEVICE=cuda
  SUITE_WORKERS=8               # the fast suite takes ~6 min on one process; the GPU machine has 16 cores
  CUDA_SUITE=()
  NOTEBOOKS=()
  RECORD_ONLY=()
  BENCH_SIZE=()
  BENCH_T1_SIZE=(--prompts 8)
  GRAPHS_SIZE=()
  if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "no CUDA GPU visible to torch: run with --dry-run to check the script on the CPU" >&2
    exit 1
  fi
fi
export PYTHON DEVICE OUT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # the CPU side only feeds the GPU; one thread never spins against others
mkdir -p "$OUT/logs"
SUMMARY="$OUT/summary.md"
FAILED=0
START=$SECONDS
{
  echo "# GPU check $( [ "$DRY_RUN" = 1 ] && echo '(dry run on the CPU)' ), $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), device $DEVICE, output $OUT"
  echo
  echo "| step | status | seconds | log |"
  echo "|---|---|---|---|"
} > "$SUMMARY"

# step NAME LIMIT_SECONDS COMMAND...: run it with a time limit, log it, record the outcome, carry on.
step() {
  local name=$1 limit=$(($2 * LIMIT_SCALE)) t0=$SECONDS status rc
  shift 2
  echo "== $name (limit ${limit}s): $*"
  # the shell functions below run under `timeout` through a child bash that is given their definitions
  timeout --kill-after=10 "$limit" bash -c "$(declare -f env_info judge_record bench); \"\$@\"" _ "$@" \
    > "$OUT/logs/$name.log" 2>&1
  rc=$?
  case $rc in
    0) status=ok ;;
    124|137) status="FAILED: over ${limit}s" ;;
    *) status="FAILED: exit $rc" ;;
  esac
  [ "$rc" = 0 ] || FAILED=$((FAILED + 1))
  echo "| $name | $status | $((SECONDS - t0)) | logs/$name.log |" >> "$SUMMARY"
  echo "   $status in $((SECONDS - t0)) s; last lines:"
  tail -n 3 "$OUT/logs/$name.log" | sed 's/^/   | /'
}

env_info() {
  "$PYTHON" - <<'EOF'
import platform, torch
print(f"python {platform.python_version()}, torch {torch.__version__}, CUDA build {torch.version.cuda}")
print(f"cuda available: {torch.cuda.is_available()}")
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"gpu: {p.name}, {p.total_memory / 2**30:.0f} GiB, capability {p.major}.{p.minor}")
EOF
  command -v nvidia-smi > /dev/null && nvidia-smi
  true
}

judge_record() {  # judge_record [EXERCISE...]
  "$PYTHON" practice/judge.py --references "$OUT/references" record --device "$DEVICE" "$@"
}

bench() {  # bench FOLDER ARGS...
  local folder=$1
  shift
  "$PYTHON" -m tree_spec.tools.bench --out "$OUT/$folder" --device "$DEVICE" "$@"
}

step env 20 env_info
cp "$OUT/logs/env.log" "$OUT/env.txt"
step cuda_tests 150 "$PYTHON" -m pytest -n 0 -q -p no:cacheprovider -m cuda -rs "${CUDA_SUITE[@]}"
step notebooks 160 "$PYTHON" notebooks/execute.py --device "$DEVICE" --out "$OUT/notebooks" --keep-going "${NOTEBOOKS[@]}"
step judge_record 60 judge_record "${RECORD_ONLY[@]}"
step bench_greedy 40 bench bench "${BENCH_SIZE[@]}"
step bench_t1 40 bench bench --temperature 1.0 "${BENCH_T1_SIZE[@]}"
step bench_graphs 40 "$PYTHON" -m tree_spec.tools.graph_bench --device "$DEVICE" --out "$OUT/bench" "${GRAPHS_SIZE[@]}"
step fast_suite 90 env MINI_LLM_TEST_DEVICE="$SUITE_DEVICE" "$PYTHON" -m pytest -n "$SUITE_WORKERS" -q -p no:cacheprovider \
  -m "not slow" \
  --junitxml="$OUT/fast_suite.xml" "${SUITE[@]}"

echo >> "$SUMMARY"
echo "$FAILED failed step(s), $((SECONDS - START)) s in all." >> "$SUMMARY"
echo
cat "$SUMMARY"
exit "$FAILED"
