"""Claims of the law comparison (`qscaling.comparison`): each comparison of two laws that a paper reports, repeated
on the points of this run that both laws apply to, and decided only where the gap between their held-out errors
is larger than separately trained runs make by themselves."""

import numpy as np
import pandas as pd

from qscaling.comparison import IN_SAMPLE, PAPER_COMPARISONS, SELECTIONS, PairedErrors, law_rows, paired_errors
from qscaling.laws import LAWS
from qscaling.noise import ClaimNoise, Sigma, noise_floor
from qscaling.studies.claims import INCONCLUSIVE, claim, floored_by_seed_noise, held_to

STUDY = "law_comparison"
# Columns that make two points the same configuration: what is left between them is the seed.
CONFIGURATION = ["N", "D", "format", "P_w", "P_a", "P_kv", "E", "M", "B", "G"]


def comparison_claims(training: pd.DataFrame, ptq: pd.DataFrame, noise: ClaimNoise) -> list[dict]:
    """One claim per PAPER_COMPARISONS entry whose laws share points in this run."""
    rows = []
    for comparison in PAPER_COMPARISONS:
        paired = paired_errors(comparison, training, ptq)
        if len(paired.points):
            rows.append(paired_claim(paired, loss_sigma(paired.points, training, noise)))
    return rows


def seed_floors(comparison: pd.DataFrame, training: pd.DataFrame, ptq: pd.DataFrame, noise: ClaimNoise) -> pd.DataFrame:
    """`comparison` (`qscaling.comparison.compare`'s table) with `seed_floor` on every held-out row of this run's
    fit of a loss law: the gap in relative error between two laws on its points that seed noise alone makes
    (σ_seed's 95 % t-floor over the points' mean loss, as `paired_claim` decides); NaN elsewhere and where no
    σ_seed is measured."""
    floors = {}
    for name in dict.fromkeys(comparison.loc[comparison["kind"] == "loss", "law"]):
        points = law_rows(LAWS[name], SELECTIONS[name], training, ptq)
        sigma = loss_sigma(points, training, noise) if len(points) else None
        floors[name] = noise_floor(sigma) / float(points["loss"].mean()) if sigma is not None else np.nan
    held_out = (comparison["source"] == "this run's fit") & (comparison["scheme"] != IN_SAMPLE)
    held_out &= comparison["relative_error"].notna()
    return comparison.assign(seed_floor=comparison["law"].map(floors).where(held_out).astype(float))


def paired_claim(paired: PairedErrors, sigma: Sigma | None) -> dict:
    """Reproduced where the law the paper found better has the lower held-out error on the shared points, not
    reproduced where it has the higher; inconclusive where the gap, in nats at the points' mean loss, is inside
    σ_seed's 95 % t-floor (or where either law could not be scored)."""
    comparison = paired.comparison
    text = f"{comparison.better} predicts held-out sizes better than {comparison.worse} ({comparison.source})"
    if not paired.groups:
        row = claim(
            STUDY, text, statistic=paired.note or "no held-out group scored for both", ci="", verdict=INCONCLUSIVE
        )
        return held_to(row, sigma)
    better, worse = paired.mean_errors()
    wins = sum(paired.better[group] < paired.worse[group] for group in paired.groups)
    mean_loss = float(paired.points["loss"].mean())
    row = claim(
        STUDY,
        text,
        statistic=f"{paired.scheme} relative error {better:.2%} vs {worse:.2%} over {len(paired.points)} shared "
        f"points; lower for {comparison.better} at {wins} of {len(paired.groups)} held-out sizes",
        ci="",
        verdict="reproduced" if better < worse else "not reproduced",
    )
    return floored_by_seed_noise(row, abs(worse - better) * mean_loss, sigma, "error gap at the mean loss (nats)")


def loss_sigma(points: pd.DataFrame, training: pd.DataFrame, noise: ClaimNoise) -> Sigma | None:
    """σ_seed of a final loss at the points' cells: the seed study's where the run makes it, else the pooled MAD
    of the repeats among the points (runs of one configuration that differ only in their seed)."""
    cells = [(_size(run), int(budget)) for run, budget in points[["run", "D"]].drop_duplicates().to_numpy()]
    shared = training[training["run"].isin(points["run"])]
    repeats = {
        (_configuration(group.iloc[0]), int(group["D"].iloc[0])): group["loss"].tolist()
        for _, group in shared.groupby(CONFIGURATION, dropna=False)
        if len(group) >= 2
    }
    return noise.sigma("loss", cells, repeats)


def _configuration(point: pd.Series) -> str:
    """ "N21k int P_w 4": a point's size and the precision it trained in, as σ_seed's source names its cell."""
    if point["format"] == "none":
        return f"{_size(point['run'])} full precision"
    finite = [name for name in CONFIGURATION[3:] if pd.notna(point[name]) and np.isfinite(point[name])]
    return " ".join([_size(point["run"]), point["format"], *(f"{name} {point[name]:g}" for name in finite)])


def _size(run: str) -> str:
    """A trained run's size label: the part of its id before the hash (`qscaling.runspec.RunSpec.run_id`)."""
    return run.rsplit("-", 1)[0]
