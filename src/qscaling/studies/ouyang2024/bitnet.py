"""Ouyang et al. 2024, Fig. 14: BitNet b1.58-style trunks (ternary absmean weights, 8-bit per-token activations,
identity STE) beside the fp32 trunks of the same sizes and recipe, their training loss averaged over equal token spans
after warmup: the `ouyang2024_bitnet` table. Whether the gap widens with training is measured against the seed noise
of that change (the first size run again with `extra_seeds`). Pandas only: the job reads each run's run.json."""

import json
import math

import numpy as np
import pandas as pd

from qscaling.atomic import write_table
from qscaling.noise import OWN_REPEATS, ClaimNoise, noise_floor
from qscaling.studies.claims import INCONCLUSIVE, claim, held_to, student_t_quantile, verdict_from_interval
from qscaling.studies.ouyang2024.grid import BITNET, FULL, STUDY


def bitnet_curves(summary: dict, tokens: int, bins: int) -> pd.DataFrame:
    """One run's training loss averaged over `bins` equal token spans from the end of warmup to `tokens`: bin, D (the
    span's end), loss, loss_se (of the span's mean), points. Spans without a logged step stay out; a run that
    diverged has no rows."""
    if summary.get("diverged"):
        return pd.DataFrame(columns=["bin", "D", "loss", "loss_se", "points"])
    curve = pd.DataFrame(summary["train_loss_curve"], columns=["D", "loss"])
    start = summary["spec"]["warmup_tokens"]
    edges = np.linspace(start, tokens, bins + 1)
    curve = curve[(curve["D"] > start) & (curve["D"] <= tokens)]
    curve = curve.assign(bin=np.clip(np.searchsorted(edges, curve["D"], side="left") - 1, 0, bins - 1))
    grouped = curve.groupby("bin")["loss"]
    frame = pd.DataFrame(
        {"loss": grouped.mean(), "loss_se": grouped.std(ddof=1) / np.sqrt(grouped.count()), "points": grouped.count()}
    ).reset_index()
    return frame.assign(D=edges[frame["bin"] + 1])[["bin", "D", "loss", "loss_se", "points"]]


def bitnet_curves_job(inputs: dict, outputs: dict, params: dict) -> None:
    frames = []
    for path, run in zip(inputs["summaries"], params["runs"]):
        with open(path) as handle:
            summary = json.load(handle)
        frames.append(bitnet_curves(summary, params["tokens"], params["bins"]).assign(**run, run=summary["run_id"]))
    write_table(pd.concat(frames, ignore_index=True), outputs["bitnet"])


def bitnet_gaps(curves: pd.DataFrame) -> pd.DataFrame:
    """BitNet minus fp32 training loss per (size, seed, bin) where both runs logged steps: N, size, seed, bin, D,
    gap, gap_se."""
    keys = ["size", "N", "seed", "bin", "D"]
    pair = curves[curves["precision"] == BITNET].merge(
        curves[curves["precision"] == FULL], on=keys, suffixes=("", "_fp")
    )
    return pair.assign(gap=pair["loss"] - pair["loss_fp"], gap_se=np.hypot(pair["loss_se"], pair["loss_se_fp"]))[
        keys + ["gap", "gap_se"]
    ].sort_values(keys, ignore_index=True)


def bitnet_widening(curves: pd.DataFrame) -> pd.DataFrame:
    """Per (size, seed): how much the BitNet − fp32 gap grew from the first span after warmup to the last."""
    rows = []
    for (size, n, seed), group in bitnet_gaps(curves).groupby(["size", "N", "seed"]):
        first, last = group.iloc[0], group.iloc[-1]
        rows.append(
            {"size": size, "N": n, "seed": seed, "first_gap": first["gap"], "last_gap": last["gap"],
             "widening": last["gap"] - first["gap"], "widening_se": float(np.hypot(first["gap_se"], last["gap_se"]))}
        )  # fmt: skip
    return pd.DataFrame(rows)


BITNET_CLAIM = "BitNet b1.58's training-loss gap to full precision widens with training tokens (Fig. 14)"


WIDENING = "widening of the BitNet − fp32 training-loss gap"  # what σ_seed is the spread of: no seed study measures it


def bitnet_claim(curves: pd.DataFrame, recipe_seed: int, noise: ClaimNoise = OWN_REPEATS) -> dict:
    """The gap's widening at every size (the recipe's seed), against the larger of its span noise (a normal
    quantile: many steps per span) and the seed noise (σ_seed of the widening from `noise`: the MAD of the
    widenings over the seeds of each repeated size, with its t-quantile). Reproduced when every size widens by more
    than that, not reproduced when every size narrows by more; inconclusive otherwise, and always without a
    second seed."""
    widening = bitnet_widening(curves)
    if widening.empty:
        return claim(STUDY, BITNET_CLAIM, statistic="no BitNet and fp32 curves to compare", ci="", verdict=INCONCLUSIVE)
    main = widening[widening["seed"] == recipe_seed].sort_values("N")
    tokens = curves.groupby("size")["D"].max()
    repeats = {(str(size), int(tokens[size])): group["widening"].tolist() for size, group in widening.groupby("size")}
    sigma = noise.sigma(WIDENING, [], repeats)
    seed_half = noise_floor(sigma) if sigma is not None else 0.0
    halves = np.maximum(student_t_quantile(math.inf) * main["widening_se"], seed_half)
    statistic = "; ".join(
        f"{row.size}: gap {row.first_gap:+.3f} → {row.last_gap:+.3f}, widening {row.widening:+.3f}"
        for row in main.itertuples()
    )
    low, high = (main["widening"] - halves).min(), (main["widening"] + halves).max()
    verdict = verdict_from_interval(low, high, "positive") if sigma is not None else INCONCLUSIVE
    row = claim(
        STUDY,
        BITNET_CLAIM,
        statistic=statistic,
        ci=f"every size's widening ± max(1.96 span SE, t·σ_seed): [{low:.3f}, {high:.3f}]",
        verdict=verdict,
    )
    return held_to(row, sigma)
