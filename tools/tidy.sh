#!/usr/bin/env bash
# clang-tidy (checks in .clang-tidy) over servesim's own .cc files, with the
# compile commands of a configured Clang build folder given as $1 (default
# build-asan). Nothing is compiled: the only generated headers the sources
# include are protoc's, and this builds just those (servesim_proto_headers).
# Prints every finding once and their count.
#   TIDY_GATE=1   any finding (or a file clang-tidy cannot parse) exits 1;
#                 tools/run.sh test sets it.
#   TIDY_SCOPE    all (default): library sources and tests; lib: library
#                 sources only (no *_test.cc, no test helpers under tests/).
#   JOBS          parallel clang-tidy processes (default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-build-asan}
JOBS=${JOBS:-$(nproc)}
SCOPE=${TIDY_SCOPE:-all}
if [ ! -f "$DIR/compile_commands.json" ]; then
  echo "tools/tidy.sh: $DIR/compile_commands.json missing (configure a Clang build first)" >&2
  exit 2
fi
case "$SCOPE" in
  all | lib) ;;
  *) echo "tools/tidy.sh: TIDY_SCOPE=$SCOPE (allowed: all, lib)" >&2; exit 2 ;;
esac
cmake --build "$DIR" --target servesim_proto_headers >/dev/null
# Our .cc files that the build folder compiles (the fuzz targets and the
# Python module are in other builds).
mapfile -t files < <(git ls-files 'sim/*.cc' 'traces/*.cc' 'hwmodels/*.cc' 'calibration/*.cc' \
  'experiments/*.cc' 'tests/*.cc' 'proto/*.cc' | grep -v '/fuzz/' |
  if [ "$SCOPE" = lib ]; then grep -v -E '_test\.cc$|^tests/'; else cat; fi |
  while read -r f; do grep -q "\"file\": \"$(pwd)/$f\"" "$DIR/compile_commands.json" && echo "$f"; done)
log=$(mktemp)
status=0
run-clang-tidy -p "$DIR" -j "$JOBS" -quiet "${files[@]/#/$(pwd)/}" >"$log" 2>&1 || status=$?
# run-clang-tidy 14 always asks for colour; a finding in a header is
# reported once per file that includes it.
findings=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '(warning|error): ' | sort -u || true)
rm -f "$log"
n=0
[ -n "$findings" ] && n=$(wc -l <<<"$findings")
if [ "$status" != 0 ] || [ "$n" != 0 ]; then
  [ -n "$findings" ] && echo "$findings"
  echo "clang-tidy: $n findings over ${#files[@]} files (run-clang-tidy exit $status)"
  [ "${TIDY_GATE:-0}" = 1 ] && exit 1
  exit 0
fi
echo "clang-tidy: 0 findings over ${#files[@]} files"
