// Reader throughput (rows/s on one core) and memory flatness.
//   ./build/traces/reader_benchmark
// Files are generated once in /tmp (Azure-like CSV, Mooncake-like JSONL
// with ~24 hash ids a line as in the real conversation trace) and removed
// at exit.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "traces/trace_reader.h"

namespace servesim {
namespace {

std::string TmpPath(const char* name) {
  return absl::StrCat("/tmp/servesim_bench_", ::getpid(), "_", name);
}

// Streams `rows` Azure 2023 rows (CRLF, 7-digit fractions) to `path`.
void WriteAzure(const std::string& path, int64_t rows) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fputs("TIMESTAMP,ContextTokens,GeneratedTokens\r\n", f);
  uint64_t x = 12345;
  int64_t t_100ns = 0;
  for (int64_t i = 0; i < rows; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    t_100ns += static_cast<int64_t>((x >> 33) % 400'000);  // < 40 ms gaps
    const int64_t s = t_100ns / 10'000'000;
    const int64_t frac = t_100ns % 10'000'000;
    const int64_t day = 16 + s / 86400;  // 10M rows span ~2.3 days
    const int64_t sod = s % 86400;
    std::fprintf(f, "2023-11-%02lld %02lld:%02lld:%02lld.%07lld,%llu,%llu\r\n",
                 static_cast<long long>(day), static_cast<long long>(sod / 3600),
                 static_cast<long long>(sod / 60 % 60), static_cast<long long>(sod % 60),
                 static_cast<long long>(frac),
                 static_cast<unsigned long long>(1 + (x >> 20) % 8000),
                 static_cast<unsigned long long>(1 + (x >> 45) % 1000));
  }
  std::fclose(f);
}

// Streams `rows` Mooncake lines with ceil(input / 512) hash ids each.
void WriteMooncake(const std::string& path, int64_t rows) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  uint64_t x = 999;
  int64_t t_ms = 0;
  int64_t next_id = 0;
  std::string line;
  for (int64_t i = 0; i < rows; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    t_ms += static_cast<int64_t>((x >> 40) % 600);
    const int64_t input = 1 + static_cast<int64_t>((x >> 20) % 24000);
    const int64_t blocks = (input + 511) / 512;
    line =
        absl::StrCat("{\"timestamp\": ", t_ms, ", \"input_length\": ", input,
                     ", \"output_length\": ", 1 + (x >> 50) % 800, ", \"hash_ids\": [");
    for (int64_t b = 0; b < blocks; ++b) {
      // Half of the prompts share their first blocks with earlier ones.
      const int64_t id = (b < 4 && (x & 1)) ? b : next_id++;
      absl::StrAppend(&line, b ? ", " : "", id);
    }
    line += "]}\n";
    std::fwrite(line.data(), 1, line.size(), f);
  }
  std::fclose(f);
}

struct Files {
  std::string azure = TmpPath("azure.csv");
  std::string mooncake = TmpPath("mooncake.jsonl");
  Files() {
    WriteAzure(azure, 1'000'000);
    WriteMooncake(mooncake, 1'000'000);
  }
  ~Files() {
    std::remove(azure.c_str());
    std::remove(mooncake.c_str());
  }
};

const Files& GetFiles() {
  static const Files files;  // removed by its destructor at exit
  return files;
}

int64_t ReadAll(TraceFormat format, const std::string& path, benchmark::State& state) {
  ReaderOptions opts;
  opts.path = path;
  auto reader = OpenTraceReader(format, opts);
  if (!reader.ok()) {
    state.SkipWithError(std::string(reader.status().message()).c_str());
    return 0;
  }
  RequestSpec r;
  int64_t n = 0;
  int64_t tokens = 0;
  while (true) {
    auto got = (*reader)->Next(r);
    if (!got.ok()) {
      state.SkipWithError(std::string(got.status().message()).c_str());
      return n;
    }
    if (!*got) break;
    tokens += r.input_tokens;
    ++n;
  }
  benchmark::DoNotOptimize(tokens);
  return n;
}

void BM_AzureCsv(benchmark::State& state) {
  const std::string& path = GetFiles().azure;
  int64_t rows = 0;
  for (auto _ : state) rows += ReadAll(TraceFormat::kAzure, path, state);
  state.SetItemsProcessed(rows);
}
BENCHMARK(BM_AzureCsv)->Unit(benchmark::kMillisecond);

void BM_MooncakeJsonl(benchmark::State& state) {
  const std::string& path = GetFiles().mooncake;
  int64_t rows = 0;
  for (auto _ : state) rows += ReadAll(TraceFormat::kMooncake, path, state);
  state.SetItemsProcessed(rows);
}
BENCHMARK(BM_MooncakeJsonl)->Unit(benchmark::kMillisecond);

double MaxRssMb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}

// Memory stays flat: reading a 10-million-row file raises the peak RSS by
// a few MB (the line buffer), not by the file size.
void BM_TenMillionRowsMemoryFlat(benchmark::State& state) {
  const std::string path = TmpPath("azure10m.csv");
  WriteAzure(path, 10'000'000);
  int64_t rows = 0;
  const double before = MaxRssMb();
  for (auto _ : state) rows += ReadAll(TraceFormat::kAzure, path, state);
  const double after = MaxRssMb();
  std::remove(path.c_str());
  state.SetItemsProcessed(rows);
  state.counters["rows"] = static_cast<double>(rows);
  state.counters["max_rss_before_mb"] = before;
  state.counters["max_rss_after_mb"] = after;
  state.counters["rss_growth_mb"] = after - before;
}
BENCHMARK(BM_TenMillionRowsMemoryFlat)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace servesim
