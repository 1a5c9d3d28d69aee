"""Ouyang et al. 2024: quantization-induced degradation (QiD) of intermediate checkpoints, the Pythia way.

Grid (`grid`): the shared WSD trunk of each size (constant learning rate, never annealed, like Pythia's intermediate
checkpoints) at log-spaced token counts; GPTQ weight-only at 2/3/4 bits with groups (GPTQ's own symmetric
convention: 2^b levels), scored on the in-domain held-out set and on technical English (Fig. 8); AWQ and a
bitsandbytes-style FP4 for the method comparison (Fig. 9). QiD = loss(quantized) − loss(unquantized). Here: the tidy
table, the unified and one-factor QiD laws, the Kaplan-form 16-bit law, and the claims (Fig. 14's in `bitnet`).
"""

import numpy as np
import pandas as pd

from qscaling.laws import LAWS, fit, try_fit
from qscaling.laws.ouyang2024 import TOKENS_EXPONENT, UNIFIED_CONSTANTS
from qscaling.noise import OWN_REPEATS, ClaimNoise
from qscaling.studies.claims import claim, positive_parameter_claim, slope_claim, verdict_from_interval
from qscaling.studies.ouyang2024.bitnet import bitnet_claim
from qscaling.studies.ouyang2024.grid import STUDY, compared
from qscaling.studies.ouyang2024.settings import Ouyang2024Settings

ONE_FACTOR = {"qid_tokens": ("D", ["N", "bits"]), "qid_size": ("N", ["D", "bits"]), "qid_bits": ("P", ["N", "D"])}


def build_table(rows: pd.DataFrame, settings: Ouyang2024Settings) -> pd.DataFrame:
    table = rows.copy()
    table["P"] = table["bits"]
    table["qid"] = table["delta"]
    return table.sort_values(["split", "method", "bits", "N", "D"]).reset_index(drop=True)


def gptq_rows(table: pd.DataFrame, split: str = "val") -> pd.DataFrame:
    rows = table[(table["method"] == "gptq") & (table["split"] == split)]
    return rows[rows["delta"] > 2 * rows["delta_se"]]


def fit_names(settings: Ouyang2024Settings) -> list[str]:
    return ["qid", "kaplan"] + [f"compare_{q.method}_{q.spec.replace(':', '_')}" for q in compared(settings)]


def fit_laws(table: pd.DataFrame, settings: Ouyang2024Settings, *, bootstrap: int = 200) -> dict:
    base = table[(table["method"] == "none") & (table["split"] == "val")]
    fits = {
        "qid": try_fit(
            "ouyang2024.qid",
            gptq_rows(table),
            target="delta",
            bootstrap=bootstrap,
            group_col="N",
            run_col="run",
            seed=0,
        ),
        "kaplan": try_fit("kaplan", base, target="loss", bootstrap=bootstrap, group_col="N", seed=0),
    }
    for quantization, name in zip(compared(settings), fit_names(settings)[2:]):
        rows = table[
            (table["method"] == quantization.method) & (table["spec"] == quantization.spec) & (table["split"] == "val")
        ]
        fits[name] = try_fit(
            "ouyang2024.qid_fixed_bits",
            rows[rows["delta"] > 2 * rows["delta_se"]],
            target="delta",
            bootstrap=bootstrap,
            group_col="N",
            seed=0,
        )
    return fits


def fit_tables(table: pd.DataFrame, settings: Ouyang2024Settings) -> dict:
    return {"one_factor": one_factor_fits(table)}


def one_factor_fits(table: pd.DataFrame) -> pd.DataFrame:
    """Figs. 3–5: each one-factor law fitted within every group that holds the other two factors fixed."""
    records = []
    rows = gptq_rows(table)
    for law_name, (factor, fixed) in ONE_FACTOR.items():
        law = LAWS[f"ouyang2024.{law_name}"]
        for key, group in rows.groupby(fixed):
            if group[factor].nunique() <= len(law.param_names):
                continue
            result = fit(law, group, target="delta", bootstrap=100, group_col=None, seed=0)
            standard_errors = {f"{name}_se": value for name, value in result.standard_errors.items()}
            records.append(
                {
                    "law": law_name,
                    "factor": factor,
                    **dict(zip(fixed, key)),
                    **result.params,
                    **standard_errors,
                    "r2": result.r2,
                    "points": len(group),
                }
            )
    return pd.DataFrame(records)


def claims(tables: dict, fits: dict, settings: Ouyang2024Settings, noise: ClaimNoise = OWN_REPEATS) -> list[dict]:
    table = tables["table"]
    out = []
    qid = fits.get("qid")
    if qid is not None:
        for name in ("beta", "alpha", "gamma"):
            paper = UNIFIED_CONSTANTS[name]
            text = f"Unified QiD law: {name} > 0 (paper {paper})"
            out.append(positive_parameter_claim(STUDY, text, qid, name, paper=paper))
    rows = gptq_rows(table)
    out.append(
        slope_claim(
            STUDY,
            "QiD grows with training tokens at fixed size and bits (Fig. 3)",
            rows,
            x="D",
            y="delta",
            by=["N", "bits"],
            expect="positive",
            paper=TOKENS_EXPONENT,  # Sec. 4.1: at fixed size and bits, QiD ∝ D^β
        )
    )
    ood = gptq_rows(table, "ood")
    if len(ood):
        out.append(
            slope_claim(
                STUDY,
                "QiD grows with training tokens on an out-of-domain set too (Fig. 8)",
                ood,
                x="D",
                y="delta",
                by=["N", "bits"],
                expect="positive",
            )
        )
    out.append(weight_change_claim(tables["weight_changes"]))
    if "bitnet" in tables:
        out.append(bitnet_claim(tables["bitnet"], settings.training.seed, noise))
    return out


def weight_change_claim(changes: pd.DataFrame, *, bootstrap: int = 1000, seed: int = 0) -> dict:
    """Fig. 12's premise: checkpoints change less per token late in training than early.

    Over geometric checkpoint intervals, change per token falls by itself (a random walk moves as √length), so
    only adjacent intervals of equal length (within EQUAL_LENGTH_TOLERANCE) that start after warmup are
    compared: the statistic is the mean, over matrices, of log(rate late / rate early), its CI a bootstrap over
    matrices (every interval pair of a matrix is resampled together: its pairs are not independent).
    """
    text = "Weights change less per training token late in training (Fig. 12 premise; equal-length intervals)"
    pairs = equal_interval_pairs(changes)
    if not len(pairs):
        return claim(STUDY, text, statistic=_grid_without_equal_intervals(changes), ci="", verdict="inconclusive")
    per_matrix = pairs.groupby(["run", "matrix"])["log_rate_ratio"].mean().to_numpy()
    rng = np.random.default_rng(seed)
    draws = [per_matrix[rng.integers(0, len(per_matrix), len(per_matrix))].mean() for _ in range(bootstrap)]
    low, high = np.percentile(draws, [2.5, 97.5])
    statistic = (
        f"mean log(rate late / rate early) = {per_matrix.mean():.3f} over {len(per_matrix)} matrices, "
        f"{pairs[['run', 'D_from']].drop_duplicates().shape[0]} equal-length interval pairs after warmup"
    )
    return claim(
        STUDY,
        text,
        statistic=statistic,
        ci=f"[{low:.3f}, {high:.3f}]",
        verdict=verdict_from_interval(low, high, "negative"),
    )


EQUAL_LENGTH_TOLERANCE = 0.10  # adjacent intervals count as equal when their token lengths differ by ≤ 10 %


def _intervals(changes: pd.DataFrame) -> pd.DataFrame:
    """Each run's checkpoint intervals after warmup (warmup unknown, as for hub checkpoints: all of them)."""
    warmup = changes["warmup_tokens"].fillna(0) if "warmup_tokens" in changes else 0
    return changes[changes["D_from"] >= warmup].assign(length=lambda f: f["D_to"] - f["D_from"])


def equal_interval_pairs(changes: pd.DataFrame) -> pd.DataFrame:
    """Per matrix, log of the change rate over an interval divided by the rate over the one before it, for
    adjacent post-warmup intervals whose lengths agree within EQUAL_LENGTH_TOLERANCE."""
    intervals = _intervals(changes)
    rate = intervals.assign(rate=intervals["relative_change"] / intervals["length"])
    late = rate.rename(columns={"D_from": "D_mid", "rate": "rate_late", "length": "length_late"})
    early = rate.rename(columns={"D_to": "D_mid", "rate": "rate_early", "length": "length_early"})
    pairs = early.merge(late[["run", "matrix", "D_mid", "rate_late", "length_late"]], on=["run", "matrix", "D_mid"])
    equal = (pairs["length_late"] / pairs["length_early"] - 1).abs() <= EQUAL_LENGTH_TOLERANCE
    pairs = pairs[equal & (pairs["rate_early"] > 0) & (pairs["rate_late"] > 0)]
    return pairs.assign(log_rate_ratio=np.log(pairs["rate_late"] / pairs["rate_early"]))


def _grid_without_equal_intervals(changes: pd.DataFrame) -> str:
    """Why the grid cannot test the claim, in numbers: its post-warmup interval lengths and their ratios."""
    lengths = sorted(_intervals(changes)[["D_from", "D_to"]].drop_duplicates().eval("D_to - D_from").unique())
    ratios = [later / earlier for earlier, later in zip(lengths, lengths[1:])]
    warmup = "warmup not recorded" if "warmup_tokens" not in changes else "after warmup"
    return (
        f"no adjacent intervals of equal length (±{EQUAL_LENGTH_TOLERANCE:.0%}) {warmup}: lengths "
        + ", ".join(f"{length:,.0f}" for length in lengths)
        + " tokens"
        + (", successive ratios " + ", ".join(f"{ratio:.2f}" for ratio in ratios) if ratios else "")
    )
