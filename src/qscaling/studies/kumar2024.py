"""Kumar et al. 2024, post-training quantization: δ_PTQ of annealed models across N and D, by method and bits.

Grid: every (size, budget) with N·D ≤ `max_ND`, annealed by a WSD cooldown branch (or a cosine run per budget),
quantized with GPTQ, AWQ and RTN at INT3–6 (per-channel weights, the paper's setting). The schedule ablation
(Fig. 12) repeats the smallest size's grid with the other annealing schedule.
"""

import numpy as np
import pandas as pd

from qscaling.config import check_sizes, check_weight_spec
from qscaling.shape import ModelShape
from qscaling.studies import Evaluation, Quantization, check_local_models, local_evaluations, ptq_scoring, try_fit
from qscaling.studies.claims import claim, positive_parameter_claim, slope_claim

STUDY = "kumar2024"


def non_embedding_params(config: dict, size: str) -> int:
    return ModelShape(
        **config["ladder"][size], vocab_size=config["corpus"]["vocab_size"], seq_len=config["training"]["seq_len"]
    ).non_embedding_params


def check_config(config: dict) -> None:
    """Sizes, and the weight format at every (method, bits), before any job exists."""
    study, key = config["studies"][STUDY], f"studies.{STUDY}"
    if study["source"] == "local":
        check_local_models(f"{key}.local", study["local"])
    else:
        check_sizes(config, f"{key}.sizes", study["sizes"])
        check_sizes(config, f"{key}.schedule_ablation.size", study["schedule_ablation"]["size"])
    for method in study["methods"]:
        for bits in study["bits"]:
            check_weight_spec(f"{key}.weight_format", method, study["weight_format"], bits=bits)


def plan(config: dict, planner) -> list[Evaluation]:
    """Annealed runs of every (size, budget) in range, or (`source: local`) your own checkpoints as they are."""
    study = config["studies"][STUDY]
    if study["source"] == "local":
        return local_evaluations(STUDY, study["local"], planner)
    evaluations = []
    for size in study["sizes"]:
        n = non_embedding_params(config, size)
        for budget in study["budgets"]:
            if n * budget <= study["max_ND"]:
                run = planner.annealed(size, budget, study["anneal"], study["cooldown_fraction"])
                evaluations.append(Evaluation(STUDY, run, budget))
    ablation = study["schedule_ablation"]
    if ablation["anneal"] != study["anneal"]:
        for budget in ablation["budgets"]:
            run = planner.annealed(ablation["size"], budget, ablation["anneal"], study["cooldown_fraction"])
            evaluations.append(Evaluation(STUDY, run, budget))
    return evaluations


def quantizations(config: dict) -> list[Quantization]:
    study = config["studies"][STUDY]
    return [
        Quantization(method, study["weight_format"].format(bits=bits))
        for method in study["methods"]
        for bits in study["bits"]
    ]


def scoring(config: dict, layout):
    return ptq_scoring(config, layout, STUDY, quantizations(config))


def build_table(rows: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """Tidy PTQ table: `anneal` names how the model was annealed ("imported" for checkpoints trained elsewhere),
    `main` marks the study's own schedule (imported checkpoints are the grid there is)."""
    table = rows.copy()
    table["anneal"] = np.select(
        [table["schedule"] == "cosine", table["schedule"] == "wsd"], ["cosine", "wsd"], default="imported"
    )
    table["main"] = table["anneal"].isin([settings["anneal"], "imported"])
    table["tokens_per_param"] = table["D"] / table["N"]
    table["P_post"] = table["bits"]
    return table.sort_values(["method", "bits", "anneal", "N", "D"]).reset_index(drop=True)


def fit_rows(table: pd.DataFrame, method: str) -> pd.DataFrame:
    """Points the δ_PTQ law is fitted on: the main schedule, this method, δ above twice its paired noise."""
    rows = table[(table["method"] == method) & table["main"] & (table["split"] == "val")]
    return rows[rows["delta"] > 2 * rows["delta_se"]]


def fit_names(settings: dict) -> list[str]:
    return [f"ptq_{method}" for method in settings["methods"]]


def fit_laws(table: pd.DataFrame, settings: dict, *, bootstrap: int = 200) -> dict:
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
        for method in settings["methods"]
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


def claims(tables: dict, fits: dict, settings: dict) -> list[dict]:
    table = tables["table"]
    gptq = table[(table["method"] == "gptq") & table["main"] & (table["split"] == "val")]
    low_bits = gptq[gptq["bits"] == gptq["bits"].min()]
    out = [
        slope_claim(
            STUDY,
            "δ_PTQ grows with training data D at fixed N (Fig. 2, bottom)",
            low_bits,
            x="D",
            y="delta",
            by="N",
            expect="positive",
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
        ),
    ]
    matched = low_bits.assign(ratio=(low_bits["D"] / low_bits["N"]).round(-1))
    out.append(
        slope_claim(
            STUDY,
            "δ_PTQ shrinks with N at a fixed tokens-per-parameter ratio (Fig. 2)",
            matched,
            x="N",
            y="delta",
            by="ratio",
            expect="negative",
        )
    )
    turns = critical_tokens(table)
    lowest = turns[turns["bits"] == turns["bits"].min()]
    out.append(
        claim(
            STUDY,
            "At low bits, post-PTQ loss stops improving and worsens with more data "
            "(a critical data size exists; Fig. 1 left, Eq. 4)",
            statistic=f"{int(lowest['turns_up'].sum())} of {len(lowest)} sizes turn up at INT{int(lowest['bits'].min())}",
            ci="",
            verdict="reproduced"
            if lowest["turns_up"].all()
            else ("inconclusive" if lowest["turns_up"].any() else "not reproduced"),
        )
    )
    per_method = table[table["main"] & (table["split"] == "val") & (table["method"] != "none")]
    mean_delta = per_method[per_method["bits"] <= 4].groupby("method")["delta"].mean()
    if {"gptq", "awq", "rtn"} <= set(mean_delta.index):
        ordered = mean_delta["gptq"] < min(mean_delta["awq"], mean_delta["rtn"])
        out.append(
            claim(
                STUDY,
                "GPTQ degrades less than AWQ and RTN (Figs. 2, 10, 11)",
                statistic=", ".join(f"mean δ {m} {mean_delta[m]:.4f}" for m in ("gptq", "awq", "rtn")),
                ci="INT3–4, all (N, D)",
                verdict="reproduced" if ordered else "not reproduced",
            )
        )
    fitted = fits.get("ptq_gptq")
    if fitted is not None:
        for name, paper in (("gamma_D", 0.5068), ("gamma_N", 0.3439)):
            out.append(
                positive_parameter_claim(
                    STUDY, f"Fitted {name} of δ_PTQ has the paper's sign (paper {paper})", fitted, name
                )
            )
    return out
