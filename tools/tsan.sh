#!/usr/bin/env bash
# ThreadSanitizer (Clang) build of the tests whose code runs on threads
# (sim/parallel.h users: sweep, plan, the calibration refits), in the build
# folder given as $1 (default build-tsan), then those tests with
# tools/tsan.supp. Exits non-zero on a build failure or any report.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-build-tsan}
JOBS=${JOBS:-$(nproc)}
TARGETS=(parallel_test sweep_test plan_test capacity_sim_test fitter_test validation_test)
cmake -S . -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSERVESIM_TSAN=ON \
  -DSERVESIM_BENCHMARKS=OFF -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$DIR" -j "$JOBS" --target "${TARGETS[@]}"
regex=$(IFS='|'; echo "^(${TARGETS[*]})\$")
# ctest names tests by suite.case; select by the executable instead.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(pwd)/tools/tsan.supp"
status=0
for t in "${TARGETS[@]}"; do
  exe=$(find "$DIR" -name "$t" -type f -perm -u+x | head -1)
  echo "== tsan: $t"
  (cd "$(pwd)" && "$exe" --gtest_brief=1) || status=1
done
exit $status
