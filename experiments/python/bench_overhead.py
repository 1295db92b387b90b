"""Speed of the Python module against the CLI (docs/performance.md).

  PYTHONPATH=build/python python3 experiments/python/bench_overhead.py [build/servesim]

1. `simulate` on the whole Azure conversation trace (MI300X, Gemma 4 E2B):
   wall time of `servesim simulate ... --json` (the process, as a user runs
   it) against `servesim.simulate(...)` returning the same JSON, and the
   time of `Result.requests` for its rows; best of REPEATS each.
2. A run of 1M requests: the time of `Result.requests` (records to numpy
   columns to a DataFrame of 1M rows).
"""

import os
import subprocess
import sys
import time

import servesim

BINARY = sys.argv[1] if len(sys.argv) > 1 else "build/servesim"
REPEATS = int(os.environ.get("REPEATS", "5"))
TRACE = "data/traces/AzureLLMInferenceTrace_conv.csv.gz"
FLAGS = dict(device="mi300x", model="gemma-4-e2b", max_model_len=16384, trace=TRACE)


def best(fn):
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main():
    argv = [BINARY, "simulate", "--device", "mi300x", "--model", "gemma-4-e2b",
            "--max-model-len", "16384", "--trace", TRACE, "--json"]
    cli_s, cli_out = best(lambda: subprocess.run(argv, capture_output=True, check=True).stdout)
    py_s, r = best(lambda: servesim.simulate(**FLAGS))
    assert r.json.encode() == cli_out, "module JSON differs from the CLI's"
    print(f"azure conv trace: {r.summary['completed']} requests")
    print(f"  CLI simulate --json (process)   {cli_s:.3f} s")
    print(f"  servesim.simulate               {py_s:.3f} s  ({(py_s / cli_s - 1) * 100:+.1f}%)")

    big = dict(device="mi300x", model="gemma-4-e2b", max_model_len=2048,
               num_prompts=1_000_000, random_input_len=64, random_output_len=4,
               request_rate=2000)
    t = time.perf_counter()
    r = servesim.simulate(**big)
    sim_s = time.perf_counter() - t
    t = time.perf_counter()
    df = r.requests
    build_s = time.perf_counter() - t
    print(f"1M-request run: simulate {sim_s:.2f} s; Result.requests ({len(df)} rows x "
          f"{len(df.columns)} columns) {build_s:.3f} s")


if __name__ == "__main__":
    main()
