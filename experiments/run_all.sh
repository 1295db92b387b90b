#!/usr/bin/env bash
# Runs every experiment in experiments/configs/ through the simulator and
# writes tables (markdown + CSV) and plots (SVG + PNG, gnuplot) into
# experiments/results/. Reproduces both write-ups (predicted next to
# measured) and the what-ifs they did not run.
#   bash experiments/run_all.sh
# Environment: SERVESIM (binary; default build/servesim, built if missing),
# JOBS (sweep threads, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SERVESIM:-build/servesim}
JOBS=${JOBS:-2}
CONF=experiments/configs
OUT=experiments/results
if [ ! -x "$BIN" ]; then
  cmake -S . -B build -G Ninja -DSERVESIM_BENCHMARKS=OFF >/dev/null
  cmake --build build --target servesim -j "$JOBS"
  BIN=build/servesim
fi
mkdir -p "$OUT"

sweep() {  # name [grid file, default $CONF/name.grid.textproto]
  echo "== $1" >&2
  # Start fresh: a sweep resumes finished points by config hash, which does
  # not see changes in the code or the calibration profiles.
  rm -rf "${OUT:?}/$1"
  "$BIN" sweep --grid "${2:-$CONF/$1.grid.textproto}" --out "$OUT/$1" --jobs "$JOBS" --no-progress
}

# The price servesim pays for a device at a tier (experiments/capacity/cost.h
# SelectOffer): the cheapest listed offer of that tier or on-demand.
price() {  # device tier
  tr '\n' ' ' < "hwmodels/devices/$1.textproto" |
    grep -oE "tier: \"($2|on-demand)\" *usd_per_hour: [0-9.]*" | awk '{print $NF}' |
    sort -g | head -1
}

# awk prelude: column indices by header name (results.csv of a sweep), and
# number formatting. Only rows whose status is "ok" have metrics.
AWK_COLS='
function hdr(   i) { for (i = 1; i <= NF; i++) C[$i] = i }
function v(name) { return $(C[name]) }
function f(x, d) { return sprintf("%." d "f", x) }
function pct(p, m) { return sprintf("%+.1f%%", 100 * (p - m) / m) }
'

plot() {  # name script
  for term in svg png; do
    if [ $term = svg ]; then t='svg size 800,500 dynamic font "sans,12"'; else t='pngcairo size 800,500'; fi
    gnuplot -e "set terminal $t; set output '$OUT/$1.$term'" -e "$2" 2>/dev/null \
      || echo "gnuplot: $1.$term not written" >&2
  done
}

# ---------------------------------------------------------------- write-up A
# The 16 CLI calls of write-up A start at once: each costs the 0.62 s timed
# one call at a time plus the contention `servesim validate` fits for that
# client (parallel_call_extra_s, one value shared by the T4 and L4 profiles).
extra=$(awk '
  /^parameters \{/ { inb = 1; name = ""; val = 0; next }   # proto3 omits a value of 0
  inb && /^  name:/ { name = $2; gsub(/"/, "", name) }
  inb && /^  value:/ { val = $2 }
  inb && /^\}/ { if (name == "parallel_call_extra_s") { print val; found = 1 } inb = 0 }
  END { if (!found) print 0 }' calibration/profiles/t4.textproto)
call_s=$(awk -v e="${extra:-0}" 'BEGIN { printf "%.4f", 0.62 + e }')
sed "s/client_overhead_s: 0.62/client_overhead_s: $call_s/" "$CONF/writeup_a_t4_vs_l4.grid.textproto" \
  > "$OUT/.writeup_a.grid.textproto"
sweep writeup_a_t4_vs_l4 "$OUT/.writeup_a.grid.textproto"
awk -F, "$AWK_COLS"'
  FNR == 1 && NR == 1 { next }  # measured header
  NR == FNR { mt[$1 "," $2] = $3; mc[$1 "," $2] = $4; pr[$1 "," $2] = $5; next }
  FNR == 1 { hdr(); print "model,device,usd_per_hour,predicted_output_tok_s,measured_output_tok_s,predicted_usd_per_m_output,measured_usd_per_m_output,error"; next }
  {
    k = v("model") "," v("device")
    if (v("status") != "ok") { print k ",,,,,,does not fit"; next }
    p = v("output_throughput")
    if (k in pr) {
      c = pr[k] / (p * 3600) * 1e6
      print k "," pr[k] "," f(p, 1) "," mt[k] "," f(c, 3) "," mc[k] "," pct(c, mc[k])
    } else {
      print k ",," f(p, 1) ",,,,"
    }
  }' "$CONF/measured_writeup_a.csv" "$OUT/writeup_a_t4_vs_l4/results.csv" \
  > "$OUT/writeup_a_cost_per_token.csv"
{
  echo "| model | device | \$/h | predicted out tok/s | measured | predicted \$/1M out | measured \$/1M out | error |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|"
  tail -n +2 "$OUT/writeup_a_cost_per_token.csv" | awk -F, '{printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1,$2,$3,$4,$5,$6,$7,$8}'
} > "$OUT/writeup_a_cost_per_token.md"
awk -F, 'NR > 1 && $6 != "" { print $7, $6, $1 "/" $2 }' "$OUT/writeup_a_cost_per_token.csv" \
  > "$OUT/.a_plot.dat"
plot writeup_a_cost_per_token "
  set title 'Write-up A: \$ per 1M output tokens at 16 concurrent requests';
  set xlabel 'measured (\$)'; set ylabel 'predicted by servesim (\$)'; set key top left;
  set xrange [0:1.2]; set yrange [0:1.2]; set grid;
  plot x title 'predicted = measured' lw 1 dt 2 lc rgb 'gray',
       '$OUT/.a_plot.dat' using 1:2 with points pt 7 ps 1.5 title 'T4 / L4, E2B / E4B / 12B',
       '' using 1:2:3 with labels offset 0,1 font ',9' notitle"

# ---------------------------------------------------------------- write-up B
sweep writeup_b_mi300x_grid
awk -F, "$AWK_COLS"'
  FNR == 1 && NR == 1 { next }
  NR == FNR { m[$1 "," $2] = $3; next }
  FNR == 1 { hdr(); print "input_len,concurrency,predicted_output_tok_s,measured_output_tok_s,error,predicted_p99_ttft_ms,predicted_mean_tpot_ms,failed"; next }
  {
    k = v("input_len") "," v("concurrency")
    if (v("status") != "ok") {  # rejected by the flag checks (input + output > max_model_len)
      print k ",infeasible,infeasible (measured),,,,," v("status"); next
    }
    p = v("output_throughput")
    if (v("completed") == 0) { print k ",infeasible,infeasible,,,," v("failed"); next }
    print k "," f(p, 1) "," m[k] "," ((k in m) ? pct(p, m[k]) : "") "," f(v("p99_ttft_ms"), 2) "," f(v("mean_tpot_ms"), 3) "," v("failed")
  }' "$CONF/measured_writeup_b_mi300x.csv" "$OUT/writeup_b_mi300x_grid/results.csv" \
  > "$OUT/writeup_b_mi300x_grid.csv"
{
  echo "| input | concurrency | predicted out tok/s | measured | error | predicted p99 TTFT ms | predicted mean TPOT ms |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  tail -n +2 "$OUT/writeup_b_mi300x_grid.csv" | awk -F, '{printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1,$2,$3,$4,$5,$6,$7}'
} > "$OUT/writeup_b_mi300x_grid.md"
plot writeup_b_mi300x_grid "
  set datafile separator ',';
  set title 'Write-up B: MI300X, Gemma 4 E2B, output tokens/s (lines: servesim, points: measured)';
  set xlabel 'concurrent streams'; set ylabel 'output tokens/s'; set logscale xy; set grid;
  set key top left; set xtics (1, 4, 16, 64);
  plot for [L in '128 1024 8192'] '$OUT/writeup_b_mi300x_grid.csv' using (\$1 == L+0 ? \$2 : NaN):3 with linespoints title 'predicted, '.L.' in',
       for [L in '128 1024 8192'] '$OUT/writeup_b_mi300x_grid.csv' using (\$1 == L+0 ? \$2 : NaN):4 with points pt 7 ps 1.3 title 'measured, '.L.' in'"

sweep writeup_b_per_dollar
awk -F, "$AWK_COLS"'
  FNR == 1 && NR == 1 { next }
  NR == FNR { m[$1 "," $2] = $3; pu[$1] = $4; pk[$1] = $5; od[$1] = $6; next }
  FNR == 1 { hdr(); print "device,concurrency,predicted_output_tok_s,measured_output_tok_s,price_used,price_kind,predicted_tok_s_per_usd_h,measured_tok_s_per_usd_h,on_demand_usd_per_hour,predicted_tok_s_per_usd_h_on_demand,measured_tok_s_per_usd_h_on_demand"; next }
  {
    d = v("device"); k = d "," v("concurrency")
    if (v("status") != "ok") { print k ",error"; next }
    p = v("output_throughput")
    mm = (k in m) ? m[k] : ""
    print k "," f(p, 1) "," mm "," pu[d] "," pk[d] "," f(p / pu[d], 0) "," (mm == "" ? "" : f(mm / pu[d], 0)) "," od[d] "," f(p / od[d], 0) "," (mm == "" ? "" : f(mm / od[d], 0))
  }' "$CONF/measured_writeup_b_per_dollar.csv" "$OUT/writeup_b_per_dollar/results.csv" \
  > "$OUT/writeup_b_per_dollar.csv"
{
  echo "Output tokens/s per \$/h, 1,024 in / 128 out (predicted / measured). Prices as write-up B's first table (v5e and L4 spot), then all on-demand."
  echo
  echo "| device | concurrency | predicted tok/s | measured tok/s | price used | predicted per \$/h | measured per \$/h | on-demand \$/h | predicted per \$/h on-demand | measured per \$/h on-demand |"
  echo "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"
  tail -n +2 "$OUT/writeup_b_per_dollar.csv" | awk -F, '{printf "| %s | %s | %s | %s | $%s %s | %s | %s | $%s | %s | %s |\n", $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11}'
} > "$OUT/writeup_b_per_dollar.md"
plot writeup_b_per_dollar "
  set datafile separator ',';
  set title 'Write-up B: output tok/s per \$/h (price as used in the write-up)';
  set xlabel 'concurrent streams'; set ylabel 'output tok/s per \$/h'; set logscale x; set grid;
  set key top left; set xtics (1, 4, 16, 64);
  plot for [D in 'mi300x tpu-v5e tpu-v6e l4'] '$OUT/writeup_b_per_dollar.csv' using (strcol(1) eq D ? \$2 : NaN):7 with linespoints title 'predicted '.D,
       for [D in 'mi300x tpu-v5e tpu-v6e l4'] '$OUT/writeup_b_per_dollar.csv' using (strcol(1) eq D ? \$2 : NaN):8 with points pt 7 ps 1.3 title 'measured '.D"

# ----------------------------------------------------------------- what-ifs
sweep whatif_26b_a4b_on_l4
L4=$(price l4 on-demand)
awk -F, -v price="$L4" "$AWK_COLS"'
  FNR == 1 { hdr(); print "input_len,concurrency,output_tok_s,p99_ttft_ms,mean_tpot_ms,preemptions,usd_per_m_output"; next }
  v("status") != "ok" { print v("input_len") "," v("concurrency") ",error"; next }
  { p = v("output_throughput"); print v("input_len") "," v("concurrency") "," f(p, 1) "," f(v("p99_ttft_ms"), 1) "," f(v("mean_tpot_ms"), 2) "," v("preemptions") "," f(price / (p * 3600) * 1e6, 3) }
' "$OUT/whatif_26b_a4b_on_l4/results.csv" > "$OUT/whatif_26b_a4b_on_l4.csv"
{
  echo "Gemma 4 26B A4B (W4A16, 4-bit embeddings) on one L4, 256 output tokens; \$/1M at \$$L4/h (the cheapest listed on-demand offer). Predicted only (no measurement exists)."
  echo
  echo "| input | concurrency | output tok/s | p99 TTFT ms | mean TPOT ms | preemptions | \$/1M output |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  tail -n +2 "$OUT/whatif_26b_a4b_on_l4.csv" | awk -F, '{printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1,$2,$3,$4,$5,$6,$7}'
} > "$OUT/whatif_26b_a4b_on_l4.md"
plot whatif_26b_a4b_on_l4 "
  set datafile separator ',';
  set title 'What-if: Gemma 4 26B A4B on one L4 (predicted)';
  set xlabel 'concurrent streams'; set ylabel 'output tokens/s'; set logscale x; set grid;
  set key top left; set xtics (1, 4, 16, 32);
  plot for [L in '128 1024 4096'] '$OUT/whatif_26b_a4b_on_l4.csv' using (\$1 == L+0 ? \$2 : NaN):3 with linespoints title L.' input tokens'"

sweep whatif_e2b_azure_conv
# The replayed 3,000 requests' own mean rate (the row label of rate 0).
TRACE_RATE=$("$BIN" trace stats --max-requests 3000 data/traces/AzureLLMInferenceTrace_conv.csv.gz \
  | awk '/^mean rate:/ { printf "%.1f", $3 }')
{
  echo "device,rate_rps,usd_per_hour,completed,failed,p99_ttft_ms,p99_tpot_ms,output_tok_s,usd_per_m_output"
  for d in t4 l4 mi300x tpu-v5e tpu-v6e; do echo "$d $(price $d on-demand)"; done \
    | awk -F, "$AWK_COLS"'
      NR == FNR { split($0, a, " "); pr[a[1]] = a[2]; next }
      FNR == 1 { hdr(); next }
      v("status") != "ok" { print v("device") "," v("rate_rps") ",error"; next }
      { d = v("device"); p = v("output_throughput")
        print d "," (v("rate_rps") == 0 ? "trace (" rate ")" : v("rate_rps")) "," pr[d] "," v("completed") "," v("failed") "," f(v("p99_ttft_ms"), 1) "," f(v("p99_tpot_ms"), 2) "," f(p, 1) "," f(pr[d] / (p * 3600) * 1e6, 3) }
    ' rate="$TRACE_RATE" - "$OUT/whatif_e2b_azure_conv/results.csv"
} > "$OUT/whatif_e2b_azure_conv.csv"
{
  echo "Gemma 4 E2B, one replica per device, Azure conversation trace (first 3,000 requests, whose own mean rate is $TRACE_RATE req/s; own timeline, then rescaled to 10.8 req/s). On-demand prices. Predicted only."
  echo
  echo "| device | rate req/s | \$/h | completed | failed | p99 TTFT ms | p99 TPOT ms | output tok/s | \$/1M output |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
  tail -n +2 "$OUT/whatif_e2b_azure_conv.csv" | awk -F, '{printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1,$2,$3,$4,$5,$6,$7,$8,$9}'
} > "$OUT/whatif_e2b_azure_conv.md"

for tier in on-demand spot; do
  echo "== plan: cheapest fleet for 10 req/s within 1 s TTFT p99 ($tier)" >&2
  args=(plan --request-rate 10 --random-input-len 1024 --random-output-len 128 --num-prompts 3000
        --seed 1 --model gemma-4-e2b --max-model-len 8192 --slo 'ttft_p99<=1s'
        --price "$tier" --max-replicas 8 --jobs "$JOBS")
  "$BIN" "${args[@]}" > "$OUT/whatif_cheapest_10rps_$tier.txt"
  "$BIN" "${args[@]}" --json > "$OUT/whatif_cheapest_10rps_$tier.json"
done

# ------------------------------------------------- the real multi-chip check
# Llama-3.1-405B-FP8 at tensor parallel 8 on 8x H100 SXM and 8x MI300X
# (dstack's `vllm bench serve` files, data/bench/dstack-llama405b/; the
# model from its public config.json). calibrate fits the device's free
# parameters to each file; with one cell per file its held-out column is
# the prediction of the refit without that cell, i.e. of the device's
# priors alone: for the H100 (no shipped profile) the datasheet numbers.
# Both servers are vLLM 0.6.3 (the V0 engine, which servesim's V1 scheduler
# approximates), the MI300X one with 15-step multi-step scheduling, so its
# TPOT / ITL come in 15-token chunks that servesim does not model. V0 has
# no async scheduling (no batch queue): --no-async-scheduling.
for pair in h100-sxm:h100x8 mi300x:mi300x8; do
  dev=${pair%%:*} file=${pair#*:}
  echo "== dstack 405B: $dev TP8" >&2
  "$BIN" calibrate --device "$dev" --model data/models/llama-3.1-405b-fp8/config.json \
    --quantization fp8 --tensor-parallel-size 8 --software-build vllm-0.6.3 --no-async-scheduling \
    --bench "data/bench/dstack-llama405b/$file-16qps.json.gz" \
    --out "$OUT/dstack_405b_$dev.profile.textproto" --overwrite --jobs "$JOBS" --no-progress \
    > "$OUT/dstack_405b_$dev.txt" || [ $? = 3 ]  # 3: points miss their tolerance
done

rm -f "$OUT/.a_plot.dat" "$OUT/.writeup_a.grid.textproto"
echo "== done: tables and plots in $OUT" >&2
