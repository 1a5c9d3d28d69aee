"""Kumar et al. 2024, post-training quantization: δ_PTQ of annealed models across N and D, by method and bits.

Grid (`grid`): every (size, budget) with N·D ≤ `max_ND` and D/N ≥ `min_tokens_per_param`, annealed by a WSD cooldown
branch (or a cosine run per budget), quantized with GPTQ, AWQ and RTN at INT3–6 (per-channel weights, the paper's
setting). The schedule ablation (Fig. 12) repeats the smallest size's grid with the other annealing schedule. Here:
the tidy table, the δ_PTQ law fitted per method, the critical data size and the claims.
"""

import numpy as np
import pandas as pd

from qscaling.laws import kumar2024 as law
from qscaling.laws import try_fit
from qscaling.laws.baseline import KUMAR2024_CHINCHILLA
from qscaling.studies.claims import claim, positive_parameter_claim, slope_claim
from qscaling.studies.kumar2024.grid import STUDY
from qscaling.studies.kumar2024.settings import Kumar2024Settings

_PTQ_PAPER = law.PTQ.paper_params["table2"]  # C_T, γ_D, γ_N, γ_post of Table 2


def build_table(rows: pd.DataFrame, settings: Kumar2024Settings) -> pd.DataFrame:
    """Tidy PTQ table: `anneal` names how the model was annealed ("imported" for checkpoints trained elsewhere),
    `main` marks the study's own schedule (imported checkpoints are the grid there is)."""
    table = rows.copy()
    table["anneal"] = np.select(
        [table["schedule"] == "cosine", table["schedule"] == "wsd"], ["cosine", "wsd"], default="imported"
    )
    table["main"] = table["anneal"].isin([settings.anneal, "imported"])
    table["tokens_per_param"] = table["D"] / table["N"]
    table["P_post"] = table["bits"]
    return table.sort_values(["method", "bits", "anneal", "N", "D"]).reset_index(drop=True)


def fit_rows(table: pd.DataFrame, method: str) -> pd.DataFrame:
    """Points the δ_PTQ law is fitted on: the main schedule, this method, δ above twice its paired noise."""
    rows = table[(table["method"] == method) & table["main"] & (table["split"] == "val")]
    return rows[rows["delta"] > 2 * rows["delta_se"]]


def fit_names(settings: Kumar2024Settings) -> list[str]:
    return [f"ptq_{method}" for method in settings.methods]


def fit_laws(table: pd.DataFrame, settings: Kumar2024Settings, *, bootstrap: int = 200) -> dict:
    return {
        f"ptq_{method}": try_fit(
            "kumar2024.ptq",
            fit_rows(table, method),
            target="delta",
            bootstrap=bootstrap,
            group_col="N",
            run_col="run",
            seed=0,
        )
        for method in settings.methods
    }


def critical_tokens(table: pd.DataFrame, method: str = "gptq") -> pd.DataFrame:
    """Per (N, bits): the budget with the lowest post-PTQ loss, and whether more data made it worse afterwards."""
    rows = table[(table["method"] == method) & table["main"] & (table["split"] == "val")]
    records = []
    for (n, bits), group in rows.groupby(["N", "bits"]):
        group = group.sort_values("D")
        best = group.loc[group["loss"].idxmin()]
        records.append(
            {
                "N": n,
                "bits": bits,
                "D_best": best["D"],
                "loss_best": best["loss"],
                "turns_up": bool(best["D"] < group["D"].max()),
            }
        )
    return pd.DataFrame(records)


def critical_data_sizes(table: pd.DataFrame, fit, method: str = "gptq") -> pd.DataFrame:
    """Per size at the lowest bit width: the fitted law's D_crit (Eq. 4's derived size beyond which more data
    raises post-PTQ loss), the grid's largest D, whether the grid reaches D_crit, and whether the measured loss
    turned up. The δ_PTQ fit has no data term: B and β come from the fit when it has them, else from Table 2."""
    turns = critical_tokens(table, method)
    lowest = turns[turns["bits"] == turns["bits"].min()]
    rows = table[(table["method"] == method) & table["main"] & (table["split"] == "val")]
    largest = rows.groupby("N")["D"].max()
    B, beta = fit.params.get("B", KUMAR2024_CHINCHILLA["B"]), fit.params.get("alpha", KUMAR2024_CHINCHILLA["alpha"])
    d_crit = law.ptq_critical_data_size(fit.params, lowest["N"].to_numpy(float), lowest["bits"], B=B, beta=beta)
    return lowest.assign(
        D_crit=np.asarray(d_crit, dtype=float),
        D_max=lowest["N"].map(largest).to_numpy(float),
    ).assign(reaches=lambda frame: frame["D_max"] >= frame["D_crit"])[
        ["N", "bits", "D_crit", "D_max", "reaches", "turns_up", "D_best"]
    ]


def critical_data_size_claim(table: pd.DataFrame, fit) -> dict:
    """Decided only by sizes whose grid reaches the fitted D_crit: a grid that stops short of it cannot show
    the turn-up, whatever the loss does there."""
    text = (
        "At low bits, post-PTQ loss stops improving and worsens with more data "
        "(a critical data size exists; Fig. 1 left, Eq. 4)"
    )
    if fit is None:
        return claim(STUDY, text, statistic="no GPTQ δ_PTQ fit to derive D_crit from", ci="", verdict="inconclusive")
    sizes = critical_data_sizes(table, fit)
    source = "fit" if "B" in fit.params else "Table 2"
    per_size = ", ".join(
        f"N={int(row.N):,}: D_crit {row.D_crit:.3g} vs grid max {row.D_max:.3g}"
        + (" (turns up)" if row.turns_up else "")
        for row in sizes.itertuples()
    )
    reached = sizes[sizes["reaches"]]
    statistic = (
        f"INT{int(sizes['bits'].iloc[0])} GPTQ-fit D_crit (B, β of {source}): {per_size}; "
        f"{len(reached)} of {len(sizes)} grids reach D_crit, {int(sizes['turns_up'].sum())} of {len(sizes)} turn up"
    )
    if reached.empty:
        verdict = "inconclusive"
    elif reached["turns_up"].all():
        verdict = "reproduced"
    else:
        verdict = "not reproduced" if not reached["turns_up"].any() else "inconclusive"
    return claim(STUDY, text, statistic=statistic, ci="", verdict=verdict)


def schedule_matched_cells(table: pd.DataFrame, method: str = "gptq") -> pd.DataFrame:
    """δ_PTQ of the same (N, D, bits) under both annealing schedules: one row per cell, a column per schedule
    (`delta_<anneal>`, `delta_se_<anneal>`)."""
    rows = table[(table["method"] == method) & (table["split"] == "val") & (table["anneal"] != "imported")]
    wide = rows.pivot_table(index=["N", "D", "bits"], columns="anneal", values=["delta", "delta_se"])
    wide.columns = [f"{value}_{anneal}" for value, anneal in wide.columns]
    return wide.dropna().reset_index()


def schedule_ratio(table: pd.DataFrame, *, bootstrap: int = 1000, seed: int = 0) -> dict | None:
    """Mean δ_PTQ under the ablation schedule over mean δ_PTQ under the main one, across matched cells, with a
    percentile bootstrap CI: cells resampled, and each δ redrawn within its paired noise (`delta_se`).
    None when no cell was run under both."""
    cells = schedule_matched_cells(table)
    trained = table[table["anneal"] != "imported"]
    main = trained.loc[trained["main"], "anneal"]
    other = trained.loc[~trained["main"], "anneal"]
    if cells.empty or main.empty or other.empty:
        return None
    main, other = main.iloc[0], other.iloc[0]
    rng = np.random.default_rng(seed)

    def redrawn(frame, anneal):
        return frame[f"delta_{anneal}"] + frame[f"delta_se_{anneal}"] * rng.standard_normal(len(frame))

    draws = []
    for _ in range(bootstrap):
        sample = cells.iloc[rng.integers(0, len(cells), len(cells))]
        denominator = redrawn(sample, main).mean()
        draws.append(redrawn(sample, other).mean() / denominator if denominator > 0 else np.nan)
    low, high = np.nanpercentile(draws, [2.5, 97.5])
    denominator = cells[f"delta_{main}"].mean()
    ratio = cells[f"delta_{other}"].mean() / denominator if denominator > 0 else np.nan
    return {"main": main, "other": other, "ratio": ratio, "low": low, "high": high, "cells": len(cells)}


def schedule_claim(table: pd.DataFrame) -> dict | None:
    """Whether δ_PTQ depends on how the model was annealed: reproduced when the ratio's bootstrap CI excludes 1.
    A CI covering 1 is inconclusive, not "no difference": that would need an equivalence margin the paper gives
    no ground for."""
    found = schedule_ratio(table)
    if found is None:
        return None
    text = (
        f"δ_PTQ differs between annealing schedules ({found['other']} vs {found['main']}; "
        "this run's ablation, not the paper's linear decay, Fig. 12)"
    )
    statistic = (
        f"mean δ {found['other']} / mean δ {found['main']} = {found['ratio']:.2f} "
        f"(GPTQ, {found['cells']} matched (N, D, bits) cells)"
    )
    differs = found["low"] > 1 or found["high"] < 1
    return claim(
        STUDY,
        text,
        statistic=statistic,
        ci=f"[{found['low']:.2f}, {found['high']:.2f}]",
        verdict="reproduced" if differs else "inconclusive",
    )


def slope_claims(table: pd.DataFrame) -> list[dict]:
    """δ_PTQ's trends in D, bits and N (GPTQ, the main schedule), each slope against the paper's constant."""
    gptq = table[(table["method"] == "gptq") & table["main"] & (table["split"] == "val")]
    low_bits = gptq[gptq["bits"] == gptq["bits"].min()]
    return [
        slope_claim(
            STUDY,
            "δ_PTQ grows with training data D at fixed N (Fig. 2, bottom)",
            low_bits,
            x="D",
            y="delta",
            by="N",
            expect="positive",
            paper=_PTQ_PAPER["gamma_D"],
        ),
        slope_claim(
            STUDY,
            "δ_PTQ falls roughly exponentially with post-training bits (Eq. 2)",
            gptq[gptq["delta"] > 0],
            x="bits",
            y="delta",
            by=["N", "D"],
            expect="negative",
            log_x=False,
            paper=-1 / _PTQ_PAPER["gamma_post"],
        ),
        # At fixed D, as the paper states it: at a fixed ratio D/N its own constants predict growth, N^(γ_D − γ_N).
        slope_claim(
            STUDY,
            "δ_PTQ shrinks with N at fixed training data D (Fig. 2; slope −γ_N)",
            low_bits,
            x="N",
            y="delta",
            by="D",
            expect="negative",
            paper=-_PTQ_PAPER["gamma_N"],
        ),
    ]


def method_order_claim(table: pd.DataFrame) -> dict | None:
    """GPTQ's mean δ at INT3–4 below AWQ's and RTN's; None unless all three methods ran."""
    per_method = table[table["main"] & (table["split"] == "val") & (table["method"] != "none")]
    mean_delta = per_method[per_method["bits"] <= 4].groupby("method")["delta"].mean()
    if not {"gptq", "awq", "rtn"} <= set(mean_delta.index):
        return None
    ordered = mean_delta["gptq"] < min(mean_delta["awq"], mean_delta["rtn"])
    return claim(
        STUDY,
        "GPTQ degrades less than AWQ and RTN (Figs. 2, 10, 11)",
        statistic=", ".join(f"mean δ {m} {mean_delta[m]:.4f}" for m in ("gptq", "awq", "rtn")),
        ci="INT3–4, all (N, D)",
        verdict="reproduced" if ordered else "not reproduced",
    )


def claims(tables: dict, fits: dict, settings: Kumar2024Settings) -> list[dict]:
    table = tables["table"]
    out = [*slope_claims(table), critical_data_size_claim(table, fits.get("ptq_gptq"))]
    out += [found for found in (schedule_claim(table), method_order_claim(table)) if found is not None]
    fitted = fits.get("ptq_gptq")
    if fitted is not None:
        for name in ("gamma_D", "gamma_N"):
            paper = _PTQ_PAPER[name]
            text = f"Fitted {name} of δ_PTQ has the paper's sign (paper {paper})"
            out.append(positive_parameter_claim(STUDY, text, fitted, name, paper=paper))
    return out
