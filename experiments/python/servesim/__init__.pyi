# Type stubs of the servesim Python module (experiments/python/servesim/__init__.py).
import os
from typing import Any, Mapping, Sequence

import pandas as pd

__version__: str
REQUEST_COLUMNS: dict[str, str]
STEP_COLUMNS: dict[str, str]

_Config = Mapping[str, Any] | str | os.PathLike[str] | None

class Result:
    json: str
    config: str
    warnings: list[str]
    @property
    def summary(self) -> dict[str, Any]: ...
    @property
    def requests(self) -> pd.DataFrame: ...
    @property
    def steps(self) -> pd.DataFrame | None: ...

def to_textproto(config: Mapping[str, Any]) -> str: ...
def simulate(
    config: _Config = ..., *, detailed: bool = ..., steps: bool = ..., **flags: Any
) -> Result: ...
def cli(*args: str) -> tuple[int, str, str]: ...
def memory(**flags: Any) -> dict[str, Any]: ...
def validate(**flags: Any) -> dict[str, Any]: ...
def calibrate(
    files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], **flags: Any
) -> dict[str, Any]: ...
def plan(**flags: Any) -> dict[str, Any]: ...
def sweep(
    grid: Mapping[str, Any] | str | os.PathLike[str],
    out: str | os.PathLike[str] | None = ...,
    *,
    jobs: int = ...,
    **flags: Any,
) -> pd.DataFrame: ...
