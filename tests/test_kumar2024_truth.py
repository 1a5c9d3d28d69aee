"""Kumar et al. 2024 figures and claims say what their data show: footers agree with what is drawn, the paper's
claims are tested in the paper's own terms, and a grid too short to test a claim makes it inconclusive.

Synthetic tables are drawn from the paper's δ_PTQ law (Table 2), so the right answer is known.
"""

from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from test_figure_content import data_lines, drawn, kumar_inputs, markers  # noqa: F401  (kumar_inputs: fixture)

from qscaling import noise
from qscaling.figures import figure_data
from qscaling.figures.caveats import SEED_BAND_GID
from qscaling.laws import kumar2024 as law
from qscaling.studies.kumar2024 import analysis as study
from qscaling.studies.kumar2024 import figures
from qscaling.studies.kumar2024.settings import Kumar2024Settings

PAPER = law.PTQ.paper_params["table2"]
SIZES = (1e4, 2e4, 4e4, 8e4)
BUDGETS = tuple(1e5 * 2.0**k for k in range(6))


def synthetic_table(delta=None, loss=None, anneal="wsd", main=True) -> pd.DataFrame:
    """A GPTQ table over SIZES × BUDGETS × INT3–6, δ from `delta(N, D, bits)` (default: the paper's law) and
    the unquantized loss from `loss(N, D)` (default: falling in both); post-PTQ loss is their sum."""
    delta = delta or (lambda N, D, bits: law.ptq_degradation(PAPER, {"N": N, "D": D, "P_post": bits}))
    loss = loss or (lambda N, D: 3.0 + 50 * N**-0.3 + 60 * D**-0.3)
    rows = []
    for N in SIZES:
        for D in BUDGETS:
            base = {"N": N, "D": D, "size": f"N{int(N)}", "split": "val", "anneal": anneal, "main": main, "repeat": False,
                    "base_loss": loss(N, D)}  # fmt: skip
            rows.append({**base, "method": "none", "bits": 16, "loss": loss(N, D), "delta": 0.0, "delta_se": 0.0})
            for bits in (3, 4, 5, 6):
                d = float(delta(N, D, bits))
                rows.append(
                    {**base, "method": "gptq", "bits": bits, "loss": loss(N, D) + d, "delta": d, "delta_se": 1e-3 * d}
                )
    return pd.DataFrame(rows).assign(tokens_per_param=lambda t: t["D"] / t["N"])


def claim_named(rows: list[dict], start: str) -> dict:
    [found] = [row for row in rows if row["claim"].startswith(start)]
    return found


def test_shrinking_with_N_is_tested_at_fixed_D_where_the_paper_states_it():
    # The paper's law at fixed D/N grows as N^(γ_D − γ_N) = N^+0.16; at fixed D it falls as N^−γ_N.
    noise = np.random.default_rng(0)

    def noisy_paper_law(N, D, bits):
        return law.ptq_degradation(PAPER, {"N": N, "D": D, "P_post": bits}) * noise.lognormal(0.0, 0.05)

    rows = study.claims({"table": synthetic_table(delta=noisy_paper_law)}, {}, Kumar2024Settings.model_construct())
    found = claim_named(rows, "δ_PTQ shrinks with N at fixed training data D")
    slope = float(found["statistic"].split("= ")[1].split(" ")[0])
    assert slope == pytest.approx(-PAPER["gamma_N"], abs=0.03)
    assert found["verdict"] == "reproduced" and found["magnitude"] == "covers paper"


def fit_with_critical_size(d_crit: float) -> SimpleNamespace:
    """A δ_PTQ fit (γ_N = 0, so one D_crit for every size) whose INT3 critical data size is `d_crit`, with B and
    β of Table 2: C_T solved from D_crit = (β B e^(P/γ_post) / (γ_D C_T))^(1/(γ_D + β))."""
    B, beta = law.KUMAR2024_CHINCHILLA["B"], law.KUMAR2024_CHINCHILLA["alpha"]
    params = {"gamma_D": 0.5, "gamma_N": 0.0, "gamma_post": 1.0}
    params["C_T"] = beta * B * np.exp(3 / params["gamma_post"]) / (params["gamma_D"] * d_crit ** (0.5 + beta))
    assert np.isclose(law.ptq_critical_data_size(params, 1e4, 3), d_crit)
    return SimpleNamespace(params=params)


def turns_up_after(D_turn):
    """Unquantized loss falling in D, plus an INT3 δ that makes the post-PTQ loss rise beyond `D_turn`."""
    return lambda N, D, bits: 0.5 * (D / D_turn) ** 2 if bits == 3 else 1e-4


def test_critical_data_size_is_inconclusive_where_the_grid_stops_short_of_it():
    table = synthetic_table()
    beyond = fit_with_critical_size(100 * max(BUDGETS))
    found = study.critical_data_size_claim(table, beyond)
    assert found["verdict"] == "inconclusive"
    assert f"D_crit {100 * max(BUDGETS):.3g} vs grid max {max(BUDGETS):.3g}" in found["statistic"]
    assert "0 of 4 grids reach D_crit" in found["statistic"]


@pytest.mark.parametrize("turns_up, verdict", [(True, "reproduced"), (False, "not reproduced")])
def test_critical_data_size_is_decided_where_the_grid_reaches_it(turns_up, verdict):
    within = fit_with_critical_size(BUDGETS[2])
    delta = turns_up_after(BUDGETS[2]) if turns_up else None
    found = study.critical_data_size_claim(synthetic_table(delta=delta), within)
    assert "4 of 4 grids reach D_crit" in found["statistic"]
    assert found["verdict"] == verdict


def test_schedule_ratio_is_the_ratio_of_mean_delta_with_a_ci_that_decides():
    wsd = synthetic_table()
    for factor, verdict in ((2.0, "reproduced"), (1.0, "not reproduced")):
        cosine = synthetic_table(
            delta=lambda N, D, bits: factor * law.ptq_degradation(PAPER, {"N": N, "D": D, "P_post": bits}),
            anneal="cosine",
            main=False,
        )
        table = pd.concat([wsd, cosine], ignore_index=True)
        found = study.schedule_ratio(table)
        assert (found["main"], found["other"], found["cells"]) == ("wsd", "cosine", 4 * 6 * 4)
        assert found["ratio"] == pytest.approx(factor)
        assert found["low"] <= factor <= found["high"]
        assert study.schedule_claim(table)["verdict"] == verdict
    assert study.schedule_ratio(wsd) is None


def footer(fig) -> str:
    texts = figure_data(fig)["texts"]
    plt.close(fig)
    return "\n".join(texts)


@pytest.fixture(scope="module")
def default_kumar_inputs(repo_root):
    """The committed default run's PTQ table and fits: the smoke grid's δ sit mostly inside their noise."""
    from qscaling.laws import load_fit

    results = repo_root / "reference" / "default" / "results"
    fits = {path.stem: load_fit(path) for path in sorted((results / "fits" / "kumar2024").glob("*.json"))}
    return {"ptq": pd.read_parquet(results / "tables" / "kumar2024.parquet")}, fits


def test_fig19_draws_only_the_points_it_fitted_and_counts_those_left_out(default_kumar_inputs):
    tables, fits = default_kumar_inputs
    fitted = study.fit_rows(tables["ptq"], "gptq")
    table = tables["ptq"]
    quantized = table[(table["method"] == "gptq") & table["main"] & (table["split"] == "val")]
    [axes] = drawn(figures.fig19(tables, fits))
    assert sorted(y for _, y in markers(axes)) == pytest.approx(sorted(fitted["delta"]), rel=1e-12)
    left_out = len(quantized) - len(fitted)
    assert left_out > 0  # the default tables have points below the noise floor: the test can fail
    assert f"{left_out} of {len(quantized)} points" in footer(figures.fig19(tables, fits))


def test_fig1_left_stars_a_turn_up_and_says_when_there_is_none():
    # Noiseless losses: any rise clears its evaluation noise.
    flat = drawn(figures.fig1_left({"ptq": synthetic_table().assign(loss_se=0.0)}, {}))[0]
    assert not [line for line in data_lines(flat) if len(line) == 1]
    assert any("no format's loss turns up within the grid" in text for text in flat["texts"])

    table = synthetic_table(delta=turns_up_after(BUDGETS[2])).assign(loss_se=0.0)
    [axes] = drawn(figures.fig1_left({"ptq": table}, {}))
    turns = study.critical_tokens(table)
    best = turns[(turns["N"] == min(SIZES)) & (turns["bits"] == 3)].iloc[0]
    stars = [line[0] for line in data_lines(axes) if len(line) == 1]
    assert stars == [pytest.approx((best["D_best"] / min(SIZES), best["loss_best"]))]
    assert not axes["texts"]


def test_fig12_is_labelled_as_the_schedules_it_compares(kumar_inputs):  # noqa: F811
    tables, fits = kumar_inputs
    fig = figures.fig12(tables, fits)
    [axes] = figure_data(fig)["axes"]
    assert "WSD" in axes["title"] and "cosine" in axes["title"] and "linear" not in axes["title"]
    text = footer(fig)
    assert "not the paper's linear-decay" in text and "mean δ cosine/wsd" in text


def test_ptq_grid_draws_the_papers_exponent_through_the_points(kumar_inputs):  # noqa: F811
    tables, fits = kumar_inputs
    axes = drawn(figures.fig2(tables, fits))
    bottoms = axes[len(axes) // 2 :]
    for bottom in bottoms:
        [guide] = [line for line in bottom["lines"] if line["label"] == "paper D^0.51"]
        x, y = np.log(guide["x"]), np.log(guide["y"])
        assert np.polyfit(x, y, 1)[0] == pytest.approx(PAPER["gamma_D"])
        points = np.log(np.array(markers(bottom)))
        centre_x, centre_y = points.mean(axis=0)
        assert np.interp(centre_x, x, y) == pytest.approx(centre_y)
    assert axes[0]["ylabel"].startswith("δ_PTQ (nats")  # the top row shows the gap itself, not overlapping losses


def with_repeats(table: pd.DataFrame, deviations=(-0.1, 0.1), loss_deviations=(-0.02, 0.02)) -> pd.DataFrame:
    """`table` with every seed repeat of its largest budget at the two smallest sizes: δ times e^deviation and the
    unquantized loss plus loss_deviation, one repeat per deviation (its post-PTQ loss moving with both)."""
    cells = table[table["N"].isin(SIZES[:2]) & (table["D"] == BUDGETS[-1])]
    repeats = []
    for seed, (deviation, loss_deviation) in enumerate(zip(deviations, loss_deviations), start=1):
        repeat = cells.assign(repeat=True, main=False, run=lambda frame, s=seed: frame["size"] + f"-seed{s}")
        repeat["delta"] = repeat["delta"] * np.exp(deviation)
        repeat["loss"] = repeat["loss"] - cells["delta"] + repeat["delta"] + loss_deviation
        repeats.append(repeat)
    table = pd.concat([table.assign(run=table["size"]), *repeats], ignore_index=True)
    return table.assign(base_loss=table["loss"] - table["delta"], loss_se=0.0)


def test_seed_spread_is_the_pooled_mad_of_log_delta_and_of_the_loss_at_the_repeated_points():
    table = with_repeats(synthetic_table())
    spread = study.seed_spread(table).set_index(["method", "bits"])
    three_seeds = noise.mad_scale([-0.1, 0.0, 0.1])  # the same at both points, so their pool is it too
    assert spread.loc[("gptq", 3), "sd"] == pytest.approx(three_seeds)
    assert spread.loc[("none", 16), "sd"] == pytest.approx(noise.mad_scale([-0.02, 0.0, 0.02]))
    assert spread.loc[("gptq", 3), ["seeds", "points"]].tolist() == [6, 2]
    assert spread.loc[("gptq", 3), "dof"] == pytest.approx(2 * noise.mad_dof(3))
    assert study.seed_spread(synthetic_table()).empty


def test_seed_repeats_stay_out_of_the_grid_its_fits_claims_and_the_schedule_pairs():
    table = synthetic_table()
    repeated = with_repeats(table, deviations=(-2.0, 2.0), loss_deviations=(-1.0, 1.0))
    columns = ["N", "D", "bits", "delta"]
    assert study.fit_rows(repeated, "gptq")[columns].equals(study.fit_rows(table, "gptq")[columns])
    for claimed, plain in zip(study.slope_claims(repeated), study.slope_claims(table)):
        assert claimed == plain
    cosine = synthetic_table(anneal="cosine", main=False)
    both = pd.concat([repeated, cosine], ignore_index=True)
    assert study.schedule_ratio(both)["ratio"] == pytest.approx(1.0)


def test_ptq_grids_draw_the_seed_band_of_each_bit_width_and_say_where_it_comes_from():
    table = with_repeats(synthetic_table())
    fig = figures.fig2({"ptq": table}, {})
    tops = [ax for ax in fig.axes if ax.get_ylabel().startswith("δ_PTQ (nats") or ax.get_title().startswith("N =")]
    bands = [c for ax in tops for c in ax.collections if c.get_gid() == SEED_BAND_GID]
    assert len(bands) == 4 * len(SIZES)  # every bit width in every size's panel
    gptq3 = table[(table["method"] == "gptq") & (table["bits"] == 3) & table["main"]].sort_values("D")
    first = gptq3[gptq3["N"] == SIZES[0]]
    segments = bands[0].get_segments()
    half_widths = [(segment[1][1] - segment[0][1]) / 2 for segment in segments]
    assert half_widths == pytest.approx(2 * noise.mad_scale([-0.1, 0.0, 0.1]) * first["delta"].to_numpy())
    assert f"pale bars: ± 2 σ_seed of δ, relative (INT3 {noise.mad_scale([-0.1, 0.0, 0.1]):.0%}" in footer(fig)
    without = footer(figures.fig2({"ptq": synthetic_table()}, {}))
    assert "no seed repeats" in without


def test_fig1_left_draws_the_seed_band_of_the_loss():
    table = with_repeats(synthetic_table())
    fig = figures.fig1_left({"ptq": table}, {})
    [band] = [c for c in fig.axes[0].collections if c.get_gid() == SEED_BAND_GID][:1]
    loss_sd = noise.mad_scale([-0.02, 0.0, 0.02])
    assert (band.get_segments()[0][1][1] - band.get_segments()[0][0][1]) / 2 == pytest.approx(2 * loss_sd, rel=0.5)
    assert f"± 2 σ_seed of the unquantized loss ({loss_sd:.2g} nats" in footer(fig)
