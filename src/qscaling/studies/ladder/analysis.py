"""The ladder's analysis: its table, the Chinchilla fit, the LR sweep's law and the claims. The grid: every size annealed at every budget in range, the Chinchilla law fitted on those points, and
the learning-rate sweep that chose the recipe every other study trains with.

Grid: each (size, budget) with `min_tokens_per_param` ≤ D/N ≤ `max_tokens_per_param`, annealed by a WSD cooldown
branch of the size's trunk (Chinchilla's annealed-per-budget points, not constant-LR trunk checkpoints; the same
runs Kumar et al.'s PTQ grid quantizes). Sweep (`lr_sweep`, target `snakemake ladder_lr`): each swept size at the
grid budget nearest `tokens_per_param`·N, with the recipe's peak LR times each of `lr_multipliers`; the ×1 point is
the grid's own run. Each size's optimum is the vertex of a parabola in log LR through its three best points, and
LR*(N) is fitted as a power law — the `training.lr` / `lr_exponent` the config should carry.

Whether the size exponent is identified: the fit's profile over the irreducible loss E (the `e_profile` fit table,
the fit redone with E held at each of E_PROFILE_POINTS values from its lower bound to just under the least loss
measured). Where the objective stays flat while E moves, E is not identified, and α moves along with it: the range
α takes on that ridge is what the ladder's sizes leave undetermined.
"""

import math

import numpy as np
import pandas as pd
from scipy import stats

from qscaling.atomic import write_table
from qscaling.comparison import full_precision
from qscaling.config import Training
from qscaling.laws import LAWS, profile, try_fit
from qscaling.laws.baseline import CHINCHILLA
from qscaling.noise import OWN_REPEATS, ClaimNoise
from qscaling.studies.claims import (
    INCONCLUSIVE,
    ci_within_bounds,
    claim,
    positive_parameter_claim,
    student_t_quantile,
)
from qscaling.studies.ladder.grid import STUDY
from qscaling.studies.ladder.settings import LadderSettings

EPOCH_AI = CHINCHILLA.paper_params["epoch2024"]  # Besiroglu et al.'s refit of Chinchilla: α 0.348, β 0.366
HELDOUT_TARGET = 0.03  # leave-one-size-out relative error the ladder is designed to reach
ALPHA_TARGET = 0.1  # the lower end of α's 95 % CI the ladder is designed to reach
E_PROFILE_POINTS = 8
E_PROFILE_TOP = 0.9  # the profile's largest E, as a share of the least loss measured (E must stay below every loss)
FLAT = 0.01  # a profile point fits "as well" as the best when its objective is within this share of the best's


def lr_sweep_job(inputs: dict, outputs: dict, params: dict) -> None:
    rows = pd.concat([pd.read_parquet(path) for path in inputs["rows"]], ignore_index=True)
    sweep = rows[rows["variant"] == "lr_sweep"]
    write_table(lr_sweep_table(sweep, Training.model_validate(params["training"])), outputs["lr_sweep"])


def lr_optimum(group: pd.DataFrame) -> tuple[float, bool]:
    """(optimal LR, whether it lies inside the swept range) of one size: the vertex of the parabola in log LR
    through the lowest loss and its neighbours; at an edge of the range, that edge (the optimum lies beyond)."""
    group = group.sort_values("lr")
    log_lr, loss = np.log(group["lr"].to_numpy(float)), group["loss"].to_numpy(float)
    best = int(np.argmin(loss))
    if best in (0, len(loss) - 1):
        return float(np.exp(log_lr[best])), False
    a, b, _ = np.polyfit(log_lr[best - 1 : best + 2], loss[best - 1 : best + 2], 2)
    return float(np.exp(np.clip(-b / (2 * a), log_lr[best - 1], log_lr[best + 1]))), True


def lr_law(optima: pd.DataFrame, reference_params: float) -> dict:
    """log LR* = log lr + (−exponent)·log(N / reference): least squares over sizes, with t-based 95 % CIs."""
    x = np.log(optima["N"].to_numpy(float) / reference_params)
    y = np.log(optima["lr_opt"].to_numpy(float))
    fitted = stats.linregress(x, y)
    t = stats.t.ppf(0.975, len(x) - 2) if len(x) > 2 else math.inf
    return {
        "lr_at_reference": float(np.exp(fitted.intercept)),
        "lr_at_reference_ci": [
            float(np.exp(fitted.intercept - t * fitted.intercept_stderr)),
            float(np.exp(fitted.intercept + t * fitted.intercept_stderr)),
        ],  # fmt: skip
        "exponent": float(-fitted.slope),
        "exponent_ci": [float(-fitted.slope - t * fitted.stderr), float(-fitted.slope + t * fitted.stderr)],
    }


def lr_sweep_table(sweep: pd.DataFrame, training: Training) -> pd.DataFrame:
    """The sweep's rows with, per size, the measured optimum (`lr_opt`, `interior`), the recipe's LR, and the
    fitted law's prediction (`lr_law`; its constants in `law_lr_at_reference`, `law_exponent` and their CIs)."""
    optima = pd.DataFrame(
        [(n, *lr_optimum(group)) for n, group in sweep.groupby("N")], columns=["N", "lr_opt", "interior"]
    )
    table = sweep.merge(optima, on="N")
    table["lr_recipe"] = [training.peak_lr(n) for n in table["N"]]
    table["reference_params"] = float(training.lr_reference_params)
    if len(optima) >= 2:
        law = lr_law(optima, training.lr_reference_params)
        table["lr_law"] = law["lr_at_reference"] * (table["N"] / training.lr_reference_params) ** -law["exponent"]
        for name in ("lr_at_reference", "exponent"):
            table[f"law_{name}"] = law[name]
            table[f"law_{name}_low"], table[f"law_{name}_high"] = law[f"{name}_ci"]
    return table.sort_values(["N", "lr"]).reset_index(drop=True)


def build_table(rows: pd.DataFrame, settings: LadderSettings) -> pd.DataFrame:
    table = rows.copy()
    table["tokens_per_param"] = table["D"] / table["N"]
    return table.sort_values(["variant", "N", "D", "lr"]).reset_index(drop=True)


def grid_rows(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["variant"] == "grid"]


def fit_names(settings: LadderSettings) -> list[str]:
    return ["chinchilla"]


def fit_laws(table: pd.DataFrame, settings: LadderSettings) -> dict:
    """Chinchilla's L(N, D) on the annealed grid; CIs from resampling runs, held-out error leaving out each size."""
    return {
        "chinchilla": try_fit(
            "chinchilla", grid_rows(table), bootstrap=settings.bootstrap, group_col="N", run_col="run", seed=0
        )
    }


def fit_tables(table: pd.DataFrame, settings: LadderSettings) -> dict:
    """The Chinchilla fit's profile over E (module docstring); empty where the grid is too small to fit."""
    rows = grid_rows(table)
    if len(rows) <= len(CHINCHILLA.params):
        return {"e_profile": pd.DataFrame()}
    low = next(param.low for param in CHINCHILLA.params if param.name == "E")
    values = np.linspace(low, E_PROFILE_TOP * rows["loss"].min(), E_PROFILE_POINTS)
    return {"e_profile": profile(LAWS["chinchilla"], rows, "E", values, group_col="N", run_col="run", seed=0)}


def flat_ridge(e_profile: pd.DataFrame) -> pd.DataFrame:
    """The profile's points that fit within FLAT of its best objective."""
    return e_profile[e_profile["objective"] <= (1 + FLAT) * e_profile["objective"].min()]


def alpha_identified_claim(fit, e_profile: pd.DataFrame | None) -> dict:
    """α's CI above ALPHA_TARGET: reproduced where its low end is above it, not reproduced where it is not (the
    profile over E says why, or that it does not); inconclusive where a bound cut the CI: α at its bound, or a CI
    above the target only because its high end stopped at the bound."""
    text = f"Chinchilla α is identified: its 95 % CI lies above {ALPHA_TARGET} (the ladder's design target)"
    low, high, reached = ci_within_bounds(fit, "alpha")
    ci = f"[{low:.3f}, {high:.3f}]"
    if fit.at_bound("alpha") or (low >= ALPHA_TARGET and reached):
        where = "at its bound" if fit.at_bound("alpha") else "CI reaches its bound"
        return claim(STUDY, text, statistic=f"α = {fit.params['alpha']:.3f}, {where}", ci=ci, verdict=INCONCLUSIVE)
    if low >= ALPHA_TARGET:
        return claim(STUDY, text, statistic=f"α = {fit.params['alpha']:.3f}", ci=ci, verdict="reproduced")
    statistic = (
        f"α = {fit.params['alpha']:.3f}, E = {fit.params['E']:.3g} (E's CI {fit.ci['E'][0]:.3g}–{fit.ci['E'][1]:.3g})"
    )
    if e_profile is not None and not e_profile.empty:
        ridge = flat_ridge(e_profile)
        statistic += (
            f"; with E held anywhere in [{ridge['E'].min():.3g}, {ridge['E'].max():.3g}] the fit is as good (objective "
            f"within {FLAT:.0%} of the best, held-out error {ridge['heldout_relative_error'].min():.2%}–"
            f"{ridge['heldout_relative_error'].max():.2%}) while α runs {ridge['alpha'].min():.3f}–"
            f"{ridge['alpha'].max():.3f}: E and α are not separately identified by these sizes"
        )
    return claim(STUDY, text, statistic=statistic, ci=ci, verdict="not reproduced")


def heldout_margins(fit, rows: pd.DataFrame) -> dict[float, float]:
    """Per held-out size: how far its relative error may move with the evaluation noise of its losses (the
    two-sided normal quantile times the mean relative SE of its points)."""
    z = student_t_quantile(math.inf)
    relative_se = (rows["loss_se"] / rows["loss"]).groupby(rows["N"].astype(float)).mean()
    return {float(n): z * float(relative_se.get(float(n), 0.0)) for n in fit.heldout_by_group}


def heldout_claim(fit, rows: pd.DataFrame) -> dict:
    """Every left-out size predicted within HELDOUT_TARGET, size by size (a mean would hide one size beyond it):
    reproduced where every size's error is below the target by more than its evaluation noise, not reproduced
    where one is above it by more, inconclusive otherwise."""
    text = (
        f"The Chinchilla law predicts a size it never saw within {HELDOUT_TARGET:.0%} "
        "(leave-one-size-out relative error of the loss)"
    )
    if fit.heldout_relative_error is None or not fit.heldout_by_group:
        reasons = "; ".join(note for note in fit.notes if note.startswith("held-out")) or "not computed"
        return claim(STUDY, text, statistic=f"no held-out error ({reasons})", ci="", verdict=INCONCLUSIVE)
    margins = heldout_margins(fit, rows)
    errors = {float(n): float(error) for n, error in fit.heldout_by_group.items()}
    per_size = ", ".join(f"N={n:,.0f}: {error:.1%}" for n, error in errors.items())
    worst = max(errors, key=errors.get)
    if all(error + margins[n] < HELDOUT_TARGET for n, error in errors.items()):
        verdict = "reproduced"
    elif any(error - margins[n] > HELDOUT_TARGET for n, error in errors.items()):
        verdict = "not reproduced"
    else:
        verdict = INCONCLUSIVE
    return claim(
        STUDY,
        text,
        statistic=f"worst N={worst:,.0f}: {errors[worst]:.2%}; mean {fit.heldout_relative_error:.2%} ({per_size})",
        ci=f"each size's error ± {margins[worst]:.2%} at the worst (evaluation noise of its losses)",
        verdict=verdict,
    )


def lr_recipe_claim(sweep: pd.DataFrame, training: Training) -> dict:
    """The recipe's LR exponent against the sweep's fitted one, its CI t-based over the swept sizes (`lr_law`).
    Reproduced where the CI holds the recipe's exponent and excludes 0 (LR falls with N), not reproduced where it
    excludes the recipe's exponent, inconclusive where it holds both (it does not even show LR falling with N) or
    where a size's optimum lies at the swept range's edge (its LR* is a bound there, not a measurement)."""
    text = "The recipe's LR(N) exponent agrees with this run's sweep (optimum inside the swept range at every size)"
    if "law_exponent" not in sweep:
        return claim(STUDY, text, statistic="fewer than two swept sizes", ci="", verdict=INCONCLUSIVE)
    first = sweep.iloc[0]
    low, high = first["law_exponent_low"], first["law_exponent_high"]
    optima = sweep.drop_duplicates("N")
    edges = [f"N={int(n):,}" for n, inside in zip(optima["N"], optima["interior"]) if not inside]
    statistic = (
        f"fitted exponent {first['law_exponent']:.2f}, recipe {training.lr_exponent:g}; "
        f"LR* at N={training.lr_reference_params:,.0f}: {first['law_lr_at_reference']:.2e} "
        f"(recipe {training.lr:g})" + (f"; optimum at the range's edge for {', '.join(edges)}" if edges else "")
    )
    if edges:
        verdict = INCONCLUSIVE
    elif not low <= training.lr_exponent <= high:
        verdict = "not reproduced"
    elif low > 0:
        verdict = "reproduced"
    else:
        verdict, statistic = INCONCLUSIVE, f"{statistic}; the CI holds 0: LR need not fall with N"
    ci = f"[{low:.2f}, {high:.2f}] (t, {len(optima) - 2} dof over {len(optima)} swept sizes)"
    return claim(STUDY, text, statistic=statistic, ci=ci, verdict=verdict)


def claims(tables: dict, fits: dict, settings: LadderSettings, noise: ClaimNoise = OWN_REPEATS) -> list[dict]:
    out = [lr_recipe_claim(tables["lr_sweep"], settings.training)]
    fit = fits.get("chinchilla")
    if fit is None:
        text = "Loss falls with N and with D (Chinchilla α, β > 0)"
        return [*out, claim(STUDY, text, statistic="no Chinchilla fit", ci="", verdict=INCONCLUSIVE)]
    for name in ("alpha", "beta"):
        text = f"Chinchilla {'α (model size)' if name == 'alpha' else 'β (data)'} exponent is positive"
        out.append(positive_parameter_claim(STUDY, text, fit, name, paper=EPOCH_AI[name]))
    out.append(alpha_identified_claim(fit, tables.get("e_profile")))
    out.append(heldout_claim(fit, grid_rows(tables["table"])))
    return out


def law_points(table: pd.DataFrame, settings: LadderSettings) -> dict:
    """Its runs at the recipe's LR as full-precision training points of the law comparison (`qscaling.comparison`)."""
    return {"training": full_precision(table[table["lr_multiplier"] == 1.0][["run", "N", "D", "loss"]], STUDY)}
