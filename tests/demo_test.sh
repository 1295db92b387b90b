#!/bin/bash
# The demo's presentation (bash tools/run.sh demo with its build skipped):
# validate's misses are listed as known gaps with their size and the demo
# exits 0; a validate that fails (any exit but 0 and 3) fails the demo.
# Usage: demo_test.sh SOURCE_DIR SERVESIM_BINARY
set -uo pipefail
src=$1 bin=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "demo_test: $*" >&2; exit 1; }
demo() {  # binary, validate flags -> $tmp/out, returns the demo's exit code
  SERVESIM_BIN=$1 DEMO_VALIDATE_ARGS=$2 DEMO_WHATIFS=0 \
    bash "$src/tools/run.sh" demo >"$tmp/out" 2>&1
}

# 1. A report with two misses (exit 3): shown as two gaps with their size.
cat >"$tmp/misses" <<'REPORT'
t4/decode_rate/e2b                                  108.5      118.1    +8.9      119.8   +10.4 10.00  MISS
t4/cost_per_mtok_16par/e2b                          0.260      0.235    -9.5      0.230   -11.6 10.00  MISS (not fitted)
t4/median_ttft_ms/e2b                               100.0      101.0    +1.0      101.0    +1.0 10.00  ok
5 checks, 2 missed: SOME POINTS MISS THEIR TOLERANCE
REPORT
printf '#!/bin/bash\ncat %q; exit 3\n' "$tmp/misses" >"$tmp/stub3"
chmod +x "$tmp/stub3"
demo "$tmp/stub3" "" || fail "misses (validate exit 3) made the demo fail: $(cat "$tmp/out")"
grep -q "== known gaps: 2 checks outside their tolerance" "$tmp/out" ||
  fail "no known-gaps header for 2 misses: $(cat "$tmp/out")"
grep -q "^  t4/decode_rate/e2b 108.5 118.1 +8.9 119.8 +10.4 10.00 MISS$" "$tmp/out" ||
  fail "gap t4/decode_rate/e2b not listed with its size"
grep -q "^  t4/cost_per_mtok_16par/e2b .* -11.6 10.00 MISS (not fitted)$" "$tmp/out" ||
  fail "gap t4/cost_per_mtok_16par/e2b not listed with its size"
grep -q "^  t4/median_ttft_ms" "$tmp/out" && fail "a check within tolerance listed as a gap"

# 2. A validate that fails (exit 2) fails the demo.
printf '#!/bin/bash\necho "servesim validate: error: bad" >&2; exit 2\n' >"$tmp/stub2"
chmod +x "$tmp/stub2"
demo "$tmp/stub2" "" && fail "a failing validate (exit 2) left the demo at exit 0"

# 3. The real binary on one device, without the held-out refits (cheap):
# exit 0, and as many gaps listed as validate counts.
demo "$bin" "--device t4 --no-held-out -j 1" ||
  fail "the demo on t4 failed: $(tail -20 "$tmp/out")"
missed=$(sed -n 's/^[0-9]* checks, \([0-9]*\) missed.*/\1/p' "$tmp/out" | tail -1)
[ -n "$missed" ] || fail "validate printed no summary line"
if [ "$missed" = 0 ]; then
  grep -q "== known gaps: none" "$tmp/out" || fail "no 'known gaps: none' line"
else
  grep -q "== known gaps: $missed checks outside their tolerance" "$tmp/out" ||
    fail "no known-gaps header for $missed misses"
fi
echo "demo_test: OK"
