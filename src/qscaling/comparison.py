"""Every law on the same runs: the points every study contributes, gathered into one table of training runs and one
of post-training quantizations, and each registered law whose inputs they carry fitted on them and scored on
points it never saw.

A study contributes through `Study.law_points(table, settings)`, which returns its rows in the shapes below
(`TRAINING_COLUMNS`, `PTQ_COLUMNS`); runs shared between studies appear once. No study is named here.

Training precision: bits per role (weights P_w, activations P_a, KV cache P_kv; inf where the role is kept in
full precision) and the number format of the quantized roles ("none" for a full-precision run, "int", "fp" with its
exponent and mantissa bits E, M and block size B); G is an INT quantizer's group size where the study records one,
`delta` the gap to a full-precision partner trained alongside it where the study pairs one.
"""

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from qscaling.laws import LAWS, fit, start_sample
from qscaling.laws.efficiency2025 import QUEST_BITS
from qscaling.laws.kumar2024 import PAPER_FORM_R2
from qscaling.laws.law import Law
from qscaling.laws.table import constant_inputs, held_params

TRAINING_COLUMNS = {
    "run": str, "study": str, "N": float, "D": float, "loss": float, "format": str, "P_w": float, "P_a": float,
    "P_kv": float, "E": float, "M": float, "B": float, "G": float, "delta": float,
}  # fmt: skip
PTQ_COLUMNS = {
    "run": str, "study": str, "N": float, "D": float, "method": str, "bits": float, "base_loss": float,
    "delta": float,
}  # fmt: skip
FORMATS = ("none", "int", "fp")
SCHEMES = {"N": "leave one size out", "D": "leave one budget out"}
PAPER_SCHEME = "paper constants, no fit"
IN_SAMPLE = "in sample"
COMPARISON_COLUMNS = [
    "law", "kind", "source", "scheme", "relative_error", "n_points", "n_sizes", "n_budgets", "note",
]  # fmt: skip
# Sobol starts per law (`qscaling.laws.start_sample`, as `laws fit --starts`): a law's default grid has k^p points,
# which for 10 parameters is thousands of L-BFGS-B runs per fit.
STARTS = 16


def training_frame(rows: pd.DataFrame | Mapping) -> pd.DataFrame:
    """`rows` in the training schema: every column of TRAINING_COLUMNS, missing ones NaN, typed; ValueError naming
    a column or value that does not fit it."""
    return _conformed(pd.DataFrame(rows), TRAINING_COLUMNS, "training")


def ptq_frame(rows: pd.DataFrame | Mapping) -> pd.DataFrame:
    """`rows` in the post-training-quantization schema (PTQ_COLUMNS)."""
    return _conformed(pd.DataFrame(rows), PTQ_COLUMNS, "ptq")


def _conformed(frame: pd.DataFrame, columns: Mapping[str, type], kind: str) -> pd.DataFrame:
    for name in ("run", "study", "N", "D"):
        if name not in frame.columns:
            raise ValueError(f"law points ({kind}): column {name!r} missing; have {list(frame.columns)}")
    frame = frame.reindex(columns=list(columns))
    for name, kind_of in columns.items():
        frame[name] = frame[name].astype(str) if kind_of is str else pd.to_numeric(frame[name]).astype(float)
    if kind == "training":
        unknown = sorted(set(frame["format"]) - set(FORMATS))
        if unknown:
            raise ValueError(f"law points (training): format {unknown[0]!r} unknown; valid: {FORMATS}")
    return frame.reset_index(drop=True)


def full_precision(rows: pd.DataFrame, study: str) -> pd.DataFrame:
    """`rows` (run, N, D, loss) as training points of full-precision runs."""
    return training_frame(rows.assign(study=study, format="none", P_w=np.inf, P_a=np.inf, P_kv=np.inf))


def gather(contributions: Iterable[Mapping[str, pd.DataFrame]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(training, ptq): every study's points, each training run once per checkpoint and each quantization of a
    checkpoint once (the first study to list it keeps it: shared runs are evaluated on the same held-out set)."""
    training, ptq = (
        [training_frame({"run": [], "study": [], "N": [], "D": []})],
        [ptq_frame({"run": [], "study": [], "N": [], "D": []})],
    )
    for points in contributions:
        if "training" in points:
            training.append(training_frame(points["training"]))
        if "ptq" in points:
            ptq.append(ptq_frame(points["ptq"]))
    training = pd.concat(training, ignore_index=True).drop_duplicates(["run", "D"], ignore_index=True)
    ptq = pd.concat(ptq, ignore_index=True).drop_duplicates(["run", "D", "method", "bits"], ignore_index=True)
    return training, ptq


@dataclass(frozen=True)
class Selection:
    """Which points a law is fitted on: rows of the training or PTQ table, renamed to the law's inputs."""

    kind: str  # "training" or "ptq"
    rows: Callable[[pd.DataFrame], pd.Series]  # mask of the table's rows the law applies to
    inputs: Mapping[str, str]  # law input or target -> the table's column
    description: str  # what the points are, for the table's note


def _full_precision(t):
    return t["format"] == "none"


def _integer(t):
    return t["format"].isin(["none", "int"])


SELECTIONS: dict[str, Selection] = {
    **{
        name: Selection("training", _full_precision, {"loss": "loss"}, "full-precision runs")
        for name in ("chinchilla", "chinchilla_tied", "kaplan")
    },
    "kumar2024.neff": Selection(
        "training", _integer, {"P_w": "P_w", "P_a": "P_a", "P_kv": "P_kv", "loss": "loss"},
        "full-precision and INT-trained runs",
    ),
    **{
        name: Selection(
            "training", lambda t: _integer(t) & np.isinf(t["P_a"]) & np.isinf(t["P_kv"]), {"P_w": "P_w", "loss": "loss"},
            "full-precision and INT weight-only runs",
        )
        for name in LAWS
        if name.startswith("kumar2024.form_")
    },
    "panferov2025.quest": Selection(
        "training",
        lambda t: _integer(t) & (t["P_w"] == t["P_a"]) & np.isinf(t["P_kv"]) & t["P_w"].isin([*QUEST_BITS, np.inf]),
        {"P": "P_w", "loss": "loss"},
        "full-precision runs and runs with weights and activations in INT at one of QuEST's bit widths",
    ),
    "castro2025.quartet": Selection(
        "training", lambda t: t["format"] == "none", {"P_fwd": "P_fwd", "P_bwd": "P_bwd", "loss": "loss"},
        "runs whose forward and backward passes train in FP4 (no study records P_fwd, P_bwd)",
    ),
    "sun2025.capybara": Selection(
        "training", lambda t: (t["format"] == "fp") & t["B"].notna() & t["E"].notna() & t["M"].notna(),
        {"E": "E", "M": "M", "B": "B", "loss": "loss"}, "FP-trained runs with a block size",
    ),
    "chen2025.qat": Selection(
        "training",
        lambda t: (t["format"] == "int") & (t["P_w"] == 4) & (t["P_a"] == 4) & np.isinf(t["P_kv"]) & t["G"].notna()
        & t["delta"].notna(),
        {"G": "G", "delta": "delta"},
        "W4A4 INT-trained runs with a group size and a full-precision partner",
    ),
    "kumar2024.ptq": Selection(
        "ptq", lambda t: (t["method"] == "gptq") & (t["delta"] > 0), {"P_post": "bits", "delta": "delta"},
        "GPTQ post-training quantizations with δ > 0 (a log-space law)",
    ),
    "ouyang2024.qid": Selection(
        "ptq", lambda t: (t["method"] == "gptq") & (t["delta"] > 0), {"P": "bits", "delta": "delta"},
        "GPTQ post-training quantizations with δ > 0 (a log-space law)",
    ),
}  # fmt: skip


def law_rows(law: Law, selection: Selection, training: pd.DataFrame, ptq: pd.DataFrame) -> pd.DataFrame:
    """The points `law` is fitted on, with its inputs and target as columns (N, D kept for the held-out schemes);
    empty where a column the law needs is absent from the table."""
    table = training if selection.kind == "training" else ptq
    if any(column not in table.columns for column in selection.inputs.values()):
        return pd.DataFrame(columns=list(dict.fromkeys(["N", "D", "run", *law.inputs, law.target])))
    chosen = table[selection.rows(table).to_numpy(bool)]
    renamed = chosen[["N", "D", "run"]].copy()
    for name, column in selection.inputs.items():
        renamed[name] = chosen[column].to_numpy(float)
    return renamed.reset_index(drop=True)


def compare(training: pd.DataFrame, ptq: pd.DataFrame, laws: Iterable[str] = tuple(SELECTIONS)) -> pd.DataFrame:
    """One row per law, source and scheme: this run's fit scored in sample and on held-out sizes and budgets, and
    the paper's constants (where the law has them) on every point; a law that cannot be fitted gets one row saying
    why. Errors are mean |prediction − observed| / observed (for a law fitted on linear residuals, relative to the
    held-out group's mean |δ|: `qscaling.laws.fit`)."""
    records = []
    for name in laws:
        law, selection = LAWS[name], SELECTIONS[name]
        rows = law_rows(law, selection, training, ptq)
        base = {
            "law": name, "kind": law.target, "n_points": len(rows), "n_sizes": rows["N"].nunique(),
            "n_budgets": rows["D"].nunique(),
        }  # fmt: skip
        records.extend({**base, **record} for record in _scored(law, rows, selection))
    return pd.DataFrame(records, columns=COMPARISON_COLUMNS)


def _scored(law: Law, rows: pd.DataFrame, selection: Selection) -> list[dict]:
    """This run's fit in sample and on each held-out scheme, then the paper's constants. Parameters the points
    cannot pin down (an input constant throughout, a precision level absent) are held at the paper's value, as
    `qscaling laws fit` holds them."""
    this_run = {"source": "this run's fit"}
    held = held_params(law, rows, constant_inputs(law, rows)) if len(rows) else {}
    why_not = _why_not_fitted(law, rows, held, selection.description)
    if why_not:
        return [{**this_run, "scheme": IN_SAMPLE, "relative_error": math.nan, "note": f"not fitted: {why_not}"}]
    paper = law.default_paper_params() if law.paper_params else {}
    options = _fit_options(law, held)
    held_note = [f"{name} held at the paper's value ({cause})" for name, (cause, _) in held.items()]
    observed = rows[law.target].to_numpy(float)
    records = []
    for group, scheme in ((None, IN_SAMPLE), *SCHEMES.items()):
        try:
            result = fit(law, rows, group_col=group, **options)
        except ValueError as error:
            records.append({**this_run, "scheme": scheme, "relative_error": math.nan, "note": str(error)})
            break
        if group is None:
            notes = [note for note in result.notes if not note.endswith("fixed, not fitted")]
            value, note = (
                float(np.mean(law.relative_errors(result.predict(rows), observed))),
                "; ".join(held_note + notes),
            )
        elif result.heldout_relative_error is None:
            value, note = math.nan, f"not scored: fewer than three values of {group}"
        else:
            value, note = result.heldout_relative_error, ""
        records.append({**this_run, "scheme": scheme, "relative_error": value, "note": note})
    if law.paper_params:
        try:  # a precision the paper never fitted raises (QuEST's, Quartet's per-precision efficiencies)
            value, note = float(np.mean(law.relative_errors(law(paper, rows), observed))), paper.source
        except ValueError as error:
            value, note = math.nan, str(error)
        records.append({"source": "paper constants", "scheme": PAPER_SCHEME, "relative_error": value, "note": note})
    return records


def _why_not_fitted(law: Law, rows: pd.DataFrame, held: Mapping, description: str) -> str:
    """Why `law` cannot be fitted on `rows` (too few points for its free parameters, or parameters the points
    cannot pin down and no paper value to hold them at); "" where it can."""
    free = len(law.params) - len(held)
    if held and not law.paper_params:
        return f"{', '.join(held)} unidentifiable on {description} and no paper value to hold them at"
    if len(rows) <= free:
        return f"{len(rows)} points ({description}) for {free} free parameters"
    return ""


def _fit_options(law: Law, held: Mapping) -> dict:
    """`qscaling.laws.fit`'s options for every fit of the comparison: STARTS Sobol starts, no bootstrap, the
    parameters the points cannot pin down held at the paper's value."""
    paper = law.default_paper_params() if law.paper_params else {}
    starts = [dict(zip(law.param_names, row)) for row in start_sample(law, STARTS, seed=0)]
    return {"fixed": {name: paper[name] for name in held} or None, "starts": starts, "bootstrap": 0, "seed": 0}


@dataclass(frozen=True)
class PaperComparison:
    """Two laws a paper compared on the same points, `better` being the one it found to predict held-out points
    better; `source` says where, with the paper's numbers."""

    better: str
    worse: str
    source: str


def _kumar_table_1(better: str, worse: str) -> PaperComparison:
    def law_of(form: str) -> str:
        return "kumar2024.neff" if form == "neff" else f"kumar2024.form_{form}"

    r2 = PAPER_FORM_R2
    return PaperComparison(
        law_of(better), law_of(worse), f"Kumar et al. 2024 Table 1: held-out R² {r2[better]} vs {r2[worse]}"
    )


# Every comparison of two laws on the same points that a paper reports and this run's points can repeat.
PAPER_COMPARISONS = tuple(
    _kumar_table_1(*pair) if PAPER_FORM_R2[pair[0]] > PAPER_FORM_R2[pair[1]] else _kumar_table_1(*pair[::-1])
    for pair in (("neff", form) for form in PAPER_FORM_R2 if form != "neff")
)


@dataclass(frozen=True)
class PairedErrors:
    """Both laws of a comparison fitted on the points they share and scored on each held-out group (size or
    budget): group -> mean relative error, for the law the paper found better and for the other."""

    comparison: PaperComparison
    group: str  # the column whose values are held out in turn ("N": sizes, "D": budgets)
    better: Mapping[str, float]
    worse: Mapping[str, float]
    points: pd.DataFrame  # the shared points (run, N, D and both laws' inputs)
    note: str  # why there are no errors, where there are none

    @property
    def groups(self) -> list[str]:
        """The held-out groups both laws were scored on."""
        return [group for group in self.better if group in self.worse]

    def mean_errors(self) -> tuple[float, float]:
        """Each law's held-out error over the points of the shared groups (better, worse): each group's mean
        weighted by its number of points, as `compare`'s held-out errors."""
        groups = self.groups
        if not groups:
            return math.nan, math.nan
        counts = self.points[self.group].map(lambda value: f"{value:g}").value_counts()
        weights = np.array([counts[g] for g in groups], dtype=float)
        return tuple(
            float(np.average([errors[g] for g in groups], weights=weights)) for errors in (self.better, self.worse)
        )

    @property
    def scheme(self) -> str:
        return SCHEMES[self.group]


def paired_errors(comparison: PaperComparison, training: pd.DataFrame, ptq: pd.DataFrame, group: str = "N"):
    """`comparison`'s two laws fitted on the points both apply to (every input of either law kept), each scored by
    leaving out one value of `group` at a time, with the same starts and held parameters as `compare`."""
    laws = [LAWS[comparison.better], LAWS[comparison.worse]]
    selections = [SELECTIONS[law.name] for law in laws]
    shared = Selection(
        selections[0].kind,
        lambda table: selections[0].rows(table) & selections[1].rows(table),
        {**selections[0].inputs, **selections[1].inputs},
        f"{selections[0].description}, and {selections[1].description}",
    )
    errors, notes = [], []
    points = law_rows(laws[0], shared, training, ptq)  # the same rows for both: the shared inputs are every input
    for law in laws:
        held = held_params(law, points, constant_inputs(law, points)) if len(points) else {}
        why_not = _why_not_fitted(law, points, held, shared.description)
        if why_not:
            errors.append({})
            notes.append(f"{law.name} not fitted: {why_not}")
            continue
        result = fit(law, points, group_col=group, **_fit_options(law, held))
        errors.append(result.heldout_by_group)
        if not result.heldout_by_group:
            notes.append(f"{law.name} not scored on held-out {group}")
    return PairedErrors(comparison, group, errors[0], errors[1], points, "; ".join(notes))
