"""The benchmark experiments (``sesame bench``), run from Python.

``run("ore", scale="quick")`` runs one experiment and returns its
``ResultSet``; nothing is written to disk.
"""

from typing import Any, Dict, List

from ._sesame import bench_run


class ResultSet:
    """One experiment's results: ``rows`` (params, figures and the paper's
    figures where it reported any), ``notes``, ``table`` (``header`` and
    ``rows`` of cells, as the CSV file has them), and ``raw`` (the JSON
    the harness writes, as a dict)."""

    def __init__(self, raw: Dict[str, Any]) -> None:
        self.raw = raw
        self.experiment: str = raw["experiment"]
        self.scale: str = raw["scale"]
        self.notes: List[str] = raw.get("notes", [])
        self.rows: List[Dict[str, Any]] = raw["rows"]
        self.table: Dict[str, Any] = raw["table"]

    def __repr__(self) -> str:
        return f"ResultSet({self.experiment!r}, scale={self.scale!r}, rows={len(self.rows)})"

    def to_pandas(self):
        """The table as a pandas DataFrame (numbers as numbers); needs pandas."""
        import pandas as pd

        frame = pd.DataFrame(self.table["rows"], columns=self.table["header"])
        for column in frame.columns:
            converted = pd.to_numeric(frame[column], errors="coerce")
            if converted.notna().sum() == frame[column].astype(bool).sum():
                frame[column] = converted
        return frame


def run(name: str, scale: str = "quick", seed: int = 1, data: str = "data") -> ResultSet:
    """Runs experiment ``name`` at ``scale`` (quick, tiny or full)."""
    return ResultSet(bench_run(name, scale=scale, seed=seed, data=data))


__all__ = ["ResultSet", "run"]
