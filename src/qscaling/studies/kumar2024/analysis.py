"""Kumar et al. 2024, post-training quantization: δ_PTQ of annealed models across N and D, by method and bits.

Grid (`grid`): every (size, budget) with N·D ≤ `max_ND` and D/N ≥ `min_tokens_per_param`, annealed by a WSD cooldown
branch (or a cosine run per budget), quantized with GPTQ, AWQ and RTN at INT3–6 (per-channel weights, the paper's
setting). The schedule ablation (Fig. 12) repeats the smallest size's grid with the other annealing schedule. Here:
the tidy table, the δ_PTQ law fitted per method, the critical data size and the claims.
"""

import math

import numpy as np
import pandas as pd

from qscaling.comparison import full_precision, ptq_frame
from qscaling.laws import kumar2024 as law
from qscaling.laws import try_fit
from qscaling.laws.baseline import KUMAR2024_CHINCHILLA
from qscaling.noise import OWN_REPEATS, ClaimNoise, own_repeats_sigma
from qscaling.studies.claims import (
    INCONCLUSIVE,
    claim,
    positive_parameter_claim,
    slope_claim,
    t_interval,
    verdict_from_interval,
)
from qscaling.studies.kumar2024.grid import STUDY
from qscaling.studies.kumar2024.settings import Kumar2024Settings

_PTQ_PAPER = law.PTQ.paper_params["table2"]  # C_T, γ_D, γ_N, γ_post of Table 2
# Schedules whose δ_PTQ ratio is known to lie within 80–125 % count as not differing: the conventional
# bioequivalence bounds, fixed before any run (the paper gives no margin of its own).
EQUIVALENT_RATIO = (0.8, 1.25)


def build_table(rows: pd.DataFrame, settings: Kumar2024Settings) -> pd.DataFrame:
    """Tidy PTQ table: `anneal` names how the model was annealed ("imported" for checkpoints trained elsewhere),
    `repeat` marks a grid point trained again at another seed, `main` the grid itself: the study's own schedule at
    the recipe's seed (imported checkpoints are the grid there is)."""
    table = rows.copy()
    table["anneal"] = np.select(
        [table["schedule"] == "cosine", table["schedule"] == "wsd"], ["cosine", "wsd"], default="imported"
    )
    table["repeat"] = table["repeat"].fillna(False).astype(bool) if "repeat" in table else False
    table["main"] = table["anneal"].isin([settings.anneal, "imported"]) & ~table["repeat"]
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
    rows = rows[~rows["repeat"]]
    wide = rows.pivot_table(index=["N", "D", "bits"], columns="anneal", values=["delta", "delta_se"])
    wide.columns = [f"{value}_{anneal}" for value, anneal in wide.columns]
    return wide.dropna().reset_index()


def pair_log_ratios(cells: pd.DataFrame, main: str, other: str) -> pd.DataFrame:
    """Per (N, D) run pair (one model trained under each schedule) with positive mean δ under both: the log of
    mean δ `other` over mean δ `main` across bits (`log_ratio`), and its evaluation variance (`variance`, by the
    delta method from each cell's `delta_se`)."""
    pairs = []
    for (n, d), group in cells.groupby(["N", "D"]):
        means = {anneal: float(group[f"delta_{anneal}"].mean()) for anneal in (main, other)}
        if min(means.values()) <= 0:
            continue
        variance = sum(float((group[f"delta_se_{a}"] ** 2).sum()) / (len(group) * means[a]) ** 2 for a in means)
        pairs.append({"N": n, "D": d, "log_ratio": math.log(means[other] / means[main]), "variance": variance})
    return pd.DataFrame(pairs, columns=["N", "D", "log_ratio", "variance"])


def schedule_ratio(table: pd.DataFrame) -> dict | None:
    """δ_PTQ under the ablation schedule over δ_PTQ under the main one: `ratio` the geometric mean over run pairs
    of their ratio of mean δ (`pair_log_ratios`), its CI t-based over the pairs (pairs − 1 dof). Two models trained
    apart differ by their runs' noise as well as by schedule, and the pairs' spread holds it (with fewer than two
    pairs the CI is unbounded); where that spread happens to fall below the evaluation noise, the latter stands.
    None when no cell was run under both."""
    cells = schedule_matched_cells(table)
    trained = table[(table["anneal"] != "imported") & ~table["repeat"]]
    main = trained.loc[trained["main"], "anneal"]
    other = trained.loc[~trained["main"], "anneal"]
    if cells.empty or main.empty or other.empty:
        return None
    main, other = main.iloc[0], other.iloc[0]
    pairs = pair_log_ratios(cells, main, other)
    count = len(pairs)
    spread = float(pairs["log_ratio"].var(ddof=1)) if count >= 2 else math.inf
    se = math.sqrt(max(spread, float(pairs["variance"].mean())) / count) if count else math.inf
    estimate = float(pairs["log_ratio"].mean()) if count else math.nan
    low, high = t_interval(estimate, se, count - 1)
    return {"main": main, "other": other, "ratio": math.exp(estimate), "low": math.exp(low),
            "high": math.exp(high), "cells": len(cells), "pairs": count}  # fmt: skip


def schedule_claim(table: pd.DataFrame) -> dict | None:
    """Whether δ_PTQ depends on how the model was annealed: reproduced when the ratio's CI excludes 1, not
    reproduced when it lies within EQUIVALENT_RATIO (the schedules are shown not to differ by more), inconclusive
    otherwise."""
    found = schedule_ratio(table)
    if found is None:
        return None
    text = (
        f"δ_PTQ differs between annealing schedules ({found['other']} vs {found['main']}; "
        "this run's ablation, not the paper's linear decay, Fig. 12)"
    )
    statistic = (
        f"geometric mean over {found['pairs']} run pairs of mean δ {found['other']} / mean δ {found['main']} = "
        f"{found['ratio']:.2f} (GPTQ, {found['cells']} matched (N, D, bits) cells)"
    )
    low, high = found["low"], found["high"]
    if low > 1 or high < 1:
        verdict = "reproduced"
    elif EQUIVALENT_RATIO[0] <= low and high <= EQUIVALENT_RATIO[1]:
        verdict = "not reproduced"
    else:
        verdict = INCONCLUSIVE
    ci = (
        f"[{low:.2f}, {high:.2f}] (t over run pairs: their spread holds the runs' noise, bar the WSD trunk they "
        f"share; equivalent within {EQUIVALENT_RATIO[0]:g}–{EQUIVALENT_RATIO[1]:g})"
    )
    return claim(STUDY, text, statistic=statistic, ci=ci, verdict=verdict)


def seed_spread(table: pd.DataFrame) -> pd.DataFrame:
    """How far separately trained runs scatter, from the grid points repeated at other seeds: per (method, bits),
    `sd` is the seed-to-seed SD of log δ_PTQ (a relative SD of δ, as δ grows tenfold over the grid's budgets) and,
    for the unquantized model (method "none"), the SD of its loss in nats; each the MAD of the seeds at a repeated
    point, pooled over those points (`qscaling.noise.own_repeats_sigma`), with its `dof`, `seeds` and `points`.
    Empty where nothing was repeated."""
    columns = ["method", "bits", "sd", "dof", "seeds", "points"]
    if not table["repeat"].any():
        return pd.DataFrame(columns=columns)
    rows = table[(table["split"] == "val") & (table["main"] | table["repeat"])]
    repeated = rows.loc[rows["repeat"], ["N", "D"]].drop_duplicates()
    rows = rows.merge(repeated, on=["N", "D"])
    records = []
    for (method, bits), group in rows.groupby(["method", "bits"]):
        values = group["loss"] if method == "none" else np.log(group["delta"].where(group["delta"] > 0))
        repeats = {(str(size), int(d)): list(cell) for (size, d), cell in values.groupby([group["size"], group["D"]])}
        sigma = own_repeats_sigma(repeats)
        if sigma is not None:
            records.append({"method": method, "bits": bits, "sd": sigma.value, "dof": sigma.dof,
                            "seeds": sigma.runs, "points": len(repeats)})  # fmt: skip
    return pd.DataFrame(records, columns=columns)


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


def method_differences(table: pd.DataFrame) -> pd.DataFrame:
    """Per INT3–4 (N, D, bits) cell of the main grid where all three methods ran: δ of AWQ and of RTN less GPTQ's
    on the same checkpoint (`awq`, `rtn`; nats)."""
    rows = table[table["main"] & (table["split"] == "val") & table["method"].isin(["gptq", "awq", "rtn"])]
    wide = rows[rows["bits"] <= 4].pivot_table(index=["N", "D", "bits"], columns="method", values="delta").dropna()
    if not {"gptq", "awq", "rtn"} <= set(wide.columns):
        return pd.DataFrame(columns=["N", "D", "bits", "awq", "rtn"])
    return pd.DataFrame({m: wide[m] - wide["gptq"] for m in ("awq", "rtn")}).reset_index()


def method_order_claim(table: pd.DataFrame) -> dict | None:
    """GPTQ's δ below AWQ's and RTN's at INT3–4: the mean paired difference (each method on the same checkpoint,
    so only evaluation noise and the cells' spread remain), its CI t-based over checkpoints (the unit that varies
    independently; a checkpoint's bits share it), checkpoints − 1 dof. Reproduced where both differences' CIs
    lie above 0, not reproduced where either lies below, inconclusive otherwise; None unless all three ran."""
    differences = method_differences(table)
    if differences.empty:
        return None
    per_checkpoint = differences.groupby(["N", "D"])[["awq", "rtn"]].mean()
    count = len(per_checkpoint)
    intervals = {
        method: t_interval(
            float(per_checkpoint[method].mean()),
            float(per_checkpoint[method].std(ddof=1)) / math.sqrt(count) if count >= 2 else math.inf,
            count - 1,
        )
        for method in ("awq", "rtn")
    }
    verdicts = {verdict_from_interval(*interval, "positive") for interval in intervals.values()}
    verdict = (
        "not reproduced"
        if "not reproduced" in verdicts
        else ("reproduced" if verdicts == {"reproduced"} else INCONCLUSIVE)
    )
    wins = ", ".join(f"{m.upper()} in {(differences[m] > 0).mean():.0%}" for m in ("awq", "rtn"))
    return claim(
        STUDY,
        "GPTQ degrades less than AWQ and RTN (Figs. 2, 10, 11)",
        statistic=f"mean δ − δ_GPTQ: AWQ {differences['awq'].mean():.2e}, RTN {differences['rtn'].mean():.2e} nats "
        f"over {len(differences)} INT3–4 cells; GPTQ beats {wins} of them",
        ci=", ".join(f"{m.upper()} − GPTQ [{low:.2e}, {high:.2e}]" for m, (low, high) in intervals.items())
        + f" (paired per checkpoint; t over {count} checkpoints)",
        verdict=verdict,
    )


def claims(tables: dict, fits: dict, settings: Kumar2024Settings, noise: ClaimNoise = OWN_REPEATS) -> list[dict]:
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


def law_points(table: pd.DataFrame, settings: Kumar2024Settings) -> dict:
    """The main schedule's annealed checkpoints for the law comparison (`qscaling.comparison`): their held-out loss
    as full-precision training points, and each post-training quantization's δ."""
    rows = table[(table["split"] == "val") & table["main"]]
    unquantized = rows[rows["method"] == "none"]
    quantized = rows[rows["method"] != "none"]
    return {
        "training": full_precision(unquantized[["run", "N", "D", "loss"]], STUDY),
        "ptq": ptq_frame(quantized[["run", "N", "D", "method", "bits", "base_loss", "delta"]].assign(study=STUDY)),
    }
