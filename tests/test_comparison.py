"""Every law on the same runs (qscaling.comparison): the points each study contributes, gathered once per run, and
each law fitted on them and scored on held-out sizes and budgets."""

import copy

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO_ROOT

from qscaling.comparison import (
    IN_SAMPLE,
    PAPER_COMPARISONS,
    PAPER_SCHEME,
    SCHEMES,
    PairedErrors,
    compare,
    full_precision,
    gather,
    paired_errors,
    ptq_frame,
    training_frame,
)
from qscaling.laws import LAWS
from qscaling.layout import LAW_COMPARISON
from qscaling.noise import ClaimNoise, Sigma
from qscaling.pipeline import Pipeline, resolve
from qscaling.studies.law_claims import comparison_claims, loss_sigma, paired_claim

SMOKE_TABLES = REPO_ROOT / "reference" / "smoke" / "results" / "tables"


def chinchilla_runs(noise=0.0, seed=0) -> pd.DataFrame:
    """Full-precision runs on a 4 × 4 grid of N and D whose loss follows known Chinchilla constants."""
    law = LAWS["chinchilla"]
    truth = {"A": 40.0, "alpha": 0.3, "B": 60.0, "beta": 0.3, "E": 2.0}
    N, D = np.meshgrid([2e4, 4e4, 8e4, 1.6e5], [5e5, 1e6, 2e6, 4e6])
    grid = pd.DataFrame({"N": N.ravel(), "D": D.ravel()})
    loss = law(truth, grid) * (1 + noise * np.random.default_rng(seed).standard_normal(len(grid)))
    runs = grid.assign(run=[f"run{i}" for i in range(len(grid))], loss=loss)
    return full_precision(runs, "synthetic")


def test_a_law_recovered_from_its_own_runs_predicts_held_out_sizes_and_budgets():
    training, ptq = gather([{"training": chinchilla_runs()}])
    table = compare(training, ptq, ["chinchilla", "kaplan", "castro2025.quartet"])
    chinchilla = table[table["law"] == "chinchilla"].set_index("scheme")
    assert set(chinchilla.index) == {IN_SAMPLE, *SCHEMES.values(), PAPER_SCHEME}
    for scheme in (IN_SAMPLE, *SCHEMES.values()):
        assert chinchilla.loc[scheme, "relative_error"] < 1e-3
    # Hoffmann et al.'s constants were fitted on models 10^4 times larger: they do not transfer.
    assert chinchilla.loc[PAPER_SCHEME, "relative_error"] > 0.5
    assert chinchilla.loc[IN_SAMPLE, "n_points"] == 16 and chinchilla.loc[IN_SAMPLE, "n_sizes"] == 4
    # Kaplan's form cannot follow an irreducible loss: worse on held-out budgets than the law that made the data.
    kaplan = table[table["law"] == "kaplan"].set_index("scheme")
    assert kaplan.loc[SCHEMES["D"], "relative_error"] > 10 * chinchilla.loc[SCHEMES["D"], "relative_error"]
    quartet = table[table["law"] == "castro2025.quartet"]
    assert len(quartet) == 1 and quartet["note"].iloc[0].startswith("not fitted: 0 points")


def test_shared_runs_are_gathered_once_and_bad_points_are_refused():
    runs = chinchilla_runs()
    training, _ = gather([{"training": runs}, {"training": runs.assign(study="another")}])
    assert len(training) == len(runs) and set(training["study"]) == {"synthetic"}
    with pytest.raises(ValueError, match="column 'D' missing"):
        training_frame(runs.drop(columns="D"))
    with pytest.raises(ValueError, match="format 'bf16' unknown"):
        training_frame(runs.assign(format="bf16"))
    ptq = ptq_frame({"run": ["a"], "study": ["s"], "N": [1e4], "D": [1e6], "method": ["gptq"], "bits": [4],
                     "base_loss": [4.0], "delta": [0.1]})  # fmt: skip
    assert ptq["bits"].dtype == float


def test_every_contributing_study_gives_points_in_the_schemas():
    raw = yaml.safe_load((REPO_ROOT / "config.yaml").read_text()) | {"scale": "smoke"}
    _, studies = resolve(raw)
    contributions = {
        name: configured.study.law_points(pd.read_parquet(SMOKE_TABLES / f"{name}.parquet"), configured.settings)
        for name, configured in studies.items()
        if configured.study.law_points
    }
    assert set(contributions) == {"ladder", "kumar2024", "kumar2024_training", "sun2025", "chen2025"}
    training, ptq = gather(contributions.values())
    formats = training.groupby("format")["run"].nunique()
    assert set(formats.index) == {"none", "int", "fp"} and formats.min() >= 3
    full = training[training["format"] == "none"]
    assert np.isinf(full[["P_w", "P_a", "P_kv"]]).all().all() and full["E"].isna().all()
    fp = training[training["format"] == "fp"]
    assert fp[["E", "M"]].notna().all().all() and ((fp["P_w"] == 1 + fp["E"] + fp["M"]) | fp["B"].notna()).all()
    # Chen's fp32 partners are the same runs as the other studies' fp32 runs: one row each.
    assert not training.duplicated(["run", "D"]).any()
    assert set(ptq["method"]) == {"gptq", "awq", "rtn"} and (ptq["bits"] < 16).all()


def test_the_pipeline_compares_laws_when_a_study_contributes_and_draws_the_comparison():
    raw = yaml.safe_load((REPO_ROOT / "config.yaml").read_text()) | {"scale": "smoke"}
    pipeline = Pipeline.from_config(raw)
    assert set(pipeline.comparison_inputs) == {"ladder", "kumar2024", "kumar2024_training", "sun2025", "chen2025"}
    assert pipeline.artifact_paths[LAW_COMPARISON] == "results/tables/law_comparison.csv"
    assert "common_law_comparison" in {spec.target for spec, _ in pipeline.figures}
    only = {"ahmadian2023"}
    alone = copy.deepcopy(raw)
    for block in (alone, alone["presets"]["smoke"]):
        block["studies"] = {name: value for name, value in block["studies"].items() if name in only}
    bare = Pipeline.from_config(alone)
    assert not bare.comparison_inputs and LAW_COMPARISON not in bare.artifact_paths


def weight_precision_runs(law_name: str, seeds: int = 1, noise: float = 0.0) -> pd.DataFrame:
    """Full-precision and INT weight-only runs on a 4 sizes × 3 budgets × 5 precisions grid whose loss follows
    `law_name` with known constants; `seeds` repeats of every point at N2e4, D5e5 (loss noise `noise` nats)."""
    law = LAWS[law_name]
    truth = {"A": 40.0, "alpha": 0.3, "B": 60.0, "E": 2.0, "gamma_w": 2.0, "n_w": 0.5, "gamma_D": 1.5, "n_D": 0.0}
    truth = {name: truth.get(name, 1.0) for name in law.param_names}
    grid = pd.DataFrame(
        [(n, d, p) for n in (2e4, 4e4, 8e4, 1.6e5) for d in (5e5, 1e6, 2e6) for p in (3, 4, 6, 8, np.inf)],
        columns=["N", "D", "P_w"],
    )
    grid = grid.assign(P_a=np.inf, P_kv=np.inf)
    repeats = grid[(grid["N"] == 2e4) & (grid["D"] == 5e5)]
    grid = pd.concat([grid, *[repeats] * (seeds - 1)], ignore_index=True)
    loss = law(truth, grid) + noise * np.random.default_rng(0).standard_normal(len(grid))
    runs = grid.assign(
        run=[f"N{n / 1e3:g}k-{i:010x}" for i, n in enumerate(grid["N"])],
        study="synthetic",
        format=np.where(np.isinf(grid["P_w"]), "none", "int"),
        loss=loss,
    )
    return training_frame(runs)


def test_a_paper_comparison_is_repeated_on_the_points_both_laws_share():
    training = weight_precision_runs("kumar2024.form_untied")
    untied_vs_neff = next(c for c in PAPER_COMPARISONS if c.better == "kumar2024.form_untied")
    paired = paired_errors(untied_vs_neff, training, ptq_frame({"run": [], "study": [], "N": [], "D": []}))
    assert paired.scheme == SCHEMES["N"] and len(paired.points) == len(training) == 60
    assert paired.groups == ["20000", "40000", "80000", "160000"]
    better, worse = paired.mean_errors()
    # The law that made the data predicts sizes it never saw almost exactly; N_eff's form cannot shrink the data.
    assert better < 1e-6 and worse > 1e-3, (better, worse)
    assert all(paired.better[group] < paired.worse[group] for group in paired.groups)


def sigma_of(value: float, dof: float = 4.0) -> Sigma:
    return Sigma(value, dof, 5, "MAD", f"σ_seed {value} nats")


@pytest.mark.parametrize(
    ("better", "worse", "sigma", "verdict"),
    [
        ({"1": 0.010, "2": 0.012}, {"1": 0.030, "2": 0.040}, 0.001, "reproduced"),
        ({"1": 0.030, "2": 0.040}, {"1": 0.010, "2": 0.012}, 0.001, "not reproduced"),
        ({"1": 0.010, "2": 0.012}, {"1": 0.030, "2": 0.040}, 0.05, "inconclusive"),  # the gap is inside the noise
        ({}, {"1": 0.030, "2": 0.040}, 0.001, "inconclusive"),  # one law could not be scored
    ],
)
def test_a_law_comparison_claim_can_take_each_verdict(better, worse, sigma, verdict):
    points = pd.DataFrame({"run": ["N1k-a", "N1k-b", "N2k-c"], "N": [1.0, 1.0, 2.0], "D": [5e5] * 3,
                           "loss": [4.0, 4.0, 4.0]})  # fmt: skip
    paired = PairedErrors(PAPER_COMPARISONS[0], "N", better, worse, points, "")
    row = paired_claim(paired, sigma_of(sigma))
    assert row["verdict"] == verdict and row["study"] == "law_comparison"
    assert row["claim"].startswith(f"{PAPER_COMPARISONS[0].better} predicts held-out sizes better than")
    assert row["noise"] == f"σ_seed {sigma} nats" and row["magnitude"] == "no paper value"


def test_law_comparison_claims_hold_the_gap_to_the_seed_noise_of_the_points_own_repeats():
    training = weight_precision_runs("kumar2024.form_untied", seeds=3, noise=0.001)
    no_ptq = ptq_frame({"run": [], "study": [], "N": [], "D": []})
    rows = comparison_claims(training, no_ptq, ClaimNoise())
    assert [row["claim"].split(" predicts")[0] for row in rows] == [c.better for c in PAPER_COMPARISONS]
    sigma = loss_sigma(training, training, ClaimNoise())
    # Five precisions repeated three times at one cell: σ_seed pooled over them, near the 0.001 nats put in.
    assert "MAD pooled over 5 cells" in sigma.source and "N20k int P_w 3 / 0.5M tokens" in sigma.source
    assert 0.0003 < sigma.value < 0.003
    untied = rows[[c.better for c in PAPER_COMPARISONS].index("kumar2024.form_untied")]
    assert untied["verdict"] == "reproduced", untied["statistic"]
    noisy = comparison_claims(weight_precision_runs("kumar2024.form_untied", seeds=3, noise=0.3), no_ptq, ClaimNoise())
    assert all(row["verdict"] == "inconclusive" for row in noisy)


def test_each_loss_laws_held_out_error_carries_the_gap_seed_noise_makes_and_the_figure_draws_it():
    import matplotlib.pyplot as plt

    from qscaling.figures.common import law_comparison
    from qscaling.noise import noise_floor
    from qscaling.studies.law_claims import seed_floors

    training = weight_precision_runs("kumar2024.form_untied", seeds=3, noise=0.001)
    no_ptq = ptq_frame({"run": [], "study": [], "N": [], "D": []})
    table = seed_floors(
        compare(training, no_ptq, ["chinchilla", "kumar2024.form_untied"]), training, no_ptq, ClaimNoise()
    )
    held_out = table[(table["source"] == "this run's fit") & table["scheme"].isin(SCHEMES.values())]
    assert held_out["seed_floor"].notna().all() and table.drop(held_out.index)["seed_floor"].isna().all()
    untied = held_out[held_out["law"] == "kumar2024.form_untied"]["seed_floor"].iloc[0]
    points = training[training["format"].isin(["none", "int"])]
    assert untied == pytest.approx(noise_floor(loss_sigma(points, training, ClaimNoise())) / points["loss"].mean())
    single = weight_precision_runs("kumar2024.form_untied")  # no repeated configuration: no σ_seed, no floor
    assert seed_floors(compare(single, no_ptq, ["chinchilla"]), single, no_ptq, ClaimNoise())["seed_floor"].isna().all()
    fig = law_comparison({"comparison": table}, {})
    [floors] = [c for c in fig.axes[0].collections if c.get_label().startswith("+ seed-noise floor")]
    segments = floors.get_segments()
    sizes_out = held_out[held_out["scheme"] == SCHEMES["N"]].dropna(subset=["seed_floor"])
    assert len(segments) == len(sizes_out)
    for segment, row in zip(segments, sizes_out.itertuples()):
        assert segment[0][0] == pytest.approx(row.relative_error)
        assert segment[1][0] - segment[0][0] == pytest.approx(row.seed_floor)
    plt.close(fig)
