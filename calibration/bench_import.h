// Turns `vllm bench serve` result files (read by traces' ReadBenchResult,
// any client version's keys) into measurements the fitter can use:
// the cell (concurrency, prompts, input/output lengths) and its output
// throughput, median TTFT and median TPOT.
#ifndef SERVESIM_CALIBRATION_BENCH_IMPORT_H_
#define SERVESIM_CALIBRATION_BENCH_IMPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/calibration.pb.h"
#include "traces/bench_result.h"

namespace servesim {

// What a result file says about its cell, and how it was inferred.
struct ImportedCell {
  std::string path;
  // The measurements' id prefix; empty: the file name (callers set the
  // path's parent too when two files share a name).
  std::string id_stem;
  std::string model_id;         // "" when the file has none
  int64_t num_prompts = 0;      // completed requests
  int32_t max_concurrency = 0;  // 0: none (open loop)
  double request_rate = 0;      // +inf for "inf"
  double input_tokens = 0;      // mean per request
  double output_tokens = 0;
  bool fixed_lengths = true;     // every request had the same lengths
  bool has_per_request = false;  // input_lens / ttfts / itls arrays present
  double burstiness = 1;         // the file's "burstiness" (1 when absent)
  // The file's input_lens / output_lens (send order), empty without them.
  std::vector<int32_t> input_lens, output_lens;
  // The file's start_times (s, as written) and errors ("" = success), empty
  // without them; same length as input_lens.
  std::vector<double> start_times;
  std::vector<std::string> errors;
  // The file's ttfts (s), empty without them; same length as input_lens.
  std::vector<double> ttfts;
  double output_throughput = 0, total_throughput = 0;
  double median_ttft_ms = 0, median_tpot_ms = 0;  // 0: absent
  // Reported, not fitted (0: absent): the rest of the latency summary.
  double mean_ttft_ms = 0, p99_ttft_ms = 0, mean_tpot_ms = 0;
  double median_itl_ms = 0, p99_itl_ms = 0;
  std::string inferred;  // which keys the lengths/concurrency came from
};

// Reads one file. InvalidArgument, naming the file, the key and the allowed
// range, when a key the cell is built from is out of range: completed and
// num_prompts (>= completed) positive integers, duration > 0,
// max_concurrency null or a positive integer, request_rate "inf" or a
// number > 0, token totals and per-request lengths non-negative integers,
// output_throughput / total_token_throughput / median_ttft_ms /
// median_tpot_ms finite and >= 0 (0: not measured). A string, NaN or
// Infinity where a number is needed is an error too.
absl::StatusOr<ImportedCell> ImportBenchFile(const std::string& path);

// Measurements of `cell` on `run_id`: output throughput, median TTFT and
// median TPOT when present (fit: true, tolerance_pct: `tolerance_pct`),
// and mean / p99 TTFT, mean TPOT, median / p99 ITL when present (fit:
// false, tolerance 0: reported beside them); a closed loop (request rate
// inf) or an open loop (the file's request_rate and burstiness, with its
// max_concurrency if any), of fixed lengths or of the file's per-request
// lengths. A request with an error is left out: it is taken to have cost
// the server nothing, so an open loop whose arrivals are drawn is sent at
// the file's request_rate x kept / all. A request without an error that
// streamed no token (0 output tokens) was prefilled and ended at once: it
// is replayed as a one-token request and left out of the metrics
// (ClientMethod.unmeasured). With either, the median TTFT is taken over the
// measured requests' ttfts (and so are the mean and p99), since older
// clients count a request that
// streamed no token with a TTFT of 0. An open
// loop without a concurrency limit is sent at the file's start_times when
// it has them (replayed exactly); with a limit vLLM's start times follow
// the measured server and are not used.
// FailedPrecondition (with the reason) when the lengths vary by request
// and the file has no per-request arrays to replay.
absl::StatusOr<std::vector<servesim::proto::Measurement>> CellMeasurements(
    const ImportedCell& cell, const std::string& run_id, double tolerance_pct);

}  // namespace servesim

#endif  // SERVESIM_CALIBRATION_BENCH_IMPORT_H_
