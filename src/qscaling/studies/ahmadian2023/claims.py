"""Ahmadian et al. 2023's claims, checked on the study table: weight decay, dropout, clipping and bf16 vs fp16
against W8A8 degradation (Figs. 2-3), W4 against W8A8 (Table 4), the outlier rule and proxies (Table 5, Fig. 5),
and the outlier-prone recipe against the final one.

Each ablation level is a run of its own, so a difference between levels carries seed-to-seed noise as well as
evaluation noise: σ_seed of W8A8 loss δ, from the run's noise model (`qscaling.noise.ClaimNoise`: the MAD of the
final recipe's seeds, as the seed study measures no post-training W8A8 δ), is added to every such comparison (the
paper had one seed per recipe; a difference inside it is inconclusive, whatever the evaluation noise), and its CI
takes the t-quantile of σ_seed's dof: a spread of few seeds is far from exact.
"""

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pandas as pd

from qscaling.config import Training
from qscaling.noise import OWN_REPEATS, ClaimNoise, Sigma
from qscaling.studies.ahmadian2023.grid import FACTORS, STUDY
from qscaling.studies.ahmadian2023.settings import Ahmadian2023Settings
from qscaling.studies.claims import (
    cannot_fail_claim,
    claim,
    held_to,
    student_t_quantile,
    t_interval,
    verdict_from_interval,
)


def ablation_rows(table: pd.DataFrame, method: str = "w8a8") -> pd.DataFrame:
    """Final-checkpoint rows of the one-factor ablations (all at the study's `size`) under `method`."""
    return table[table["final"] & (table["method"] == method) & table["factor"].isin(FACTORS)]


def weighted_slope(x, y, se) -> tuple[float, float]:
    """Least-squares slope of y on x weighted by 1/se², and its standard error from the per-point errors."""
    x, y, se = (np.asarray(v, dtype=float) for v in (x, y, se))
    weights = 1.0 / np.maximum(se, 1e-12) ** 2
    centred = x - np.sum(weights * x) / np.sum(weights)
    spread = np.sum(weights * centred**2)
    return float(np.sum(weights * centred * y) / spread), float(math.sqrt(1.0 / spread))


def _interval(estimate: float, se: float) -> tuple[float, float]:
    """The CI of a paired comparison on one checkpoint: evaluation noise over many windows, a normal quantile."""
    return t_interval(estimate, se, math.inf)


PTQ_DELTA = "W8A8 loss δ of a trained run"  # what σ_seed is the spread of here: no seed study measures it


@dataclass(frozen=True)
class SeedNoise:
    """σ_seed of W8A8 loss δ between separately trained runs (None: not measured, no verdict between runs)."""

    sigma: Sigma | None

    @property
    def measured(self) -> bool:
        return self.sigma is not None

    @property
    def sd(self) -> float:
        return self.sigma.value if self.sigma is not None else 0.0

    @property
    def dof(self) -> float:
        """Of σ_seed, which dominates every between-run SE it enters (0: none, an infinite t-quantile)."""
        return self.sigma.dof if self.sigma is not None else 0.0

    def interval(self, estimate: float, se: float) -> tuple[float, float]:
        """The CI of a comparison between runs whose SE holds this seed noise: t-quantile at its dof."""
        return t_interval(estimate, se, self.dof)

    def label(self) -> str:
        if not self.measured:
            return "evaluation noise only: no seed-to-seed estimate, so no verdict between runs"
        return f"evaluation and seed-to-seed noise, t at σ_seed's {self.dof:.1f} dof"


def seed_noise(table: pd.DataFrame, settings: Ahmadian2023Settings, noise: ClaimNoise = OWN_REPEATS) -> SeedNoise:
    """σ_seed of W8A8 loss δ over the final recipe's runs at the ablation size (its extra seeds and the recipe)."""
    size = settings.size
    rows = table[
        table["final"]
        & (table["method"] == "w8a8")
        & ((table["factor"] == "seed") | ((table["factor"] == "recipe") & (table["size"] == size)))
    ].drop_duplicates("run")
    cell = (size, int(settings.tokens))
    return SeedNoise(noise.sigma(PTQ_DELTA, [cell], {cell: rows["delta"].tolist()}))


def _ci(low: float, high: float, noise: SeedNoise) -> str:
    return f"[{low:.2e}, {high:.2e}] ({noise.label()})"


def _percent_changes(rows: pd.DataFrame) -> str:
    return ", ".join(f"{r.level}{' ' + r.group if r.group else ''}: {r.pct_change:+.2f} %" for r in rows.itertuples())


def _missing(text: str, what: str) -> dict:
    return claim(STUDY, text, statistic=f"not measured ({what})", ci="", verdict="inconclusive")


def _between_runs(text: str, statistic: str, low: float, high: float, expect: str, noise: SeedNoise) -> dict:
    """A comparison of separately trained runs: decided by its CI only where the seed-to-seed spread is in it."""
    verdict = verdict_from_interval(low, high, expect) if noise.measured else "inconclusive"
    row = claim(STUDY, text, statistic=statistic, ci=_ci(low, high, noise), verdict=verdict)
    return held_to(row, noise.sigma, math.sqrt(2))


def _trend_claim(rows: pd.DataFrame, factor: str, text: str, *, log_x: bool, expect: str, noise: SeedNoise) -> dict:
    """Weighted slope of W8A8 δ over a factor's levels (one run each): each point's error is its evaluation
    noise and the seed-to-seed spread together."""
    subset = rows[rows["factor"] == factor]
    if subset["level"].nunique() < 2:
        return _missing(text, f"fewer than two {factor} levels")
    x = subset["level"].astype(float)
    point_se = np.hypot(subset["delta_se"].to_numpy(float), noise.sd)
    slope, se = weighted_slope(np.log10(x) if log_x else x, subset["delta"], point_se)
    low, high = noise.interval(slope, se)
    per = "log10 " if log_x else ""
    statistic = f"slope of W8A8 loss δ on {per}{factor} = {slope:.2e} nats; accuracy change {_percent_changes(subset)}"
    return _between_runs(text, statistic, low, high, expect, noise)


# Below a cumulative decoupled decay Σ lr·wd of 0.2 (decay alone leaves the weights above e^−0.2 ≈ 82 % of their
# size over the whole run) weight decay has barely begun to shape them; the paper's 75k steps are far beyond it.
DECAY_TO_ACT = 0.2


def decay_budget(training: Training, tokens: int, n_params: int) -> tuple[int, float]:
    """(optimizer steps, mean learning rate over them) of one ablation run of `n_params` parameters: a trunk of
    `tokens` tokens on the `training` recipe's schedule, with no cooldown."""
    from qscaling.train import lr_at  # qscaling.train loads torch, which the DAG build (importing this) must not

    # The schedule fields of a RunSpec, all that lr_at reads.
    schedule = SimpleNamespace(
        lr=training.peak_lr(n_params),
        min_lr_ratio=training.min_lr_ratio,
        warmup_tokens=training.warmup_tokens(n_params, training.schedule, tokens),
        schedule=training.schedule,
        total_tokens=tokens,
        cooldown=None,
        tokens_per_step=training.batch_size * training.seq_len,
    )
    steps = math.ceil(tokens / schedule.tokens_per_step)
    return steps, float(np.mean([lr_at(schedule, step * schedule.tokens_per_step) for step in range(steps)]))


def _weight_decay_claim(rows: pd.DataFrame, noise: SeedNoise, settings: Ahmadian2023Settings) -> dict:
    """The weight-decay trend, inconclusive where even the largest weight decay cannot act in the run's steps:
    AdamW's decoupled decay multiplies the weights by (1 − lr·wd) per step, ≈ e^(−lr·wd·steps) in all."""
    text = "More weight decay → less W8A8 degradation (Fig. 2)"
    trend = _trend_claim(rows, "weight_decay", text, log_x=True, expect="negative", noise=noise)
    ablated = rows.loc[rows["size"] == settings.size, "N"]  # the one-factor ablations' size
    if ablated.empty:
        return trend
    steps, mean_lr = decay_budget(settings.training, settings.tokens, int(ablated.iloc[0]))
    weight_decay = max(settings.ablations["weight_decay"].values)
    shrinkage = mean_lr * weight_decay * steps
    budget = f"lr·wd·steps = {mean_lr:.2e} · {weight_decay:g} · {steps} = {shrinkage:.3f} at the largest weight decay"
    if shrinkage >= DECAY_TO_ACT:
        return {**trend, "statistic": f"{trend['statistic']}; {budget}"}
    return {
        **trend,
        "statistic": f"not exercised: {budget}, below the {DECAY_TO_ACT} it needs to act; measured: {trend['statistic']}",
        "verdict": "inconclusive",
    }


def _identical_runs(first: pd.Series, second: pd.Series) -> bool:
    """Two runs' W8A8 rows score the same to the last bit: unquantized loss, quantized loss and δ."""
    return all(first[column] == second[column] for column in ("base_loss", "loss", "delta"))


def _difference_claim(
    rows: pd.DataFrame, factor: str, worse: str, better: str, text: str, noise: SeedNoise, *, names: tuple[str, str]
) -> dict:
    """Mean over groups of δ(worse) − δ(better); positive when `better` degrades less. Each difference is
    between two runs: it carries both runs' evaluation noise and twice the seed-to-seed variance. Where the two
    runs score identically in every group (`names`: how the worse and better runs are called), the factor never
    acted on training and there is nothing to compare."""
    subset = rows[rows["factor"] == factor].set_index(["group", "level"])
    groups = [
        g
        for g in subset.index.get_level_values("group").unique()
        if (g, worse) in subset.index and (g, better) in subset.index
    ]
    if not groups:
        return _missing(text, f"needs {factor} levels {worse} and {better}")
    if all(_identical_runs(subset.loc[(g, worse)], subset.loc[(g, better)]) for g in groups):
        return cannot_fail_claim(STUDY, text, f"not exercised: {names[1]} and {names[0]} runs identical")
    differences = [subset.loc[(g, worse), "delta"] - subset.loc[(g, better), "delta"] for g in groups]
    variances = [
        subset.loc[(g, worse), "delta_se"] ** 2 + subset.loc[(g, better), "delta_se"] ** 2 + 2 * noise.sd**2
        for g in groups
    ]
    estimate, se = float(np.mean(differences)), math.sqrt(sum(variances)) / len(groups)
    low, high = noise.interval(estimate, se)
    statistic = (
        f"W8A8 loss δ({worse}) − δ({better}) = {estimate:.2e} nats; accuracy "
        f"change {_percent_changes(subset.reset_index())}"
    )
    return _between_runs(text, statistic, low, high, "positive", noise)


def ratio_interval(
    a: float, var_a: float, b: float, var_b: float, quantile: float = 1.96
) -> tuple[float, float] | None:
    """Fieller's 95 % interval for a / b from independent estimates: every R with |a − R·b| ≤ quantile·√(var_a +
    R²·var_b) (the t-quantile where the variances hold an SD over few seeds). None when b is within its own noise
    of zero: the interval is then unbounded."""
    z2 = quantile**2
    quadratic = b * b - z2 * var_b
    if quadratic <= 0:
        return None
    root = math.sqrt(a * a * b * b - quadratic * (a * a - z2 * var_a))
    return (a * b - root) / quadratic, (a * b + root) / quadratic


def _outlier_prone_claim(table: pd.DataFrame, noise: SeedNoise) -> dict:
    """W8A8 δ of the outlier-prone recipe over the final recipe's, per size (each δ paired per window within its
    run; the two runs differ by seed-to-seed noise too, estimated at the ablation size and applied at every size).
    Decided by the mean over sizes of δ(outlier-prone) − δ(final)."""
    text = "The outlier-prone recipe (low weight decay, no clipping, fp16) degrades more under W8A8 than the final one"
    final = table[table["final"] & (table["method"] == "w8a8") & table["factor"].isin(["recipe", "outlier_prone"])]
    pairs = final.drop_duplicates(["size", "factor"]).pivot(
        index="size", columns="factor", values=["delta", "delta_se"]
    )
    if final["factor"].nunique() < 2 or pairs.dropna().empty:
        return _missing(text, "no size with both the final and the outlier-prone recipe")
    pairs = pairs.dropna()
    prone, base = pairs["delta"]["outlier_prone"], pairs["delta"]["recipe"]
    prone_var = pairs["delta_se"]["outlier_prone"] ** 2 + noise.sd**2
    base_var = pairs["delta_se"]["recipe"] ** 2 + noise.sd**2
    ratios = []
    for size in sorted(pairs.index, key=lambda name: final.loc[final["size"] == name, "N"].iloc[0]):
        interval = ratio_interval(
            prone[size], prone_var[size], base[size], base_var[size], student_t_quantile(noise.dof)
        )
        # A ratio to a δ inside its own noise is a ratio to noise: it is not quoted.
        ratios.append(
            f"{size}: the final δ is within its noise, no ratio"
            if interval is None
            else "{} {:.2f} [{:.2f}, {:.2f}]".format(size, prone[size] / base[size], *interval)
        )
    estimate = float((prone - base).mean())
    low, high = noise.interval(estimate, math.sqrt(float((prone_var + base_var).sum())) / len(pairs))
    statistic = f"W8A8 loss δ outlier-prone / final: {'; '.join(ratios)}; mean δ difference = {estimate:.2e} nats"
    return _between_runs(text, statistic, low, high, "positive", noise)


def spearman(x, y) -> float:
    x, y = pd.Series(np.asarray(x, float)).rank(), pd.Series(np.asarray(y, float)).rank()
    return float(np.corrcoef(x, y)[0, 1]) if x.std() > 0 and y.std() > 0 else float("nan")


def _rank_claim(
    runs: pd.DataFrame, proxy: str, text: str, noise: SeedNoise, *, bootstrap: int = 1000, seed: int = 0
) -> dict:
    """Spearman correlation of a proxy with W8A8 loss δ across runs, percentile bootstrap CI over runs. Where the
    runs' δ spread no wider than their noise (evaluation and seed-to-seed), their order is the noise's and so
    would be any correlation with it: no ranking is reported."""
    if len(runs) < 4:
        return _missing(text, f"{len(runs)} runs")
    spread = float(runs["delta"].std(ddof=1))
    floor = math.hypot(float(runs["delta_se"].mean()), noise.sd)
    if spread <= floor:
        return cannot_fail_claim(
            STUDY,
            text,
            f"W8A8 loss δ of the {len(runs)} runs spreads {spread:.1e}, within their noise {floor:.1e} "
            "(evaluation and seed-to-seed): no ranking to correlate",
        )
    estimate = spearman(runs[proxy], runs["delta"])
    rng = np.random.default_rng(seed)
    draws = [
        spearman(*runs.iloc[rng.integers(0, len(runs), len(runs))][[proxy, "delta"]].to_numpy().T)
        for _ in range(bootstrap)
    ]
    low, high = np.nanpercentile(draws, [2.5, 97.5])
    return claim(
        STUDY,
        text,
        statistic=f"Spearman ρ({proxy}, W8A8 loss δ) = {estimate:.2f} over {len(runs)} runs",
        ci=f"[{low:.2f}, {high:.2f}]",
        verdict=verdict_from_interval(low, high, "positive"),
    )


def _outlier_rule_claim(table: pd.DataFrame, runs: pd.DataFrame) -> dict:
    """Zero 6.0-rule outlier dims in the recipe and no separation of variants: testable only where the rule's
    count varies over the scored runs (outlier-prone ones included); a count that is the same everywhere could
    neither find dims in the recipe alone nor separate anything."""
    text = (
        "LLM.int8's 6.0 rule finds no outlier dimensions in the well-trained recipe and does not separate "
        "sensitive from robust variants (Table 5)"
    )
    recipe = table[(table["factor"] == "recipe") & table["final"] & (table["method"] == "none")]
    if recipe.empty or len(runs) < 4:
        return _missing(text, "no recipe runs or fewer than four ablation runs")
    scored = table[table["final"] & (table["method"] == "none")].drop_duplicates("run")
    if scored["outliers_llm_int8"].nunique() == 1:
        counts = {
            column.removeprefix("outliers_"): scored[column] for column in scored if column.startswith("outliers_")
        }
        count = int(scored["outliers_llm_int8"].iloc[0])
        if all((values == 0).all() for values in counts.values()):
            found = f"every rule ({', '.join(counts)}) counts 0 outlier dims"
        else:
            found = f"the 6.0 rule counts {count} outlier dims"
        return cannot_fail_claim(STUDY, text, f"{found} in all {len(scored)} scored runs, outlier-prone ones included")
    in_recipe = int(recipe["outliers_llm_int8"].max())
    rho = spearman(runs["outliers_llm_int8"], runs["delta"])
    separates = not math.isnan(rho) and abs(rho) >= 0.5
    statistic = (
        f"max outlier dims in the recipe runs = {in_recipe}; over {len(runs)} ablation runs counts "
        f"{int(runs['outliers_llm_int8'].min())}–{int(runs['outliers_llm_int8'].max())}, Spearman ρ with "
        f"W8A8 loss δ = {rho:.2f}" + (" (constant counts)" if math.isnan(rho) else "")
    )
    verdict = "reproduced" if in_recipe == 0 and not separates else "not reproduced"
    return claim(STUDY, text, statistic=statistic, ci="|ρ| < 0.5 read as no separation", verdict=verdict)


def claims(tables: dict, fits: dict, settings: Ahmadian2023Settings, noise: ClaimNoise = OWN_REPEATS) -> list[dict]:
    """The paper's claims on the study's table; the `training` recipe of `settings` says how far weight decay
    could act in the run's optimizer steps."""
    table = tables["table"]
    if settings.source == "hub":
        return [_w4_claim(table[table["final"]])]
    rows = ablation_rows(table)
    runs = rows.drop_duplicates("run")
    noise = seed_noise(table, settings, noise)
    return [
        _weight_decay_claim(rows, noise, settings),
        _trend_claim(
            rows,
            "dropout",
            "More dropout → more W8A8 degradation (Fig. 2)",
            log_x=False,
            expect="positive",
            noise=noise,
        ),
        _difference_claim(
            rows,
            "grad_clip",
            "none",
            "1",
            "Gradient clipping reduces W8A8 degradation at low weight decay (Fig. 2)",
            noise,
            names=("unclipped", "clipped"),
        ),
        _difference_claim(
            rows,
            "precision",
            "fp16",
            "bf16",
            "bf16 training degrades less under W8A8 than fp16 (Fig. 3)",
            noise,
            names=("fp16", "bf16"),
        ),
        _w4_claim(table[table["final"] & table["factor"].isin(FACTORS)]),
        _outlier_rule_claim(table, runs),
        _rank_claim(runs, "gain_std", "The spread of the norm gains tracks W8A8 sensitivity (Fig. 5)", noise),
        _rank_claim(runs, "rmse", "The W8A8 activation RMSE of the QKV input tracks W8A8 sensitivity (Fig. 5)", noise),
        _outlier_prone_claim(table, noise),
    ]


def _w4_claim(final: pd.DataFrame) -> dict:
    text = "W4 weight-only RTN costs far more than W8A8 (Table 4)"
    per_run = final.drop_duplicates(["run", "method"]).pivot_table(
        index="run", columns="method", values=["delta", "delta_se"]
    )
    if per_run.empty or "rtn" not in per_run["delta"] or "w8a8" not in per_run["delta"]:
        return _missing(text, "no W4 and W8A8 rows")
    differences = per_run["delta"]["rtn"] - per_run["delta"]["w8a8"]
    se = math.sqrt(float((per_run["delta_se"]["rtn"] ** 2 + per_run["delta_se"]["w8a8"] ** 2).sum())) / len(per_run)
    low, high = _interval(float(differences.mean()), se)
    means = per_run["delta"][["rtn", "w8a8"]].mean()
    mean_se = np.sqrt((per_run["delta_se"][["rtn", "w8a8"]] ** 2).sum()) / len(per_run)
    # A ratio to a W8A8 loss inside its own noise would be a ratio to noise (and flip with the CPU it ran on).
    degrades = (means > 2 * mean_se).all()
    ratio = f" (W4/W8A8 = {means['rtn'] / means['w8a8']:.1f}×)" if degrades else " (W8A8 δ within its noise: no ratio)"
    return claim(
        STUDY,
        text,
        statistic=f"mean loss δ W4 − W8A8 = {differences.mean():.2e} nats over {len(per_run)} runs{ratio}",
        ci=f"[{low:.2e}, {high:.2e}] (paired evaluation noise: both on each checkpoint)",
        verdict=verdict_from_interval(low, high, "positive"),
    )
