"""Speed of the Python module against the CLI (docs/performance.md).

  PYTHONPATH=build/python python3 experiments/python/bench/overhead.py [build/servesim]

1. `simulate` on the whole Azure conversation trace (MI300X, Gemma 4 E2B):
   wall time of `servesim simulate ... --json` (the process, as a user runs
   it) against `servesim.simulate(...)` returning the same JSON; REPEATS
   interleaved rounds, best and median.
2. A run of 1M requests: the time of `Result.requests` (records to numpy
   columns to a DataFrame of 1M rows).
"""

import os
import statistics
import subprocess
import sys
import time

import servesim

BINARY = sys.argv[1] if len(sys.argv) > 1 else "build/servesim"
REPEATS = int(os.environ.get("REPEATS", "15"))
TRACE = "data/traces/AzureLLMInferenceTrace_conv.csv.gz"
FLAGS = dict(device="mi300x", model="gemma-4-e2b", max_model_len=16384, trace=TRACE)


def interleaved(fns):
    """REPEATS rounds, each fn once per round in turn (load on a shared
    machine hits both alike); the best and the median of each."""
    times = [[] for _ in fns]
    outs = [None] * len(fns)
    for _ in range(REPEATS):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            outs[i] = fn()
            times[i].append(time.perf_counter() - t)
    return [(min(t), statistics.median(t), o) for t, o in zip(times, outs)]


def main():
    argv = [BINARY, "simulate", "--device", "mi300x", "--model", "gemma-4-e2b",
            "--max-model-len", "16384", "--trace", TRACE, "--json",
            "--date", "19700101-000000"]  # the module's date (the CLI's default: now)
    (cli_s, cli_med, cli_out), (py_s, py_med, r) = interleaved([
        lambda: subprocess.run(argv, capture_output=True, check=True).stdout,
        lambda: servesim.simulate(**FLAGS)])
    assert r.json.encode() == cli_out, "module JSON differs from the CLI's"
    print(f"azure conv trace: {r.summary['completed']} requests, {REPEATS} rounds")
    print(f"  CLI simulate --json (process)  best {cli_s:.3f} s  median {cli_med:.3f} s")
    print(f"  servesim.simulate              best {py_s:.3f} s  median {py_med:.3f} s"
          f"  ({(py_s / cli_s - 1) * 100:+.1f}% / {(py_med / cli_med - 1) * 100:+.1f}%)")

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
