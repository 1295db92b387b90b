#!/usr/bin/env bash
# ThreadSanitizer (Clang) build of the tests whose code runs on threads
# (sim/base/parallel.h users: sweep, plan, the calibration refits and the
# warm KV-state memo they share), in the build
# folder given as $1 (default build-tsan), then those tests with
# tools/tsan.supp. Exits non-zero on a build failure or any report.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-build-tsan}
JOBS=${JOBS:-$(nproc)}
TARGETS=(parallel_test sweep_test plan_test capacity_sim_test fitter_test bench_sim_test servesim)
TESTS=(parallel_test sweep_test plan_test capacity_sim_test fitter_test bench_sim_test)
cmake -S . -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSERVESIM_TSAN=ON -DSERVESIM_WERROR=ON \
  -DSERVESIM_BENCHMARKS=OFF -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$DIR" -j "$JOBS" --target "${TARGETS[@]}"
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$(pwd)/tools/tsan.supp"
status=0
for t in "${TESTS[@]}"; do
  exe=$(find "$DIR" -name "$t" -type f -perm -u+x | head -1)
  echo "== tsan: $t"
  "$exe" --gtest_brief=1 || status=1
done
# The held-out refits of one device on 2 threads: T4, whose report has
# the joint T4/L4 fit, every block refit (length, concurrency, model,
# device) and the cell refits, all through the same job pool
# (sim/base/parallel.h) that every other device's refits use, so it checks
# that pool's threading in about a minute under TSan, where the whole
# report took about 15 (docs/performance.md "CI budget"). Exit 0 or 3 (a
# point outside its tolerance) is fine, 66 is a ThreadSanitizer report.
echo "== tsan: servesim validate --device t4 -j 2"
rc=0
"$DIR/servesim" validate --device t4 -j 2 --no-progress >/dev/null || rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 3 ]; then
  echo "servesim validate under ThreadSanitizer: exit $rc"
  status=1
fi
exit $status
