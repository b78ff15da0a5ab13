"""The verdict of check_attention: Report and Failure, their summary text and their JSON form."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import NamedTuple


class Failure(NamedTuple):
    """One output element outside its certified band (or NaN, Inf, nonzero in a fully masked row)."""

    index: tuple  #: the element's index in ``out`` (same rank as ``out``)
    got: float  #: the kernel's value
    exact: float  #: midpoint of the oracle's enclosure of the exact value (0 in a fully masked row; NaN
    #: for reasons "NaN" and "Inf", which are decided without it)
    band: float  #: δ, the most a correct kernel in the precision can differ (0 in a fully masked row)
    ulps: float  #: |got - exact| in ulps of the storage format
    reason: str  #: "outside band", "NaN", "Inf", "masked row not zero", "NaN in a fully masked row"
    certified_band: float = math.nan  #: the certified tier's δ (band is the deciding tier's)
    statistical_band: float = math.nan  #: the statistical tier's δ

    def describe(self) -> str:
        if self.reason in ("NaN", "Inf"):  # no exact value or band was needed to decide
            return f"index {self.index}: {self.reason}, got {_number(self.got)}"
        if not math.isfinite(self.got):  # where the value must be exactly 0: no distance in ulps
            return f"index {self.index}: {self.reason}, got {_number(self.got)}, exact {_number(self.exact)}"
        if self.exact == 0:  # ulps of an exact 0 mean nothing: the absolute error against the band
            return (f"index {self.index}: {self.reason}, got {_number(self.got)}, exact 0, |error| "
                    f"{_number(abs(self.got))} against the band {_number(self.band)}")
        return (f"index {self.index}: {self.reason}, got {_number(self.got)}, exact {_number(self.exact)}, "
                f"band {_number(self.band)}, {_number(self.ulps)} ulps")


def _number(x: float) -> str:
    return f"{x:.9g}"


class Heatmap(NamedTuple):
    """Where the band usage sits: per query head (the max over batch items), a grid of at most 64 × 64
    cells over (query, output column); a cell holds the largest |got - exact| / band of the certified
    elements in it. Above 1 is a failure (inf: one decided without a band, NaN or Inf or a masked row not
    zero); -1 where nothing was certified and nothing failed. check_attention_varlen's and _kvcache's
    grid is over the padded batch's query positions."""

    cells: list  #: [Hq][R][C] floats
    query_edges: list  #: R + 1 ints: cell row k holds queries query_edges[k] .. query_edges[k + 1] - 1
    column_edges: list  #: C + 1 ints: cell column k holds columns column_edges[k] .. column_edges[k + 1] - 1

    def array(self):
        """The cells as a numpy array [Hq, R, C]."""
        import numpy as np

        return np.array(self.cells, dtype=np.float64).reshape(len(self.cells), len(self.query_edges) - 1,
                                                              len(self.column_edges) - 1)


class Verdict(NamedTuple):
    """One tier's verdict: certified (a failure proves a bug for the declared arithmetic) or
    statistical (a failure is evidence at false-alarm probability alpha for the whole report)."""

    passed: bool
    failure_count: int
    max_band_usage: float
    mean_band_usage: float


#: The statistical tier's model, as the report states it (README, "The two tiers").
MODEL = ("Model S: the kernel's roundings are independent with mean zero (Higham and Mary 2019); operations "
         "that may repeat on identical operands are grouped; exps, the scale, rescales, splits and the "
         "output rounding are kept at their worst case")


@dataclasses.dataclass
class Report:
    """What check_attention found. ``bool(report)`` is ``report.passed``."""

    passed: bool
    failures: list  #: Failure, worst first (at most 100 kept; failure_count counts all)
    failure_count: int
    max_band_usage: float  #: max |got - exact| / band over certified elements
    mean_band_usage: float
    usage_histogram: list  #: 0, then decades [1e-12, 1e-11) .. [0.1, 1], then > 1
    rows_checked: int  #: rows (batch item, query head, query) certified against the oracle
    rows_total: int
    elements_certified: int
    elements_total: int
    capped_rows: int  #: rows whose enclosure stayed wider than band/1000 at the precision cap
    max_plain_ratio: float  #: error / a plain same-precision computation's error (not deciding)
    mean_plain_ratio: float
    precision: str
    seed: int
    tier: str = "certified"  #: the tier that decides ``passed``: "certified" or "statistical"
    alpha: float = 1e-9  #: the statistical tier's false-alarm probability for the whole report
    statistical_lambda: float = math.nan  #: its λ (2·elements·exp(-λ²/2) = alpha)
    certified: Verdict = None  #: the certified tier's verdict
    statistical: Verdict = None  #: the statistical tier's verdict
    structure: dict = dataclasses.field(default_factory=dict)  #: the declared kernel structure
    model: str = MODEL
    notes: list = dataclasses.field(default_factory=list)  #: how the precision was inferred, when out's dtype differs
    consistent_with: list = None  #: on a failure: the standard profiles of the inputs' dtype under which out passes
    unbounded_elements: int = 0  #: elements with no finite certified band at this length (passed vacuously)
    ieee_elements: int = 0  #: elements whose IEEE value is NaN or ±inf (NaN or inf inputs reach them), judged so
    unmodelled_rows: int = 0  #: rows checked finite only (an infinite score drops some keys, or softcap caps one)
    lse: "Report" = None  #: the LSE's own Report (check_attention's lse=); ``passed`` needs it to pass too
    heatmap: Heatmap = None  #: where the band usage sits (None for the gradients' reports)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def worst(self):
        """The worst Failure, or None."""
        return self.failures[0] if self.failures else None

    def __str__(self) -> str:
        if self.passed:
            verdict = f"attncheck: passed ({self.precision})"
        elif self.failure_count == 0:  # out passed, its LSE did not
            verdict = f"attncheck: FAILED ({self.precision}): out passed, the LSE failed"
        else:
            verdict = (f"attncheck: FAILED ({self.precision}): {self.failure_count} of {self.elements_total} elements; "
                       f"worst at {self.worst.describe()}")
        coverage = (f"{self.rows_checked} of {self.rows_total} rows certified (seed {self.seed}, "
                    f"{self.elements_certified} elements); every element checked finite and masked rows zero")
        capped = f"; {self.capped_rows} row(s) at the precision cap" if self.capped_rows else ""
        if self.unbounded_elements:
            capped += (f"; {self.unbounded_elements} element(s) with no finite band (the declared arithmetic has "
                       f"no finite worst case at this length: passed vacuously)")
        if self.ieee_elements:
            capped += (f"; {self.ieee_elements} element(s) NaN or infinite by IEEE semantics (NaN or inf inputs "
                       f"reach them)")
        if self.unmodelled_rows:
            capped += (f"; {self.unmodelled_rows} row(s) checked finite only (an infinite score drops some of their "
                       f"keys, or softcap caps one: not certified)")
        tiers = ""
        if self.certified is not None and self.statistical is not None:
            def text(name, v):
                state = "passed" if v.passed else f"FAILED ({v.failure_count})"
                return f"{name} {state}, band usage max {_number(v.max_band_usage)}"
            declared = ", ".join(f"{k}={v}" for k, v in self.structure.items()) or "any (undeclared)"
            tiers = (f"\n{text('certified', self.certified)}; "
                     f"{text(f'statistical (alpha {self.alpha:g})', self.statistical)}; decided by {self.tier}; "
                     f"kernel structure {declared}")
        notes = "".join(f"\nnote: {note}" for note in self.notes)
        if self.consistent_with is not None:
            notes += f"\ndiagnosis: {self.diagnosis()}"
        lse = ""
        if self.lse is not None:
            state = ("passed" if self.lse.passed else
                     f"FAILED: {self.lse.failure_count} of {self.lse.elements_total} rows; worst at "
                     f"{self.lse.worst.describe()}")
            lse = (f"\nlse: {state}; band usage max {_number(self.lse.max_band_usage)}, "
                   f"{self.lse.rows_checked} of {self.lse.rows_total} rows certified"
                   + "".join(f"\nlse note: {note}" for note in self.lse.notes))
        return (f"{verdict}\nband usage max {_number(self.max_band_usage)}, mean {_number(self.mean_band_usage)}; "
                f"{coverage}{capped}{tiers}{notes}{lse}")

    def diagnosis(self) -> str:
        """On a failure, which standard arithmetic the output is consistent with (README, "Profiles")."""
        if self.passed or self.consistent_with is None:
            return ""
        outside = f"outside {self.precision} ({_PROFILE_TEXT.get(self.precision, self.precision)})"
        if not self.consistent_with:
            return f"{outside}; inside no other standard profile of the inputs' dtype"
        inside = "; ".join(f"inside {name}: {_PROFILE_TEXT.get(name, name)}" for name in self.consistent_with)
        return f"{outside}; {inside}"

    def to_html(self, path) -> None:
        """Writes the report as one self-contained HTML page (no network): per head a heatmap of the
        band usage over (query, column), the usage histogram, the failures and the summary. OSError
        when `path` cannot be written (a directory, a missing folder)."""
        from ._html import write_html

        write_html(self, path)

    def to_json(self, **dumps_options) -> str:
        """The report as strict JSON (NaN and infinities as the strings "NaN", "Infinity", "-Infinity")."""
        return json.dumps(_encode(self._to_dict()), allow_nan=False, **dumps_options)

    def _to_dict(self) -> dict:
        data = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        data = {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
        data["failures"] = [f._asdict() for f in self.failures]
        for tier in ("certified", "statistical"):
            if data[tier] is not None:
                data[tier] = list(data[tier])
        data["lse"] = None if self.lse is None else self.lse._to_dict()
        data["heatmap"] = None if self.heatmap is None else self.heatmap._asdict()
        return data

    @classmethod
    def from_json(cls, text: str) -> "Report":
        """The report to_json wrote."""
        return cls._from_dict(json.loads(text))

    @classmethod
    def _from_dict(cls, data: dict) -> "Report":
        if data.get("lse") is not None:
            data["lse"] = cls._from_dict(data["lse"])
        for field in _FLOAT_FIELDS:
            if field in data:
                data[field] = _decode(data[field])
        floats = ("got", "exact", "band", "ulps", "certified_band", "statistical_band")
        data["failures"] = [
            Failure(**{**f, "index": tuple(f["index"]), **{k: _decode(f[k]) for k in floats if k in f}})
            for f in data["failures"]
        ]
        if data.get("heatmap") is not None:
            grid = data["heatmap"]
            cells = [[[_decode(x) for x in row] for row in head] for head in grid["cells"]]
            data["heatmap"] = Heatmap(cells, list(grid["query_edges"]), list(grid["column_edges"]))
        for tier in ("certified", "statistical"):
            if data.get(tier) is not None:
                passed, count, usage_max, usage_mean = data[tier]
                data[tier] = Verdict(passed, count, _decode(usage_max), _decode(usage_mean))
        return cls(**data)

    @classmethod
    def _from_native(cls, native: dict, index_of, elements_total: int, precision: str, seed: int, *,
                     tier: str = "certified", alpha: float = 1e-9, structure=None, notes=()) -> "Report":
        failures = []
        for index, got, lo, hi, band, ulps, _usage, reason, certified_band, statistical_band in native["failures"]:
            exact = lo + (hi - lo) / 2 if math.isfinite(lo) and math.isfinite(hi) else lo
            if reason in ("NaN", "Inf") or reason.startswith(_WITHOUT_ORACLE):  # no exact value or band
                exact, band, certified_band, statistical_band = math.nan, math.nan, math.nan, math.nan
            failures.append(Failure(index_of(index), got, exact, band, ulps, reason, certified_band, statistical_band))
        verdicts = {t: Verdict(**native[t]) for t in ("certified", "statistical")}
        grid = native.get("heatmap")
        heatmap = None if grid is None else Heatmap(grid["cells"].tolist(), list(grid["query_edges"]),
                                                    list(grid["column_edges"]))
        return cls(passed=native["passed"], failures=failures, failure_count=native["failure_count"],
                   max_band_usage=native["max_band_usage"], mean_band_usage=native["mean_band_usage"],
                   usage_histogram=list(native["usage_histogram"]), rows_checked=native["rows_checked"],
                   rows_total=native["rows_total"], elements_certified=native["elements_certified"],
                   elements_total=elements_total, capped_rows=native["capped_rows"],
                   max_plain_ratio=native["max_plain_ratio"], mean_plain_ratio=native["mean_plain_ratio"],
                   precision=precision, seed=seed, tier=tier, alpha=alpha, statistical_lambda=native["lambda"],
                   structure=dict(structure or {}), notes=list(notes),
                   consistent_with=list(native["consistent_with"]) if native["diagnosed"] else None,
                   unbounded_elements=native["unbounded_elements"], ieee_elements=native.get("ieee_elements", 0),
                   unmodelled_rows=native.get("unmodelled_rows", 0), heatmap=heatmap, **verdicts)


_PROFILE_TEXT = {
    "fp64": "fp64 compute", "fp32": "fp32 compute",
    "fp16": "fp32 compute, P and the output rounded to fp16", "bf16": "fp32 compute, P and the output rounded to bf16",
    "fp16-math": "intermediates rounded to fp16: the scaled Q, the scores, P and the output",
    "bf16-math": "intermediates rounded to bf16: the scaled Q, the scores, P and the output",
}

# Failure reasons decided by an element's IEEE class or finiteness alone (tensor_ieee.hpp): no exact value.
_WITHOUT_ORACLE = ("NaN (", "Inf (", "not NaN", "not +inf", "not -inf")

_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _encode(x):
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    if isinstance(x, dict):
        return {k: _encode(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_encode(v) for v in x]
    return x


_FLOAT_FIELDS = ("max_band_usage", "mean_band_usage", "max_plain_ratio", "mean_plain_ratio", "alpha",
                 "statistical_lambda")


def _decode(x) -> float:
    return _SPECIAL[x] if isinstance(x, str) else float(x)
