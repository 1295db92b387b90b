"""Tests of the Python module servesim against the servesim binary.

Run by CTest (python_module_test), which sets PYTHONPATH to build/python,
SERVESIM_BINARY to the CLI and SERVESIM_DATA_DIR to the repository's data/.
"""

import concurrent.futures
import io
import json
import os
import subprocess
import threading
import time

import numpy as np
import pandas as pd
import pytest

import servesim

BINARY = os.environ.get("SERVESIM_BINARY", "build/servesim")
DATA = os.environ.get("SERVESIM_DATA_DIR", "data")
AZURE_CONV = os.path.join(DATA, "traces", "AzureLLMInferenceTrace_conv.csv.gz")

SMALL = dict(device="l4", model="gemma-4-e2b", max_model_len=4096, num_prompts=40,
             max_concurrency=8, random_input_len=256, random_output_len=32, seed=7)


def run_cli(*args):
    args = [str(a) for a in args]
    # The CLI dates its JSON with the current time unless --date pins it; the
    # module pins 19700101-000000 by default (reproducible output).
    if args and args[0] == "simulate" and "--date" not in args:
        args += ["--date", "19700101-000000"]
    return subprocess.run([BINARY, *args], capture_output=True, check=False)


def cli_args(flags):
    out = []
    for k, v in flags.items():
        for item in v if isinstance(v, (list, tuple)) else [v]:
            out += ["--" + k.replace("_", "-"), str(item)]
    return out


# --- simulate: the same bytes as the CLI ---------------------------------

@pytest.mark.parametrize("flags", [
    SMALL,
    dict(SMALL, device="t4", quantization="w4a16-emb4", request_rate=4, burstiness=0.5),
    dict(device="mi300x", model="gemma-4-e2b", max_model_len=16384, trace=AZURE_CONV,
         num_prompts=300, request_rate=20),
    # vLLM's --label and --goodput keys (label, request_goodput).
    dict(SMALL, request_rate=8, label="my-run", goodput=["ttft:40", "tpot:30"]),
])
def test_simulate_json_equals_cli_bytes(flags):
    cli = run_cli("simulate", *cli_args(flags), "--json")
    assert cli.returncode == 0, cli.stderr
    r = servesim.simulate(**flags)
    assert r.json.encode() == cli.stdout
    assert r.summary == json.loads(cli.stdout)
    if "label" in flags:
        assert r.summary["label"] == flags["label"]
        assert r.summary["request_goodput"] is not None
        assert 0 < r.summary["request_goodput"] < r.summary["request_throughput"]
    for key in ("completed", "request_throughput", "output_throughput", "mean_ttft_ms",
                "p99_ttft_ms", "mean_tpot_ms", "median_itl_ms", "p99_e2el_ms"):
        assert key in r.summary


def test_simulate_detailed_equals_save_result_file(tmp_path):
    path = tmp_path / "r.json"
    cli = run_cli("simulate", *cli_args(SMALL), "--save-result", path, "--save-detailed")
    assert cli.returncode == 0, cli.stderr
    r = servesim.simulate(detailed=True, **SMALL)
    assert r.json.encode() == path.read_bytes()
    assert len(r.summary["ttfts"]) == SMALL["num_prompts"]
    # The resolved config, as the CLI writes it beside the result.
    assert r.config == (tmp_path / "r.json.config.textproto").read_text()


def test_config_dict_text_and_file_equal_the_flags(tmp_path):
    config = {"server": {"device": "l4", "model": "gemma-4-e2b", "max_model_len": 4096},
              "client": {"num_prompts": 40, "max_concurrency": 8, "random_input_len": 256,
                         "random_output_len": 32, "seed": 7}}
    text = servesim.to_textproto(config)
    file = tmp_path / "exp.textproto"
    file.write_text(text)
    expected = run_cli("simulate", "--set", text, "--json").stdout
    assert servesim.simulate(**SMALL).json.encode() == expected
    assert servesim.simulate(config).json.encode() == expected
    assert servesim.simulate(text).json.encode() == expected
    assert servesim.simulate(file).json.encode() == expected
    # Explicit flags win over the config, as on the command line.
    both = servesim.simulate(config, max_concurrency=2)
    assert both.json.encode() == run_cli("simulate", "--config", file, "--max-concurrency",
                                         2, "--json").stdout
    assert both.summary["max_concurrency"] == 2


# --- requests and steps ----------------------------------------------------

def test_requests_columns_and_dtypes_are_the_documented_ones():
    r = servesim.simulate(**SMALL)
    df = r.requests
    assert list(df.columns) == list(servesim.REQUEST_COLUMNS)
    assert {c: str(t) for c, t in df.dtypes.items()} == servesim.REQUEST_COLUMNS
    assert len(df) == SMALL["num_prompts"]
    assert list(df.status.cat.categories) == ["ok", "invalid_lengths",
                                              "exceeds_max_model_len", "exceeds_kv_cache",
                                              "exceeds_max_num_batched_tokens"]


def test_requests_equal_the_requests_csv(tmp_path):
    # Trace requests longer than max_model_len are rejected: both statuses.
    flags = dict(device="mi300x", model="gemma-4-e2b", max_model_len=1024, trace=AZURE_CONV,
                 num_prompts=300, request_rate=20)
    csv = tmp_path / "req.csv"
    cli = run_cli("simulate", *cli_args(flags), "--requests-csv", csv)
    r = servesim.simulate(**flags)
    expected = pd.read_csv(csv, float_precision="round_trip")
    df = r.requests
    assert len(df) == len(expected)
    assert (df.status == "exceeds_max_model_len").any() and (df.status == "ok").any()
    assert list(df.status.astype(str)) == list(expected.status)
    for col in servesim.REQUEST_COLUMNS:
        if col == "status":
            continue
        np.testing.assert_array_equal(df[col].to_numpy(), expected[col].to_numpy(),
                                      err_msg=col)


def test_steps_record_batches_and_leave_the_result_unchanged():
    plain = servesim.simulate(**SMALL)
    r = servesim.simulate(steps=True, **SMALL)
    assert plain.steps is None
    assert r.json == plain.json
    s = r.steps
    assert list(s.columns) == list(servesim.STEP_COLUMNS)
    assert {c: str(t) for c, t in s.dtypes.items()} == servesim.STEP_COLUMNS
    assert len(s) > 0
    assert (s.num_seqs <= 8).all()  # max_concurrency
    assert (s.kv_used_blocks <= s.kv_total_blocks).all()
    assert (s.num_prefills + s.num_decodes == s.num_seqs).all()
    # Every prompt and output token is computed in some step (no preemption
    # or prefix hit in this run).
    assert r.requests.preemptions.sum() == 0
    tokens = r.requests.input_tokens.sum() + r.requests.output_tokens.sum()
    hits = r.requests.prefix_hit_tokens.sum()
    # The last output token of each request comes out of its last step
    # without being fed back: input + output - 1 tokens per request.
    assert s.num_tokens.sum() == tokens - hits - len(r.requests)


# --- errors: ValueError with the CLI's message ------------------------------

@pytest.mark.parametrize("flags", [
    dict(device="no-such-device", model="gemma-4-e2b"),
    dict(SMALL, max_num_seqs=0),
    dict(SMALL, block_size=3),
    dict(SMALL, request_rate="fast"),
    dict(SMALL, trace="/nonexistent/trace.csv"),
    dict(SMALL, goodput="ttft=400"),
    dict(SMALL, goodput="itl:5"),
])
def test_bad_input_raises_value_error_with_cli_message(flags):
    cli = run_cli("simulate", *cli_args(flags), "--json")
    assert cli.returncode == 2
    with pytest.raises(ValueError) as e:
        servesim.simulate(**flags)
    assert cli.stderr.decode() == f"servesim simulate: error: {e.value}\n"


def test_unparsable_flag_raises_value_error_naming_it():
    with pytest.raises(ValueError, match="--num-prompts") as e:
        servesim.simulate(device="l4", model="gemma-4-e2b", num_prompts="many")
    cli = run_cli("simulate", "--device", "l4", "--model", "gemma-4-e2b", "--num-prompts",
                  "many")
    assert cli.returncode == 2
    assert cli.stderr.decode().splitlines()[0] == f"servesim simulate: error: {e.value}"
    # A keyword naming no flag is Python's TypeError, naming the keyword.
    with pytest.raises(TypeError, match="'no_such_flag'"):
        servesim.simulate(device="l4", model="gemma-4-e2b", no_such_flag=1)


@pytest.mark.parametrize("flags, says", [
    # An empty list gave no flag: the default (1,000 prompts) ran silently.
    (dict(SMALL, num_prompts=[]), "num_prompts: an empty list"),
    (dict(SMALL, device=b"l4"), "device: bytes b'l4' (give a str)"),
    # The C++ side cut the string at the NUL ("unknown model 'gemma-4-e2b").
    (dict(SMALL, model="gemma-4-e2b\x00junk"), "model: 'gemma-4-e2b\\x00junk' holds a NUL"),
    # A switch given a number reached CLI11 as a stray "1".
    (dict(SMALL, ignore_eos=1), "ignore_eos: 1 for a switch (give True or False)"),
    (dict(SMALL, enable_prefix_caching=0),
     "enable_prefix_caching: 0 for a switch (give True or False)"),
])
def test_values_the_cli_cannot_take_raise_value_error_naming_the_keyword(flags, says):
    with pytest.raises(ValueError) as e:
        servesim.simulate(**flags)
    assert says in str(e.value)


# --- threads -------------------------------------------------------------

def test_threads_give_the_results_of_one_thread():
    configs = [dict(SMALL, max_concurrency=c, seed=s) for c in (1, 4, 16) for s in (0, 1)]
    serial = [servesim.simulate(**c).json for c in configs]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda c: servesim.simulate(**c).json, configs))
    assert threaded == serial


def test_simulate_releases_the_gil():
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    # The whole trace (19,366 requests): long enough (~0.3-0.6 s here) for
    # the counter to tick many times if the GIL is free.
    flags = dict(device="mi300x", model="gemma-4-e2b", max_model_len=16384,
                 trace=AZURE_CONV)
    start = time.perf_counter()
    servesim.simulate(**flags)
    alone = time.perf_counter() - start
    t.start()
    servesim.simulate(**flags)
    stop.set()
    t.join()
    # A held GIL would stop the counter for the whole run.
    assert alone > 0.05 and ticks > 10


# --- memory, sweep, validate, plan -----------------------------------------

def test_memory_equals_cli_json():
    flags = dict(device="t4", model="google/gemma-4-12b-it", quantization="w4a16-emb4",
                 max_model_len=8192)
    cli = run_cli("memory", *cli_args(flags), "--json")
    assert servesim.memory(**flags) == json.loads(cli.stdout)
    with pytest.raises(ValueError) as e:
        servesim.memory(device="t4", model="gemma-4-e2b", block_size=3)
    bad = run_cli("memory", "--device", "t4", "--model", "gemma-4-e2b", "--block-size", 3)
    assert bad.stderr.decode() == f"servesim memory: error: {e.value}\n"


def test_memory_that_does_not_fit_is_an_answer_not_an_error():
    # The CLI exits 4 for it; the module raised an empty ValueError.
    flags = dict(device="l4", model="gemma-4-31b", max_model_len=8192)
    cli = run_cli("memory", *cli_args(flags), "--json")
    assert cli.returncode == 4
    m = servesim.memory(**flags)
    assert m == dict(json.loads(cli.stdout), exit_code=4)
    assert m["fits"] is False
    assert m["smallest_fitting_tensor_parallel_size"] > 1


GRID = {
    "name": "py",
    "base": {"server": {"device": "l4", "model": "gemma-4-e2b", "max_model_len": 2048},
             "client": {"num_prompts": 8, "random_input_len": 128,
                        "random_output_len": 16}},
    "axes": [{"path": "client.max_concurrency", "values": [1, 2, 4]},
             {"path": "server.device", "values": ["l4", "t4"]}],
}


def test_sweep_dataframe_equals_cli_results_csv(tmp_path):
    grid = tmp_path / "g.textproto"
    grid.write_text(servesim._grid_text(GRID))
    cli = run_cli("sweep", "--grid", grid, "--out", tmp_path / "cli", "--no-progress")
    assert cli.returncode == 0, cli.stderr
    df = servesim.sweep(GRID, tmp_path / "py", jobs=2)
    assert (tmp_path / "py" / "results.csv").read_bytes() == \
        (tmp_path / "cli" / "results.csv").read_bytes()
    expected = pd.read_csv(tmp_path / "cli" / "results.csv", keep_default_na=False,
                           na_values=[""])
    pd.testing.assert_frame_equal(df, expected)
    assert len(df) == 6 and list(df.columns[:4]) == ["point", "config_hash",
                                                      "client.max_concurrency",
                                                      "server.device"]
    with pytest.raises(ValueError, match="client.no_such_field"):
        servesim.sweep(dict(GRID, axes=[{"path": "client.no_such_field", "values": [1]}]))


def test_sweep_shards_merge_to_the_local_bytes(tmp_path):
    grid = tmp_path / "g.textproto"
    grid.write_text(servesim._grid_text(GRID))
    assert run_cli("sweep", "--grid", grid, "--out", tmp_path / "local", "--jobs", 1,
                   "--no-progress").returncode == 0
    shards = []
    for k in range(4):
        d = tmp_path / f"shard-{k}"
        code, _, err = servesim.cli("sweep", "--grid", str(grid), "--out", str(d),
                                    "--shard", f"{k}/4", "--no-progress")
        assert code == 0, err
        shards.append(str(d))
    code, _, err = servesim.cli("sweep", "merge", *shards, "--out", str(tmp_path / "m"))
    assert code == 0, err
    for name in ("grid.textproto", "results.jsonl", "results.csv"):
        assert (tmp_path / "m" / name).read_bytes() == \
            (tmp_path / "local" / name).read_bytes(), name
    # A shard out of range is bad input, named.
    code, _, err = servesim.cli("sweep", "--grid", str(grid), "--out", str(tmp_path / "b"),
                                "--shard", "4/4")
    assert code == 2 and "--shard '4/4': expected K/N" in err
    # A missing shard is named.
    code, _, err = servesim.cli("sweep", "merge", *shards[:3], "--out", str(tmp_path / "x"))
    assert code == 2 and "point 3 of 6 is in no shard folder" in err


def test_plan_equals_cli_json():
    flags = dict(rate=2, slo="ttft_p99<=2s", model="gemma-4-e2b", devices="l4,t4",
                 max_replicas=2, num_prompts=40)
    cli = run_cli("plan", *cli_args(flags), "--json")
    assert cli.returncode in (0, 3), cli.stderr
    got = servesim.plan(**flags)
    got.pop("exit_code", None)
    assert got == json.loads(cli.stdout)


def test_help_reads_well():
    doc = servesim.simulate.__doc__
    assert "ValueError" in doc and "Returns" in doc
    assert servesim.__version__.startswith(run_cli("--version").stdout.decode()
                                           .split()[1])


def test_validate_equals_cli_json():
    cli = run_cli("validate", "--device", "l4", "--no-held-out", "--json")
    assert cli.returncode in (0, 3), cli.stderr
    got = servesim.validate(device="l4", no_held_out=True)
    assert got.pop("exit_code", 0) == cli.returncode
    assert got == json.loads(cli.stdout)
    with pytest.raises(ValueError, match="--device"):
        servesim.validate(device="h100")


def test_switches_and_file_lists_are_read_as_meant(tmp_path):
    # False leaves out a switch that has no --no- form (it raised), True
    # on a flag that takes a value cannot swallow the next flag, help is
    # refused with where to look.
    base = servesim.validate(device="l4", no_held_out=True)
    assert servesim.validate(device="l4", no_held_out=True, refit=False) == base
    with pytest.raises(ValueError, match="--jobs"):
        servesim.validate(device="l4", no_held_out=True, jobs=True)
    with pytest.raises(ValueError, match="servesim.cli"):
        servesim.validate(help=True)
    # A misspelt keyword is named as Python names one (the CLI saw the flag
    # and its value as two stray arguments), with the flag it resembles.
    with pytest.raises(TypeError, match=r"simulate\(\) got an unexpected keyword "
                       r"argument 'num_prompt' \(did you mean num_prompts\?\)"):
        servesim.simulate(device="l4", model="gemma-4-e2b", num_prompt=5)
    with pytest.raises(TypeError, match="'bogus'; the keywords are the flags"):
        servesim.memory(device="l4", model="gemma-4-e2b", bogus=None)
    # A file-list entry starting with '-' would be read as a flag.
    cell = os.path.join(DATA, "bench", "mi300x-gemma4-e2b-2026-09-17", "c1-in128-out128.json")
    with pytest.raises(ValueError, match="would be read as a flag"):
        servesim.calibrate([cell, "--out", str(tmp_path / "x.textproto")], device="mi300x")
    assert not (tmp_path / "x.textproto").exists()
    with pytest.raises(ValueError, match="no result file"):
        servesim.calibrate([], device="mi300x")
    # A config path that is not there is named, not parsed as inline text.
    with pytest.raises(ValueError, match="nonexistent.textproto: no such file"):
        servesim.simulate(str(tmp_path / "nonexistent.textproto"), device="l4",
                          model="gemma-4-e2b")


def test_calibrate_equals_cli_json_and_profile(tmp_path):
    bench = os.path.join(DATA, "bench", "mi300x-gemma4-e2b-2026-09-17")
    cli = run_cli("calibrate", "--device", "mi300x", "--model", "gemma-4-e2b", "--bench",
                  bench, "--out", tmp_path / "cli.textproto", "--json", "-j", 2)
    assert cli.returncode in (0, 3), cli.stderr
    got = servesim.calibrate(bench, device="mi300x", model="gemma-4-e2b",
                             out=tmp_path / "py.textproto", jobs=1)
    assert got.pop("exit_code", 0) == cli.returncode
    assert got == json.loads(cli.stdout)
    assert (tmp_path / "py.textproto").read_bytes() == \
        (tmp_path / "cli.textproto").read_bytes()
    with pytest.raises(ValueError, match="none: cannot open"):
        servesim.calibrate(str(tmp_path / "none"), device="mi300x")
