#!/usr/bin/env bash
# Builds the libFuzzer targets of traces/, sim/ and hwmodels/ with clang in the build folder
# given as $1 (default build-fuzz) and runs each for FUZZ_RUNS (default
# 20000) inputs with a fixed seed (FUZZ_SEED, default 1) on a small max_len,
# starting from tests/testdata/traces (catalog_fuzzer: from the shipped
# device and model files): the same inputs on every run, so CI
# is reproducible (raise FUZZ_RUNS or change FUZZ_SEED to explore further;
# FUZZ_SECONDS, default 120, only guards against a hang).
# Exits non-zero when a target fails to build or any run finds a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-120}
RUNS=${FUZZ_RUNS:-20000}
SEED=${FUZZ_SEED:-1}
JOBS=${JOBS:-$(nproc)}
TARGETS=(azure_fuzzer mooncake_fuzzer burstgpt_fuzzer bailian_fuzzer lengths_fuzzer
         binary_fuzzer vllm_bench_fuzzer json_fuzzer kv_cache_fuzzer catalog_fuzzer)
# Folder of each target's binary in the build tree (default traces).
declare -A FOLDER=([kv_cache_fuzzer]=sim [catalog_fuzzer]=hwmodels)

cmake -S . -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSERVESIM_FUZZ=ON \
  -DSERVESIM_BENCHMARKS=OFF -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$DIR" -j "$JOBS" --target "${TARGETS[@]}"

CORPUS_SEED=tests/testdata/traces
status=0
for t in "${TARGETS[@]}"; do
  corpus="$DIR/fuzz-corpus/$t"
  rm -rf "$corpus"  # a fresh corpus each time: same seed, same inputs
  mkdir -p "$corpus"
  folder=${FOLDER[$t]:-traces}
  # Trace files seed the trace readers, the shipped device and model files
  # the catalog parsers; the KvCache decoder starts empty.
  if [[ $folder == traces ]]; then cp -n "$CORPUS_SEED"/* "$corpus"/ 2>/dev/null || true; fi
  if [[ $folder == hwmodels ]]; then
    cp -n hwmodels/devices/*.textproto hwmodels/models/*.textproto "$corpus"/ 2>/dev/null || true
  fi
  echo "== $t ($RUNS runs, seed $SEED)"
  if ! (cd "$DIR" && ASAN_OPTIONS=detect_leaks=1 "./$folder/$t" -seed="$SEED" -runs="$RUNS" -max_total_time="$SECONDS_EACH" \
        -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="fuzz-crash-$t-" "fuzz-corpus/$t" 2>&1 | tail -n 12); then
    echo "!! $t found a crash (artifact in $DIR/fuzz-crash-$t-*)"
    status=1
  fi
done
exit $status
