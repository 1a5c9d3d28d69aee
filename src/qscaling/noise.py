"""One noise model for every claim: σ_seed, the seed-to-seed spread of one run's value (a loss, a δ; nats),
measured robustly at a few (size, token budget) cells, with t-quantile intervals and floors, and comparisons that
count a shared full-precision partner's noise once. Torch-free: claims and the DAG build may import it.

- σ_seed of one cell is the MAD of its seeds (median absolute deviation from their median) × 1.4826 × a
  finite-sample factor that makes it unbiased for normal seeds: a bad seed among three or more leaves it bounded
  where it drives the sample SD (five seeds, one 20 σ off: the MAD reads 1.3 σ, the SD 9 σ).
- The MAD knows σ less well than the SD of the same seeds, so its t-quantiles use fewer degrees of freedom than
  n − 1 (MAD_DOF): with n − 1, intervals from three seeds' MAD cover 87 % instead of 95 %, from five seeds' 90 %.
- δs of several variants against one full-precision partner share that partner's noise: a variant-vs-variant
  difference cancels it (`variant_differences`), and a statistic over such δs is bootstrapped over partner
  clusters, not rows (`cluster_bootstrap`).
"""

import dataclasses
import json
import math
import os
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from qscaling.atomic import write_json

NOISE_PATH = "results/fits/noise.json"
Cell = tuple[str, int]  # (model size, token budget): where σ_seed was measured or is asked for

MAD, POOLED_MAD, RULE = "MAD", "pooled MAD", "conservative rule"
ESTIMATORS = (MAD, POOLED_MAD, RULE)
RULE_TEXT = "largest σ_seed of any measured cell, with the smallest dof among them"

NORMAL_MAD_SCALE = 1.482602218505602  # 1 / Φ⁻¹(3/4): the MAD of N(μ, σ²) is σ / 1.4826
# b_n, with E[1.4826 · b_n · MAD] = σ for n normal seeds and the traditional sample median: C_n / 1.4826 from the
# simulated factors of Akinshin 2022 (arXiv:2207.12005), after Park, Kim & Wang 2020. Croux & Rousseeuw's
# n / (n − 0.8) is within 0.1 % of them from 20 seeds on, but up to 8 % off below ten.
MAD_FACTORS = {
    2: 1.1955, 3: 1.4872, 4: 1.3606, 5: 1.2168, 6: 1.1896, 7: 1.1380, 8: 1.1274, 9: 1.1012, 10: 1.0957,
    11: 1.0800, 12: 1.0766, 13: 1.0661, 14: 1.0638, 15: 1.0563, 16: 1.0547, 17: 1.0491, 18: 1.0479, 19: 1.0435,
    20: 1.0425,
}  # fmt: skip
# ν_n: the dof whose two-sided 95 % t-quantile is the 95 % quantile of Z / (σ̂_MAD / σ) for n normal seeds (8M
# simulated samples each, coverage averaged analytically over σ̂; n = 2 exact). Three seeds are worth one dof: the
# MAD of three is the smaller gap to their median. Beyond the table 0.46 (n − 1), below every value simulated up to
# 400 seeds. Matched at 95 %, the level of every claim; other levels are close, not exact.
MAD_DOF = {
    2: 1.107, 3: 1.026, 4: 2.052, 5: 1.989, 6: 2.964, 7: 2.925, 8: 3.877, 9: 3.855, 10: 4.802, 11: 4.787,
    12: 5.725, 13: 5.710, 14: 6.645, 15: 6.643, 16: 7.570, 17: 7.567, 18: 8.504, 19: 8.480, 20: 9.426,
}  # fmt: skip


def format_tokens(budget: int) -> str:
    """500000 → "0.5M", 20480 → "20.5k", 3000000000 → "3B": millions from 100k on, as the configs' budgets read."""
    for unit, scale, start in (("B", 1e9, 1e9), ("M", 1e6, 1e5), ("k", 1e3, 1e3)):
        if budget >= start:
            return f"{budget / scale:.3g}{unit}"
    return str(budget)


def describe_cell(cell: Cell) -> str:
    size, budget = cell
    return f"{size} / {format_tokens(budget)} tokens"


@dataclass(frozen=True)
class Sigma:
    """σ_seed: the standard deviation (nats) of one run's value between seeds, the degrees of freedom of its
    t-quantiles, the runs it was measured on, its estimator (one of ESTIMATORS) and `source`, the claims table's
    account of it ("σ_seed 0.012 nats, MAD of 5 seeds at N21k / 0.5M tokens, 2.0 dof")."""

    value: float
    dof: float
    runs: int
    estimator: str
    source: str

    def __post_init__(self):
        if not (math.isfinite(self.value) and self.value > 0):
            raise ValueError(f"σ_seed must be finite and > 0 nats, got {self.value} ({self.source})")
        if not (math.isfinite(self.dof) and self.dof > 0):
            raise ValueError(f"σ_seed's dof must be finite and > 0, got {self.dof} ({self.source})")
        if self.runs < 2:
            raise ValueError(f"σ_seed needs at least 2 runs, got {self.runs} ({self.source})")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"σ_seed estimator {self.estimator!r} is not one of {ESTIMATORS}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, payload: Mapping) -> "Sigma":
        names = [field.name for field in dataclasses.fields(cls)]
        if sorted(payload) != sorted(names):
            raise ValueError(f"a σ_seed entry has the keys {sorted(names)}, got {sorted(payload)}")
        return cls(
            value=float(payload["value"]),
            dof=float(payload["dof"]),
            runs=int(payload["runs"]),
            estimator=str(payload["estimator"]),
            source=str(payload["source"]),
        )


def mad_factor(seeds: int) -> float:
    """b_n: the MAD's finite-sample factor for `seeds` normal values."""
    return MAD_FACTORS.get(seeds, seeds / (seeds - 0.8))


def mad_dof(seeds: int) -> float:
    """The degrees of freedom of a MAD of `seeds` values in a t-quantile."""
    return MAD_DOF.get(seeds, 0.46 * (seeds - 1))


def mad_scale(values, axis: int = -1) -> np.ndarray:
    """σ̂ = 1.4826 · b_n · median |x − median x| along `axis` (n = its length): unbiased for normal values."""
    values = np.asarray(values, dtype=float)
    seeds = values.shape[axis]
    if seeds < 2:
        raise ValueError(f"a MAD needs at least 2 values along axis {axis}, got {seeds}")
    deviations = np.abs(values - np.median(values, axis=axis, keepdims=True))
    return NORMAL_MAD_SCALE * mad_factor(seeds) * np.median(deviations, axis=axis)


def mad_sigma(values: Sequence[float], cell: Cell | None = None) -> Sigma:
    """σ_seed from one cell's per-seed values (one per separately seeded run), with MAD_DOF degrees of freedom.
    Two seeds give their scaled |difference|, robust to nothing; from three on one bad seed is outvoted, though of
    three it leaves the gap between the other two, which reads about 2.5 σ: bounded, and on the safe side."""
    where = f" at {describe_cell(cell)}" if cell is not None else ""
    values = np.asarray(values, dtype=float).ravel()
    if len(values) < 2:
        raise ValueError(f"σ_seed{where}: needs at least 2 seeds, got {len(values)}")
    if not np.isfinite(values).all():
        bad = int((~np.isfinite(values)).sum())
        raise ValueError(f"σ_seed{where}: {bad} of {len(values)} values are NaN or infinite (leave diverged runs out)")
    value, dof = float(mad_scale(values)), mad_dof(len(values))
    if value == 0:
        raise ValueError(f"σ_seed{where}: the MAD of {values.tolist()} is 0 (half the seeds agree exactly: repeats?)")
    source = f"σ_seed {value:.2g} nats, MAD of {len(values)} seeds{where}, {dof:.1f} dof"
    return Sigma(value, dof, len(values), MAD, source)


def pooled_sigma(values_by_cell: Mapping[Cell, Sequence[float]]) -> Sigma:
    """One σ_seed from several cells, each measured around its own median (so cells may differ in level, not in
    spread): the dof-weighted mean of the cells' unbiased MADs, with their dof summed (95 % intervals then cover
    95 % in simulation, where the dof-weighted root mean square over-covers)."""
    if not values_by_cell:
        raise ValueError("pooling σ_seed needs at least one cell with seeds")
    cells = {cell: mad_sigma(values, cell) for cell, values in values_by_cell.items()}
    dof = sum(sigma.dof for sigma in cells.values())
    value = sum(sigma.dof * sigma.value for sigma in cells.values()) / dof
    runs = sum(sigma.runs for sigma in cells.values())
    names = ", ".join(describe_cell(cell) for cell in cells)
    source = f"σ_seed {value:.2g} nats, MAD pooled over {len(cells)} cells ({names}; {runs} seeds), {dof:.1f} dof"
    return Sigma(value, dof, runs, POOLED_MAD, source)


@dataclass(frozen=True)
class NoiseModel:
    """σ_seed of `quantity` at each measured (size, budget) cell, and by a conservative rule elsewhere: the largest
    measured σ_seed with the smallest measured dof. Seed noise has no law in N and D here to scale a neighbour by,
    and the measured cells are few; so an unmeasured cell gets the worst that was seen, and its `source` says so
    (not a bound: a cell far from every measured one may be noisier still)."""

    quantity: str  # what σ_seed is the spread of, e.g. "final validation loss"
    cells: Mapping[Cell, Sigma]

    def __post_init__(self):
        if not self.cells:
            raise ValueError(f"a noise model of {self.quantity} needs at least one measured cell")

    @classmethod
    def from_frame(
        cls, frame: pd.DataFrame, *, value: str, quantity: str, size: str = "size", budget: str = "D"
    ) -> "NoiseModel":
        """One cell per (size, budget) of a tidy frame with a row per seed: every cell it holds needs 2+ seeds."""
        missing = [column for column in (value, size, budget) if column not in frame]
        if missing:
            raise ValueError(f"noise model of {quantity}: the frame lacks {missing}; it has {list(frame.columns)}")
        cells = {}
        for (name, tokens), group in frame.groupby([size, budget], sort=True):
            cell = (str(name), int(tokens))
            cells[cell] = mad_sigma(group[value].to_numpy(float), cell)
        return cls(quantity, cells)

    def sigma(self, size: str, budget: int) -> Sigma:
        """σ_seed at (size, budget): measured there, or by the conservative rule."""
        cell = (size, int(budget))
        return self.cells[cell] if cell in self.cells else self._by_rule(cell)

    def _by_rule(self, cell: Cell) -> Sigma:
        conservative = largest_sigma(self.cells.values())
        measured = ", ".join(describe_cell(each) for each in sorted(self.cells))
        source = (
            f"σ_seed {conservative.value:.2g} nats at {describe_cell(cell)}, not measured there: by rule, the "
            f"{RULE_TEXT} ({len(self.cells)} measured: {measured}), {conservative.dof:.1f} dof"
        )
        return dataclasses.replace(conservative, estimator=RULE, source=source)

    def to_dict(self) -> dict:
        cells = [
            {"size": size, "budget": budget, **sigma.to_dict()} for (size, budget), sigma in sorted(self.cells.items())
        ]
        return {"quantity": self.quantity, "rule": RULE_TEXT, "cells": cells}

    @classmethod
    def from_dict(cls, payload: Mapping) -> "NoiseModel":
        if sorted(payload) != ["cells", "quantity", "rule"] or payload["rule"] != RULE_TEXT:
            raise ValueError(f"not a noise model with the rule {RULE_TEXT!r}: keys {sorted(payload)}")
        cells = {}
        for entry in payload["cells"]:
            entry = dict(entry)
            cell = (str(entry.pop("size")), int(entry.pop("budget")))
            cells[cell] = Sigma.from_dict(entry)
        return cls(str(payload["quantity"]), cells)


def write_noise_model(model: NoiseModel, path: str | os.PathLike = NOISE_PATH) -> None:
    write_json(path, model.to_dict())


def read_noise_model(path: str | os.PathLike = NOISE_PATH) -> NoiseModel:
    try:
        return NoiseModel.from_dict(json.loads(Path(path).read_text()))
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from e


def write_noise_models(models: Mapping[str, NoiseModel], path: str | os.PathLike = NOISE_PATH) -> None:
    """Several noise models in one file, by name (the seed study's: "loss" of a full-precision run, "delta" of a
    quantized run against its partner)."""
    write_json(path, {name: model.to_dict() for name, model in sorted(models.items())})


def read_noise_models(path: str | os.PathLike = NOISE_PATH) -> dict[str, NoiseModel]:
    try:
        payload = json.loads(Path(path).read_text())
        if not isinstance(payload, dict) or not payload:
            raise ValueError("expected noise models by name")
        return {str(name): NoiseModel.from_dict(model) for name, model in payload.items()}
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from e


def repeats_by_cell(frame: pd.DataFrame, value: str = "delta") -> dict[Cell, list[float]]:
    """`value` of a tidy frame's seed repeats by (size, budget) cell: one value per seed."""
    cells = frame.groupby(["size", "budget"])[value]
    return {(str(size), int(budget)): values.tolist() for (size, budget), values in cells}


def cells_of(frame: pd.DataFrame) -> list[Cell]:
    """The (size, budget) cells a tidy frame's rows were trained at."""
    return [(str(size), int(budget)) for size, budget in frame[["size", "budget"]].drop_duplicates().to_numpy()]


OWN_REPEATS_NOTE = "this study's own repeats; no seed study in this run"


def largest_sigma(sigmas: Iterable[Sigma]) -> Sigma:
    """The most conservative of several cells' σ_seed: the largest value, the smallest dof among them."""
    sigmas = list(sigmas)
    if not sigmas:
        raise ValueError("the largest σ_seed of no cells")
    largest = max(sigmas, key=lambda sigma: sigma.value)
    weakest = min(sigmas, key=lambda sigma: sigma.dof)
    if len({(sigma.value, sigma.dof) for sigma in sigmas}) == 1:
        return largest
    source = f"largest σ_seed over the claim's {len(sigmas)} cells: {largest.source}; {weakest.dof:.1f} dof (fewest)"
    return Sigma(largest.value, weakest.dof, weakest.runs, largest.estimator, source)


@dataclass(frozen=True)
class ClaimNoise:
    """Where every claim reads σ_seed, the noise of a comparison between separately trained runs: the seed
    study's noise models by quantity ("loss": a full-precision run's final loss, "delta": a quantized run's gap to
    its partner) where the run makes them, at the claim's cells (the largest over them); else the MAD of the
    study's own seed repeats, pooled over the cells that have them, its source saying so. No study keeps its own
    estimator: a claim's `noise` column is the `source` of the σ it was held to."""

    models: Mapping[str, NoiseModel] = field(default_factory=dict)

    def sigma(
        self, quantity: str, cells: Iterable[Cell], repeats: Mapping[Cell, Sequence[float]] | None = None
    ) -> Sigma | None:
        """σ_seed of `quantity` at the claim's `cells`; None where nothing measures it (no seed study and fewer
        than two finite repeats with any spread)."""
        model = self.models.get(quantity)
        cells = sorted({(str(size), int(budget)) for size, budget in cells})
        if model is not None and cells:
            return largest_sigma(model.sigma(*cell) for cell in cells)
        return own_repeats_sigma(repeats or {})

    @classmethod
    def read(cls, path: str | os.PathLike | None) -> "ClaimNoise":
        """The seed study's models at `path` (its NOISE_PATH), or OWN_REPEATS without one."""
        return cls(read_noise_models(path)) if path else cls()


OWN_REPEATS = ClaimNoise()


def delta_quantity(branched: bool) -> str:
    """The seed study's noise model of a δ like a study's: of runs branched from their partner's trunk after warmup
    (`branched`), or trained from scratch."""
    return "delta_branched" if branched else "delta"


def own_repeats_sigma(repeats: Mapping[Cell, Sequence[float]]) -> Sigma | None:
    """The pooled MAD of a study's own repeats by cell, diverged (non-finite) runs and cells without spread left
    out; None where no cell keeps two seeds with spread."""
    usable = {}
    for cell, values in repeats.items():
        values = np.asarray(values, dtype=float)
        values = values[np.isfinite(values)]
        if len(values) >= 2 and mad_scale(values) > 0:
            usable[cell] = values
    if not usable:
        return None
    if len(usable) == 1:
        ((cell, values),) = usable.items()
        sigma = mad_sigma(values, cell)
    else:
        sigma = pooled_sigma(usable)
    return dataclasses.replace(sigma, source=f"{sigma.source} ({OWN_REPEATS_NOTE})")


class Interval(NamedTuple):
    low: float
    high: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def t_quantile(sigma: Sigma, level: float = 0.95) -> float:
    """The two-sided `level` quantile of Student's t with σ_seed's dof."""
    if not 0 < level < 1:
        raise ValueError(f"a confidence level is between 0 and 1, got {level}")
    return float(stats.t.ppf((1 + level) / 2, sigma.dof))


def noise_floor(sigma: Sigma, scale: float = 1.0, level: float = 0.95) -> float:
    """Half the `level` interval of a value whose seed-to-seed SD is `scale` σ_seed (1: one run's value; √2: a
    difference of two separately trained runs; √(1/k₁ + 1/k₂): of their means over k₁ and k₂ seeds)."""
    return t_quantile(sigma, level) * sigma.value * scale


def within_noise(effect: float, sigma: Sigma, scale: float = 1.0, level: float = 0.95) -> bool:
    """Whether |effect| is inside the `level` t-interval of nothing: separately trained runs differ that much with
    no effect at all."""
    return abs(effect) <= noise_floor(sigma, scale, level)


def mean_interval(mean: float, sigma: Sigma, seeds: int, level: float = 0.95) -> Interval:
    """The `level` CI of a mean over `seeds` separately seeded runs."""
    if seeds < 1:
        raise ValueError(f"a mean over seeds needs at least 1 seed, got {seeds}")
    half = noise_floor(sigma, 1 / math.sqrt(seeds), level)
    return Interval(mean - half, mean + half)


def difference_interval(
    difference: float, sigma: Sigma, seeds_a: int = 1, seeds_b: int = 1, level: float = 0.95
) -> Interval:
    """The `level` CI of a difference between two separately trained runs (their means over `seeds_a` and
    `seeds_b` seeds): SD σ_seed √(1/k₁ + 1/k₂), σ_seed √2 for one run each."""
    if min(seeds_a, seeds_b) < 1:
        raise ValueError(f"a difference of runs needs at least 1 seed a side, got {seeds_a} and {seeds_b}")
    half = noise_floor(sigma, math.sqrt(1 / seeds_a + 1 / seeds_b), level)
    return Interval(difference - half, difference + half)


def _columns(columns: str | Sequence[str]) -> list[str]:
    return [columns] if isinstance(columns, str) else list(columns)


def variant_differences(
    frame: pd.DataFrame, *, cluster: str | Sequence[str], variant: str, value: str, reference: Hashable
) -> pd.DataFrame:
    """Each variant's `value` minus the `reference` variant's in the same cluster (the rows that share one
    full-precision partner, e.g. PARTNER_KEYS): δ_a − δ_b = L_a − L_b, so the partner's loss and its noise cancel,
    and the difference has the noise of two runs (σ√2), not the 2σ of two δs taken as independent. Columns: the
    cluster's, `variant` and `difference`; a cluster without the reference gives no rows."""
    keys = _columns(cluster)
    missing = [column for column in (*keys, variant, value) if column not in frame]
    if missing:
        raise ValueError(f"variant differences: the frame lacks {missing}; it has {list(frame.columns)}")
    repeated = frame.duplicated([*keys, variant])
    if repeated.any():
        first = frame.loc[repeated, [*keys, variant]].head(1).to_dict("records")[0]
        raise ValueError(f"variant differences: {repeated.sum()} repeated (cluster, {variant}) rows, e.g. {first}")
    is_reference = frame[variant] == reference
    if not is_reference.any():
        raise ValueError(
            f"variant differences: no {variant} = {reference!r}; there are {sorted(frame[variant].unique().tolist())}"
        )
    base = frame.loc[is_reference, [*keys, value]].rename(columns={value: "reference_value"})
    paired = frame.loc[~is_reference, [*keys, variant, value]].merge(base, on=keys)
    paired["difference"] = paired[value] - paired["reference_value"]
    return paired[[*keys, variant, "difference"]].reset_index(drop=True)


def cluster_weights(clusters: Sequence, draws: int, seed: int) -> np.ndarray:
    """(draws, rows): how often each row enters each bootstrap draw when whole clusters (one label per row) are
    drawn with replacement, as many as there are."""
    codes, labels = pd.factorize(pd.Series(list(clusters)), use_na_sentinel=False)
    count = len(labels)
    picks = np.random.default_rng(seed).integers(0, count, size=(draws, count))
    flat = (picks + count * np.arange(draws)[:, None]).ravel()
    return np.bincount(flat, minlength=draws * count).reshape(draws, count)[:, codes]


def weighted_mean(value: str) -> Callable[[pd.DataFrame, np.ndarray], np.ndarray]:
    """The statistic "mean of `value`" for `cluster_bootstrap`: one weighted mean per row of weights."""

    def statistic(frame: pd.DataFrame, weights: np.ndarray) -> np.ndarray:
        return weights @ frame[value].to_numpy(float) / weights.sum(axis=1)

    return statistic


def cluster_bootstrap(
    frame: pd.DataFrame,
    statistic: Callable[[pd.DataFrame, np.ndarray], np.ndarray],
    cluster: str | Sequence[str],
    *,
    draws: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, Interval]:
    """A statistic over rows that share partners (δs of variants against one full-precision run), and its
    percentile `level` CI from resampling whole clusters, not rows: rows of a cluster share their partner's noise,
    so resampling them one by one treats them as independent and narrows the CI.

    `statistic(frame, weights)` returns one value per row of `weights` (draws × rows: how often each row is
    drawn; ones for the estimate), e.g. `weighted_mean("delta")`; one that cannot take weights can repeat rows
    (`frame.index.repeat(row)`). With few clusters the percentile CI is narrow by about √((C − 1)/C): it needs ten
    or more clusters; with fewer, use a t-interval on per-cluster values.
    """
    keys = _columns(cluster)
    codes = frame.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    if len(frame) == 0 or codes.max() < 1:
        raise ValueError(f"a cluster bootstrap needs at least 2 clusters of {keys}, got {codes.max(initial=-1) + 1}")
    if not 0 < level < 1:
        raise ValueError(f"a confidence level is between 0 and 1, got {level}")
    estimate = float(np.asarray(statistic(frame, np.ones((1, len(frame)))))[0])
    values = np.asarray(statistic(frame, cluster_weights(codes, draws, seed)), dtype=float)
    if values.shape != (draws,):
        raise ValueError(f"a bootstrap statistic returns one value per draw ({draws}), got shape {values.shape}")
    tail = 50 * (1 - level)
    low, high = np.nanpercentile(values, [tail, 100 - tail])
    return estimate, Interval(float(low), float(high))
