"""servesim from Python: the simulator behind the ``servesim`` command line.

Every function runs the command line's own code in-process (no second
pipeline): the flags are the CLI's flags, spelled as keyword arguments
(``max_num_seqs=8`` is ``--max-num-seqs 8``; ``True`` gives a switch,
``False`` its ``--no-`` form, or leaves it out where there is none; a list
repeats the flag), a bad value raises ``ValueError`` carrying the message
the CLI prints, and a keyword that names no flag raises ``TypeError``.

    >>> import servesim
    >>> r = servesim.simulate(device="l4", model="gemma-4-e2b", num_prompts=64,
    ...                       max_concurrency=16, random_input_len=512)
    >>> r.summary["output_throughput"]          # vllm bench serve's keys
    >>> r.requests.ttft_ms.describe()           # one row per request

Configs are dicts (``{"server": {"device": "t4"}, "client": {...}}``), text
protos (``'server { device: "t4" }'``) or paths to ``.textproto`` files;
they merge under the explicit keyword flags as ``--config`` / ``--set`` do.

``simulate`` releases the GIL while it runs, so a ``ThreadPoolExecutor``
runs several at once. ``memory``, ``validate``, ``calibrate``, ``sweep`` and
``plan`` run the CLI subcommand with its output captured; they take turns
(one at a time per process) and use their own ``jobs`` threads inside.
"""

from __future__ import annotations

import difflib
import json as _json
import os
import re
import tempfile
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from . import _servesim

__all__ = [
    "Result",
    "simulate",
    "memory",
    "validate",
    "calibrate",
    "sweep",
    "plan",
    "cli",
    "to_textproto",
    "REQUEST_COLUMNS",
    "STEP_COLUMNS",
    "__version__",
]

__version__: str = _servesim.version()

# Request statuses by code, as --requests-csv spells them (sim/scheduler.h
# RejectReason).
_STATUSES: list[str] = list(_servesim.status_names())

#: Columns of :attr:`Result.requests` and their dtypes: the columns of
#: ``servesim simulate --requests-csv``, times in seconds of simulated time,
#: NaN where the CSV leaves a cell empty (an event that never happened;
#: ttft/e2el/queueing of a request that did not finish).
REQUEST_COLUMNS: dict[str, str] = {
    "id": "int64",
    "replica": "int32",
    "input_tokens": "int32",
    "output_tokens": "int32",
    "status": "category",  # "ok" or why it was rejected
    "intended_s": "float64",  # when the client wanted to send it
    "send_s": "float64",  # sent (after the concurrency limit)
    "arrival_s": "float64",  # reached the server (send + client overhead)
    "first_scheduled_s": "float64",
    "first_token_s": "float64",
    "finish_s": "float64",  # last token, or the rejection
    "ttft_ms": "float64",  # first_token - send
    "e2el_ms": "float64",  # finish - send
    "queueing_ms": "float64",  # first_scheduled - arrival
    "preemptions": "int32",
    "prefix_hit_tokens": "int32",
}

#: Columns of :attr:`Result.steps` (``simulate(..., steps=True)``): one row
#: per scheduler step of any replica, in the order the engine ran them.
STEP_COLUMNS: dict[str, str] = {
    "replica": "int32",
    "start_s": "float64",
    "duration_s": "float64",
    "num_seqs": "int32",  # sequences in the batch
    "num_tokens": "int32",  # tokens computed this step
    "num_prefills": "int32",  # prefill chunks in the batch
    "num_decodes": "int32",
    "preempted": "int32",  # preemptions this step
    "running": "int32",
    "waiting": "int32",
    "kv_used_blocks": "int64",
    "kv_total_blocks": "int64",
    "host_s": "float64",  # step time parts from the step model
    "device_s": "float64",
}


def _text_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    if isinstance(v, str):
        return _json.dumps(v)  # a valid text-format string literal
    raise TypeError(f"config value {v!r}: expected a bool, number, string, dict or list")


def to_textproto(config: Mapping[str, Any]) -> str:
    """A config dict in protobuf text format (nested dicts are messages,
    lists are repeated fields), e.g. ``{"server": {"device": "t4"}}`` ->
    ``server { device: "t4" }``."""
    parts: list[str] = []
    for key, value in config.items():
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, Mapping):
                parts.append(f"{key} {{ {to_textproto(item)} }}")
            else:
                parts.append(f"{key}: {_text_value(item)}")
    return " ".join(parts)


def _config_args(config: Mapping[str, Any] | str | os.PathLike | None) -> list[str]:
    if config is None:
        return []
    if isinstance(config, Mapping):
        return ["--set", to_textproto(config)]
    path = os.fspath(config)
    if os.path.isfile(path):
        return ["--config", path]
    # A path that is not there would otherwise be parsed as inline text.
    if path.endswith((".textproto", ".txtpb", ".pbtxt")) and "{" not in path:
        raise ValueError(f"config: {path}: no such file")
    return ["--set", path]


_HELP: dict[str, str] = {}


def _help_text(command: str) -> str:
    """``servesim COMMAND --help``, once per command (which switches have a
    ``--no-`` form)."""
    if command not in _HELP:
        _, out, _ = cli(*command.split(), "--help")
        _HELP[command] = out
    return _HELP[command]


def _is_switch(command: str, flag: str) -> bool:
    """Whether ``--flag`` of ``servesim COMMAND`` takes no value: in CLI11's
    help a type (INT, TEXT, ...) follows an option's names after one space,
    where a switch's description starts after two or more."""
    # Option lines start with two spaces; description lines continue deeper.
    m = re.search(r"^  ((?:-\w,)?(?:--[\w-]+(?:\{[^}]*\})?,)*--" + re.escape(flag)
                  + r"(?![\w-])(?:\{[^}]*\})?(?:,--[\w-]+(?:\{[^}]*\})?)*)(.*)$",
                  _help_text(command), re.MULTILINE)
    if not m:
        return False  # not listed (hidden): the CLI judges the value
    rest = m.group(2)
    return not (rest.startswith(" ") and not rest.startswith("  "))


def _listed_flags(command: str) -> list[str]:
    """The long flags ``servesim COMMAND --help`` lists, without ``--``."""
    return sorted(set(re.findall(r"(?<![\w-])--([a-z][\w-]*)", _help_text(command))))


def _check_keyword(command: str, key: str, flag: str) -> None:
    """A keyword naming no flag of the command is refused here, naming the
    keyword (the CLI would name "--flag" and its value as stray arguments)."""
    listed = _listed_flags(command)
    if flag in listed:
        return
    close = difflib.get_close_matches(flag, listed, n=3, cutoff=0.75)
    hint = (" (did you mean " + " or ".join(c.replace("-", "_") for c in close) + "?)"
            if close else "")
    raise TypeError(f"{command}() got an unexpected keyword argument {key!r}{hint}; "
                    f"the keywords are the flags of servesim.cli({command!r}, '--help')")


def _flag_args(command: str, flags: Mapping[str, Any]) -> list[str]:
    """Keyword flags as argv. ``True`` gives the switch and ``False`` its
    ``--no-`` form, or nothing where the CLI has none (``refit=False``: no
    refit). Switches go last, so a ``True`` given to a flag that takes a
    value cannot swallow the next flag: the CLI then names the flag."""
    argv: list[str] = []
    switches: list[str] = []
    for key, value in flags.items():
        if key == "help":
            raise ValueError(f"help: for the flags, see servesim.cli({command!r}, '--help')")
        flag = key.replace("_", "-")
        _check_keyword(command, key, flag)  # a misspelt keyword, even set to None
        if value is None:
            continue
        name = "--" + flag
        if isinstance(value, (bool, np.bool_)):
            if value:
                switches.append(name)
            elif re.search(r"--no-" + re.escape(flag) + r"(?![\w-])", _help_text(command)):
                switches.append("--no-" + flag)
            continue
        if _is_switch(command, flag):
            # ignore_eos=1 reached CLI11 as a stray "1" ("argument was not
            # expected: 1"), which named no keyword.
            raise ValueError(f"{key}: {value!r} for a switch (give True or False)")
        values = value if isinstance(value, (list, tuple)) else [value]
        if not values:
            # An empty list gave no flag at all: the default ran silently.
            raise ValueError(f"{key}: an empty list (give a value, or leave {key} out)")
        for v in values:
            if isinstance(v, (bytes, bytearray)):
                raise ValueError(f"{key}: bytes {v!r} (give a str)")
            if isinstance(v, os.PathLike):
                v = os.fspath(v)
            elif isinstance(v, (float, np.floating)):
                v = repr(float(v))
            v = str(v)
            if "\x00" in v:
                # The C++ side would cut the string at the NUL.
                raise ValueError(f"{key}: {v!r} holds a NUL character")
            argv += [name, v]
    return argv + switches


class Result:
    """One simulated run, as ``servesim simulate --json`` reports it.

    Attributes:
      json: the result JSON, the exact text ``servesim simulate --json``
        prints for the same flags.
      summary: ``json`` parsed: ``vllm bench serve``'s keys (completed,
        request_throughput, output_throughput, mean_ttft_ms, p99_tpot_ms,
        ...) plus the ``servesim`` object (provenance, cost, KV use).
      config: the resolved experiment config (text format), to re-run it.
      warnings: what the CLI prints as warnings (e.g. an uncalibrated device).
      requests: a pandas DataFrame, one row per request (REQUEST_COLUMNS).
      steps: a DataFrame of the scheduler steps (STEP_COLUMNS), or None
        unless ``simulate(..., steps=True)``.
    """

    def __init__(self, raw: dict):
        self.json: str = raw["json"].decode("utf-8")
        self.config: str = raw["config"]
        self.warnings: list[str] = list(raw["warnings"])
        self._requests_raw = raw["requests"]  # _servesim.Records
        self._steps_raw: dict | None = raw["steps"]
        self._summary: dict | None = None
        self._requests: pd.DataFrame | None = None
        self._steps: pd.DataFrame | None = None

    @property
    def summary(self) -> dict:
        if self._summary is None:
            self._summary = _json.loads(self.json)
        return self._summary

    @property
    def requests(self) -> pd.DataFrame:
        if self._requests is None:
            cols = self._requests_raw.columns()
            cols["status"] = pd.Categorical.from_codes(cols["status"], _STATUSES)
            self._requests = pd.DataFrame(cols, columns=list(REQUEST_COLUMNS), copy=False)
            self._requests_raw = None
        return self._requests

    @property
    def steps(self) -> pd.DataFrame | None:
        if self._steps is None and self._steps_raw is not None:
            self._steps = pd.DataFrame(self._steps_raw, columns=list(STEP_COLUMNS), copy=False)
            self._steps_raw = None
        return self._steps

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<servesim.Result {s.get('model_id')}: {s.get('completed')} completed, "
            f"{s.get('output_throughput', 0):.1f} output tok/s, "
            f"mean TTFT {s.get('mean_ttft_ms', 0):.1f} ms>"
        )


def simulate(
    config: Mapping[str, Any] | str | os.PathLike | None = None,
    *,
    detailed: bool = False,
    steps: bool = False,
    **flags: Any,
) -> Result:
    """Simulate ``vllm serve`` + ``vllm bench serve``: ``servesim simulate``.

    Args:
      config: a config dict, text proto, or .textproto path (as --config /
        --set); the keyword flags win over it.
      detailed: add vLLM's per-request arrays to the JSON (--save-detailed).
      steps: also record every scheduler step (Result.steps).
      **flags: any flag of ``servesim simulate --help`` that shapes the run:
        device, model, quantization, max_model_len, max_num_seqs,
        num_prompts, request_rate, max_concurrency, random_input_len,
        random_output_len, seed, trace, router, date, label (the
        result's "label" key), goodput (vLLM's SLO pairs, e.g.
        ``["ttft:500", "tpot:50"]``, for "request_goodput"), set (a --set
        text or a list of them, applied after ``config``), ...

    Returns:
      A Result (summary dict, requests DataFrame, steps).

    Raises:
      ValueError: bad input; the message is the one the CLI prints after
        ``servesim simulate: error:``.
      TypeError: a keyword that names no flag of the command (every
        function here raises it so).
    """
    argv = _config_args(config) + _flag_args("simulate", flags)
    return Result(_servesim.simulate(argv, detailed, steps))


def cli(*args: str) -> tuple[int, str, str]:
    """Runs ``servesim ARGS...`` in-process: (exit code, stdout, stderr)."""
    code, out, err = _servesim.cli([str(a) for a in args])
    return code, out.decode("utf-8"), err.decode("utf-8")


def _error_message(command: str, stderr: str) -> str:
    """The CLI's message without its "servesim CMD: [error: ]" prefix."""
    lines = [l for l in stderr.splitlines()
             if l and not l.startswith("Run with --help") and not l.startswith("(run 'servesim")]
    msg = "\n".join(lines) if lines else stderr.strip()
    for prefix in (f"servesim {command}: error: ", f"servesim {command}: "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    return msg


def _run_json(command: str, argv: list[str], ok_codes: Iterable[int] = (0,)) -> dict:
    code, out, err = cli(command, "--json", *argv)  # switches stay last (_flag_args)
    if code not in ok_codes:
        raise ValueError(_error_message(command, err))
    result = _json.loads(out)
    if code and isinstance(result, dict):
        result.setdefault("exit_code", code)
    return result


def memory(**flags: Any) -> dict:
    """vLLM's memory plan of one replica (``servesim memory --json``).

    Keyword flags as ``servesim memory --help``: device, model (required),
    quantization, max_model_len, gpu_memory_utilization, measured_*_gib...
    Returns the JSON as a dict (fits, weights_gib, kv_cache_gib, num_blocks,
    kv_cache_tokens, max_concurrency, ...). A model that does not fit is an
    answer, not an error: fits False, ``exit_code`` 4 (the CLI's exit code),
    and what would fit (largest_fitting_max_model_len,
    quantizations_that_fit, smallest_fitting_tensor_parallel_size). Raises
    ValueError on bad input.
    """
    return _run_json("memory", _flag_args("memory", flags), ok_codes=(0, 4))


def validate(**flags: Any) -> dict:
    """The validation report against the measured tables (``servesim
    validate --json``): device, jobs, no_held_out, ... A report whose points
    miss their tolerance (CLI exit 3) is returned, with ``exit_code`` 3."""
    return _run_json("validate", _flag_args("validate", flags), ok_codes=(0, 3))


def calibrate(files: str | os.PathLike | Sequence[str | os.PathLike], **flags: Any) -> dict:
    """Fit a calibration profile to ``vllm bench serve`` result files
    (``servesim calibrate --bench FILES --json``). ``files``: files or
    folders; keyword flags: device (required), out, software_build, jobs,
    and the server flags the measured server ran with."""
    if isinstance(files, (str, bytes, os.PathLike)):
        files = [files]
    if files is None:
        raise ValueError("files: give result files or folders (got None)")
    paths = [os.fsdecode(f) for f in files]
    if not paths:
        raise ValueError("files: no result file or folder given")
    for p in paths:
        # After --bench every word is a file until the next flag: one that
        # starts with '-' would be read as a flag (files=[F, "--out", "x"]).
        if p.startswith("-"):
            raise ValueError(
                f"files: {p!r} starts with '-' and would be read as a flag; "
                f"name such a file ./{p}")
    argv = ["--bench", *paths] + _flag_args("calibrate", flags)
    return _run_json("calibrate", argv, ok_codes=(0, 3))


def plan(**flags: Any) -> dict:
    """The cheapest fleet that meets an SLO (``servesim plan --json``):
    rate, slo, model, devices, price, max_replicas, jobs, ... When no fleet
    meets the SLO (CLI exit 3) the report is returned with ``exit_code`` 3."""
    return _run_json("plan", _flag_args("plan", flags), ok_codes=(0, 3))


def _grid_text(grid: Mapping[str, Any]) -> str:
    g = dict(grid)
    if "axes" in g:
        axes = []
        for axis in g["axes"]:
            a = dict(axis)
            a["values"] = [v if isinstance(v, str) else _text_value(v) for v in a["values"]]
            axes.append(a)
        g["axes"] = axes
    return to_textproto(g)


def sweep(
    grid: Mapping[str, Any] | str | os.PathLike,
    out: str | os.PathLike | None = None,
    *,
    jobs: int = 1,
    **flags: Any,
) -> pd.DataFrame:
    """Run a grid of experiments (``servesim sweep``) and return results.csv
    as a DataFrame (one row per point: point, config_hash, the axis columns,
    status, error, then the metric columns of SimulatorMetricNames).

    Args:
      grid: a SweepGrid as a dict ({"base": {...}, "axes": [{"path": ...,
        "values": [...]}]}), text proto, or .grid.textproto path.
      out: the output folder (kept; a rerun resumes); None: a temporary one.
      jobs: worker threads (the results do not depend on it).
      **flags: server flags set on the grid's base server, and shard="K/N".

    Raises:
      KeyboardInterrupt: Ctrl-C (or SIGTERM) while it ran; the points
        finished and in flight are in ``out``, and the same call resumes.
      ValueError: bad input, or a point that failed (the CLI's message).
    """
    with tempfile.TemporaryDirectory(prefix="servesim-sweep-") as tmp:
        if isinstance(grid, Mapping):
            path = os.path.join(tmp, "grid.textproto")
            with open(path, "w") as f:
                f.write(_grid_text(grid))
        elif os.path.isfile(os.fspath(grid)):
            path = os.fspath(grid)
        else:
            path = os.path.join(tmp, "grid.textproto")
            with open(path, "w") as f:
                f.write(os.fspath(grid))
        out_dir = os.fspath(out) if out is not None else os.path.join(tmp, "out")
        argv = ["--grid", path, "--out", out_dir, "--jobs", str(jobs), "--no-progress"]
        code, _, err = cli("sweep", *argv, *_flag_args("sweep", flags))
        if code in (130, 143):
            # Ctrl-C (or SIGTERM) while the sweep ran: it wrote the points in
            # flight and stopped; the same call resumes it.
            raise KeyboardInterrupt(_error_message("sweep", err))
        if code != 0:
            raise ValueError(_error_message("sweep", err))
        df = pd.read_csv(os.path.join(out_dir, "results.csv"), keep_default_na=False,
                         na_values=[""])
    df.attrs["out"] = out_dir if out is not None else None
    return df
