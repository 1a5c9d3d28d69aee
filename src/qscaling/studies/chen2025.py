"""Chen et al. 2025, "Scaling Law for Quantization-Aware Training": the INT4 QAT error δ_p(N, D, G).

Grid (`cells`): each cell trains every listed precision × size × group size G at every budget, from scratch, as
QAT (`training_precision`: forward fake-quant, clipped STE), annealed by a WSD cooldown branch of its own trunk.
Each QAT point has a full-precision (fp32) partner at the same (size, budget, seed) — the ladder's own run where
the specs coincide. δ = loss of the QAT model *evaluated as trained* − loss of its partner, paired over the same
held-out windows; extra seeds at one point (`seeds`) give the between-run noise floor σ_seed of such a δ.

Precisions (Chen et al.'s names): W4A4, W4A16 (weights only), W16A4 (activations only), and W4A4_FC2_8bit /
W16A4_FC2_8bit with the FC2 (down-projection) input at 8 bits. INT4 symmetric absmax; weights per output
channel or in groups of G along the input dimension, activations per token or in groups of G. A per-channel /
per-token point enters the law with G = d_model (the row length of the QKV, O and FC1 inputs).

A cell may also vary what the law holds fixed, each a label column of the table: `format: fp` trains FP4 E2M1
(blocks of G, the same scaling) instead of INT4 (Fig. 2, and Fig. 13's test of the INT4 law on FP4);
`quantizers: [...]` trains learnable quantizers — LSQ or LWC weights, LAC activation clipping
(`qscaling.quant.learnable`) — instead of absmax (Fig. 14); `lr_scales: [...]` multiplies the peak LR, partner
included (Fig. 3); `budgets` narrows the study's budgets for the cell. The laws, fits and claims read the main
grid only: INT4, absmax, the recipe's LR (`main_grid`).
"""

import math

import numpy as np
import pandas as pd

from qscaling.config import ConfigError, check_sizes
from qscaling.laws import chen2025 as law
from qscaling.studies import (
    Evaluation,
    Job,
    PartneredPoint,
    Scoring,
    label,
    partnered_evaluations,
    scaled_peak_lr,
    try_fit,
)
from qscaling.studies.claims import (
    INCONCLUSIVE,
    NO_PAPER_VALUE,
    claim,
    magnitude_from_interval,
    positive_parameter_claim,
)

STUDY = "chen2025"
SHARED_SETTINGS = ("training",)
FULL = "full"  # the fp32 partner of every QAT point (Chen et al.'s BF16 baseline)
PRECISIONS = ("W4A4", "W4A16", "W16A4", "W4A4_FC2_8bit", "W16A4_FC2_8bit")
CHANNEL = "channel"
# Quantized Linear inputs whose row length a group must divide: QKV, O and FC1 read d_model, FC2 reads d_ff.
INPUT_DIMS = ("d_model", "d_ff")
KEYS = ["size", "N", "D", "seed", "lr_scale"]  # a QAT point and its full-precision partner share these
LAW_INPUTS = ("N", "D", "G")
INT, FP = "int", "fp"
FORMATS = (INT, FP)
ABSMAX = "absmax"
# Learnable quantizers (qscaling.quant.learnable) by the tensor they quantize.
QUANTIZERS = {"lsq": "weights", "lwc": "weights", "lac": "activations"}


def group_spec(bits: int, group, role: str, format: str = INT) -> str:
    """The `bits`-bit absmax spec of a group size (or per-channel weights / per-token activations): INT, or FP4
    E2M1 for `format` fp (8-bit FP is E4M3), blocks of G along the input dimension either way."""
    granularity = ("channel" if role == "weights" else "token") if group == CHANNEL else None
    if format == FP:
        element = "e2m1" if bits == 4 else "e4m3"
        return f"fp:{element}:{granularity or f'b{group}'}"
    return f"int{bits}:{granularity or f'g{group}'}"


def training_precision(name: str, group, bits: int = 4, format: str = INT, quantizer: str = ABSMAX) -> dict:
    """The `training_precision` of one of PRECISIONS at group size `group`, in `format`, with `quantizer` (absmax
    or a key of QUANTIZERS) on the tensor it learns."""
    weights, activations = name.startswith("W4"), "A4" in name
    precision = {
        "weights": group_spec(bits, group, "weights", format) if weights else None,
        "activations": group_spec(bits, group, "activations", format) if activations else None,
    }
    if name.endswith("_FC2_8bit"):
        precision["overrides"] = {"fc2": {"activations": group_spec(8, group, "activations", format)}}
    if quantizer != ABSMAX:
        precision["quantizer"] = {QUANTIZERS[quantizer]: quantizer}
    return precision


def main_grid(table: pd.DataFrame) -> pd.Series:
    """The rows the law describes: INT4, absmax, the recipe's LR, trained without diverging (full-precision
    partners pass at the recipe's LR)."""
    trained = ~table["diverged"] if "diverged" in table else True
    own_format = table["format"].isin([INT, ""]) & table["quantizer"].isin([ABSMAX, ""])
    return own_format & (table["lr_scale"] == 1.0) & trained


def law_group(config: dict, size: str, group) -> int:
    return config["ladder"][size]["d_model"] if group == CHANNEL else int(group)


def check_config(config: dict) -> None:
    block, key = config["studies"][STUDY], f"studies.{STUDY}"
    for index, cell in enumerate(block["cells"]):
        where = f"{key}.cells.{index}"
        check_sizes(config, f"{where}.sizes", cell["sizes"])
        for name in cell["precisions"]:
            if name not in PRECISIONS:
                raise ConfigError(f"config key {where}.precisions: unknown precision {name!r} (valid: {PRECISIONS})")
        for group in cell["groups"]:
            _check_group(config, f"{where}.groups", group, cell["sizes"])
        if not set(cell.get("budgets", [])) <= set(block["budgets"]):
            raise ConfigError(f"config key {where}.budgets: not all of them are in {key}.budgets")
        for quantizer in set(cell.get("quantizers", [])) - {ABSMAX}:
            role = QUANTIZERS.get(quantizer)
            if role is None:
                raise ConfigError(
                    f"config key {where}.quantizers: unknown quantizer {quantizer!r} (valid: {', '.join(QUANTIZERS)})"
                )
            if cell.get("format", INT) != INT or any(
                training_precision(name, 8)[role] is None for name in cell["precisions"]
            ):
                raise ConfigError(
                    f"config key {where}.quantizers: {quantizer} learns an INT {role} quantizer, which not every "
                    f"precision of the cell has"
                )
    seeds = block["seeds"]
    check_sizes(config, f"{key}.seeds.size", seeds["size"])
    _check_group(config, f"{key}.seeds.group", seeds["group"], [seeds["size"]])
    if seeds["precision"] not in PRECISIONS:
        raise ConfigError(f"config key {key}.seeds.precision: unknown precision {seeds['precision']!r}")
    if seeds["budget"] not in block["budgets"]:
        raise ConfigError(f"config key {key}.seeds.budget: {seeds['budget']} is not one of {key}.budgets")
    if config["training"]["seed"] in seeds["extra"]:
        raise ConfigError(f"config key {key}.seeds.extra: repeats the recipe's seed {config['training']['seed']}")


def _check_group(config: dict, key: str, group, sizes) -> None:
    if group == CHANNEL:
        return
    if not isinstance(group, int) or group < 2:
        raise ConfigError(f"config key {key}: group size {group!r} must be an integer ≥ 2 or '{CHANNEL}'")
    for size in sizes:
        for dim in INPUT_DIMS:
            width = config["ladder"][size][dim]
            if width % group:
                raise ConfigError(f"config key {key}: G = {group} does not divide {size}'s {dim} = {width}")


def points(config: dict) -> list[dict]:
    """Every QAT point of the grid and of the seed repeats, once:
    {size, budget, precision, group, format, quantizer, lr_scale, seed}."""
    block, seed = config["studies"][STUDY], config["training"]["seed"]
    grid = [
        {
            "size": size,
            "budget": budget,
            "precision": name,
            "group": group,
            "format": cell.get("format", INT),
            "quantizer": quantizer,
            "lr_scale": float(lr_scale),
            "seed": seed,
        }  # fmt: skip
        for cell in block["cells"]
        for name in cell["precisions"]
        for size in cell["sizes"]
        for group in cell["groups"]
        for budget in cell.get("budgets", block["budgets"])
        for quantizer in cell.get("quantizers", [ABSMAX])
        for lr_scale in cell.get("lr_scales", [1])
    ]
    repeats = block["seeds"]
    grid += [
        {
            **{k: repeats[k] for k in ("size", "budget", "precision", "group")},
            "format": INT,
            "quantizer": ABSMAX,
            "lr_scale": 1.0,
            "seed": extra,
        }  # fmt: skip
        for extra in [seed, *repeats["extra"]]
    ]
    unique = {tuple(point.values()): point for point in grid}
    return list(unique.values())


def plan(config: dict, planner) -> list[Evaluation]:
    """Each QAT point and its full-precision partner (one evaluation per checkpoint, every label it carries)."""
    return partnered_evaluations(
        STUDY, config["studies"][STUDY], planner, [partnered(config, p) for p in points(config)]
    )


def partnered(config: dict, point: dict) -> PartneredPoint:
    size, seed, lr_scale = point["size"], point["seed"], point["lr_scale"]
    recipe = {"seed": seed}
    if lr_scale != 1.0:
        recipe["lr"] = scaled_peak_lr(config, size, lr_scale)
    group = law_group(config, size, point["group"])
    granularity = CHANNEL if point["group"] == CHANNEL else "group"
    variant = {"precision": point["precision"], "format": point["format"], "quantizer": point["quantizer"]}
    return PartneredPoint(
        size,
        point["budget"],
        training_precision(point["precision"], point["group"], 4, point["format"], point["quantizer"]),
        label(**variant, lr_scale=lr_scale, G=group, granularity=granularity, seed=seed),
        label(precision=FULL, format="", quantizer="", lr_scale=lr_scale, G=0, granularity="", seed=seed),
        recipe,
    )


def scoring(config: dict, layout) -> Scoring:
    block = config["studies"][STUDY]
    params = {"eval_tokens": block["eval_tokens"], "batch_size": config["evaluation"]["batch_size"]}
    return Scoring(
        f"{__name__}:score_job",
        {"val": layout.data("val.bin")},
        params,
        outputs=("activations",),
        message="Scoring as trained",
    )


def score_job(checkpoint, inputs: dict, params: dict, labels: list[dict], device: str) -> dict:
    """One checkpoint evaluated as it trained (its precision re-applied): its loss on every held-out window (the
    rows δ is paired over) and the kurtosis and max |x| of each Linear's input, per block and role."""
    from qscaling.studies import score_windows, with_labels

    model, tokens, windows, columns = score_windows(checkpoint, inputs["val"], params, device)
    seq_len = model.config.max_position_embeddings
    # Fig. 9 and the kurtosis claim read the main grid's models only: the ablations' statistics would be unread.
    in_main_grid = [variant for variant in labels if main_grid(pd.DataFrame([variant])).all()]
    statistics = input_statistics(model, tokens, seq_len).assign(**columns) if in_main_grid else pd.DataFrame()
    return {"table": with_labels(windows, labels), "activations": with_labels(statistics, in_main_grid)}


def jobs(config: dict, evaluations: list[Evaluation], layout) -> list[Job]:
    """`chen2025_activations`: every checkpoint's input statistics in one table (Fig. 9, the kurtosis claim)."""
    return [
        Job(
            "activations",
            f"{__name__}:collect_activations_job",
            {"statistics": [layout.scored(STUDY, "activations", e.run, e.tokens) for e in evaluations]},
            {"activations": layout.table(STUDY, "activations")},
            message="Collecting the Linear-input statistics",
        )
    ]


def collect_activations_job(inputs: dict, outputs: dict, params: dict) -> None:
    from qscaling.atomic import write_table

    frames = [pd.read_parquet(path) for path in inputs["statistics"]]
    table = pd.concat(frames, ignore_index=True).sort_values(["precision", "N", "D", "G", "seed", "block", "role"])
    write_table(table.reset_index(drop=True), outputs["activations"])


def input_statistics(model, tokens: np.ndarray, seq_len: int, windows: int = 8) -> pd.DataFrame:
    """Kurtosis (Pearson, of all entries) and max |x| of every block Linear's input on the first `windows`
    held-out windows: Chen et al.'s Fig. 9 (FC2's input is the outlier-heavy one)."""
    import torch

    from qscaling.quant.roles import linear_sites

    captured, hooks = {}, []
    for site in linear_sites(model, include_lm_head=False):

        def keep(module, args, output, site=site):
            captured.setdefault((site.block, site.role), []).append(args[0].detach().double().flatten())

        hooks.append(site.module.register_forward_hook(keep))
    data = torch.from_numpy(np.asarray(tokens[: windows * seq_len]).astype(np.int64)).view(windows, seq_len)
    try:
        with torch.no_grad():
            model.eval()(input_ids=data.to(next(model.parameters()).device))
    finally:
        for hook in hooks:
            hook.remove()
    rows = []
    for (block, role), values in sorted(captured.items()):
        x = torch.cat(values)  # q/k/v (and gate/up) read one input: repeating it leaves kurtosis and max alike
        centred = x - x.mean()
        rows.append(
            {
                "block": block,
                "role": role,
                "kurtosis": float((centred**4).mean() / (centred**2).mean() ** 2),
                "max_abs": float(x.abs().max()),
            }
        )
    return pd.DataFrame(rows)


VARIANT = ["precision", "format", "quantizer", "G"]  # with KEYS, what tells one QAT point from another
DIVERGED_RULE = (
    "a QAT point whose run, or whose full-precision partner, diverged keeps its row with diverged = True and no δ; "
    "fits, fit tables, figures and claims read only the other rows"
)


def build_table(rows: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """One row per QAT checkpoint: its loss, its partner's, and δ paired over windows with its standard error.
    `budget` is the token budget the point was planned at (the config's), D the tokens it saw (whole steps).
    Points lost to a diverged run are kept as rows with `diverged` True (DIVERGED_RULE)."""
    from qscaling.evaluate import standard_error
    from qscaling.studies import split_diverged

    rows, diverged = split_diverged(rows)
    per_window = rows.drop_duplicates(["run", "window", *VARIANT])
    full = per_window[per_window["precision"] == FULL][[*KEYS, "window", "loss", "run"]]
    qat = per_window[per_window["precision"] != FULL]
    paired = qat.merge(full, on=[*KEYS, "window"], suffixes=("", "_base"), validate="many_to_one")
    paired["difference"] = paired["loss"] - paired["loss_base"]
    groups = paired.groupby([*KEYS, "milestone", *VARIANT, "granularity", "run", "run_base"], sort=False)
    table = (
        groups.agg(
            loss=("loss", "mean"),
            loss_se=("loss", standard_error),
            base_loss=("loss_base", "mean"),
            delta=("difference", "mean"),
            delta_se=("difference", standard_error),
            windows=("window", "size"),
        )
        .reset_index()
        .rename(columns={"milestone": "budget"})
    )
    diverged_partners = diverged[diverged["precision"] == FULL]
    partnered = set(map(tuple, full[KEYS].to_numpy())) | set(map(tuple, diverged_partners[KEYS].to_numpy()))
    missing = set(map(tuple, qat[KEYS].drop_duplicates().to_numpy())) - partnered
    if missing:
        raise ValueError(f"{STUDY}: QAT points without a full-precision partner: {sorted(missing)}")
    lost = _diverged_points(qat, diverged, diverged_partners)
    table = pd.concat([table.assign(diverged=False, diverged_reason=""), lost], ignore_index=True)
    table["tokens_per_param"] = table["D"] / table["N"]
    return table.sort_values(["precision", "format", "quantizer", "lr_scale", "N", "D", "G", "seed"]).reset_index(
        drop=True
    )


def _diverged_points(qat: pd.DataFrame, diverged: pd.DataFrame, diverged_partners: pd.DataFrame) -> pd.DataFrame:
    """The QAT points a diverged run took out: those that diverged, and those whose partner did."""
    columns = [*KEYS, "milestone", *VARIANT, "granularity", "run"]
    if diverged.empty:
        return pd.DataFrame(columns=[*columns, "diverged", "diverged_reason"]).rename(columns={"milestone": "budget"})
    own = diverged[diverged["precision"] != FULL][[*columns, "diverged_reason"]]
    points = qat.drop_duplicates([*KEYS, *VARIANT])[columns]
    partners = diverged_partners[[*KEYS, "run", "diverged_reason"]].rename(columns={"run": "run_base"})
    orphaned = points.merge(partners, on=KEYS)
    orphaned["diverged_reason"] = "its full-precision partner " + orphaned["run_base"] + " diverged"
    lost = pd.concat([own, orphaned], ignore_index=True).assign(diverged=True)
    return lost.rename(columns={"milestone": "budget"})


def seed_points(table: pd.DataFrame, settings: dict) -> pd.DataFrame:
    repeats = settings["seeds"]
    table = table[main_grid(table)]
    rows = table[
        (table["size"] == repeats["size"])
        & (table["budget"] == repeats["budget"])
        & (table["precision"] == repeats["precision"])
    ]
    return rows[rows["granularity"].eq(CHANNEL) if repeats["group"] == CHANNEL else rows["G"].eq(repeats["group"])]


def seed_sigma(table: pd.DataFrame, settings: dict) -> float:
    """σ_seed: the spread (sample SD) over seeds of δ at the repeated point — the noise floor of any δ, or
    difference of δs, between separately trained runs."""
    deltas = seed_points(table, settings)["delta"]
    return float(deltas.std(ddof=1)) if len(deltas) >= 2 else math.nan


def grid_rows(table: pd.DataFrame, settings: dict, precision: str) -> pd.DataFrame:
    """The recipe-seed points of one precision that trained (seed repeats would weigh their point thrice)."""
    seed = settings["training"]["seed"]
    return table[(table["precision"] == precision) & (table["seed"] == seed) & main_grid(table)]


# Chen et al.'s Tables 2 and 4 weigh the law against reduced ones on W4A4 and W4A16: each variant holds the
# named exponents at 0 (without D: γ_D; N only: γ_D and γ_G, so δ = k / N^γ_N).
REDUCED_LAWS = {"no_D": ("gamma_D",), "N_only": ("gamma_D", "gamma_G")}
REDUCED_PRECISIONS = ("W4A4", "W4A16")


def fit_plan(settings: dict) -> dict[str, tuple[str, tuple[str, ...]]]:
    """{fit name: (precision, exponents held at 0)}: `qat` is W4A4 (the figures' and Table 1's first row),
    `qat_<precision>` the others, `<that name>_no_D` / `_N_only` the reduced laws of REDUCED_PRECISIONS."""
    present = list(dict.fromkeys(name for cell in settings["cells"] for name in cell["precisions"]))
    plan = {fit_name(name): (name, ()) for name in present}
    for name in (name for name in REDUCED_PRECISIONS if name in present):
        plan.update({fit_name(name, variant): (name, zeros) for variant, zeros in REDUCED_LAWS.items()})
    return plan


def fit_names(settings: dict) -> list[str]:
    return list(fit_plan(settings))


def fit_name(precision: str, reduced: str | None = None) -> str:
    """The fit of `precision`'s law, or of its `reduced` form (a key of REDUCED_LAWS)."""
    name = "qat" if precision == "W4A4" else f"qat_{precision}"
    return f"{name}_{reduced}" if reduced else name


def fit_laws(table: pd.DataFrame, settings: dict) -> dict:
    """δ_p(N, D, G) per precision, on its positive δs; CIs from resampling runs, held-out error leaving out each N.
    An exponent whose input the grid holds constant (one G for a precision) is held at that precision's Table 1
    value (the fit's notes say so)."""
    from qscaling.laws.table import constant_inputs, unidentifiable

    fits = {}
    for name, (precision, zeros) in fit_plan(settings).items():
        rows = grid_rows(table, settings, precision)
        rows = rows[rows["delta"] > 0]
        if rows.empty:
            fits[name] = f"chen2025.qat: no {precision} point with δ > 0"
            continue
        paper = law.QAT.paper_params[precision]
        fixed = {param: paper[param] for param in unidentifiable(law.QAT, constant_inputs(law.QAT, rows))}
        fixed.update(dict.fromkeys(zeros, 0.0))
        options = {"bootstrap": settings["bootstrap"], "group_col": "N", "run_col": "run", "seed": 0}
        fits[name] = try_fit("chen2025.qat", rows, fixed=fixed or None, **options)
    return fits


FIT_TABLES = ("decomposition", "ratio")


def fit_tables(table: pd.DataFrame, settings: dict) -> dict:
    return {"decomposition": decomposition(table, settings), "ratio": activation_weight_ratio(table, settings)}


def decomposition(table: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """δ_W4A4 beside δ_W4A16 + δ_W16A4 at each (N, D, G) all three share (Fig. 6)."""
    index = ["N", "D", "G"]
    parts = [
        grid_rows(table, settings, name)[[*index, "delta", "delta_se"]].rename(
            columns={"delta": name, "delta_se": f"{name}_se"}
        )
        for name in ("W4A4", "W4A16", "W16A4")
    ]
    joined = parts[0].merge(parts[1], on=index).merge(parts[2], on=index)
    return pd.DataFrame(
        {
            **{name: joined[name] for name in index},
            "delta_W4A4": joined["W4A4"],
            "delta_W4A4_se": joined["W4A4_se"],
            "delta_sum": joined["W4A16"] + joined["W16A4"],
            "delta_sum_se": np.hypot(joined["W4A16_se"], joined["W16A4_se"]),
        }
    ).sort_values(index, ignore_index=True)


def decomposition_slope(frame: pd.DataFrame, bootstrap: int, seed: int = 0) -> tuple[float, float, float]:
    """c in δ_W4A4 = c · (δ_W4A16 + δ_W16A4): least squares through the origin, percentile CI over points."""

    def slope(rows):
        x, y = rows["delta_sum"].to_numpy(float), rows["delta_W4A4"].to_numpy(float)
        return float(x @ y / (x @ x)) if x @ x > 0 else math.nan

    return _with_percentile_ci(frame, slope, bootstrap, seed)


def _with_percentile_ci(frame: pd.DataFrame, statistic, bootstrap: int, seed: int) -> tuple[float, float, float]:
    """`statistic(frame)` and its 95 % percentile CI over `bootstrap` resamples of the frame's rows."""
    rng = np.random.default_rng(seed)
    draws = [statistic(frame.iloc[rng.integers(0, len(frame), len(frame))]) for _ in range(bootstrap)]
    with np.errstate(all="ignore"):
        low, high = np.nanpercentile(draws, [2.5, 97.5]) if draws else (math.nan, math.nan)
    return statistic(frame), float(low), float(high)


RATIO_VARIANTS = {"plain": "W16A4", "FC2 8-bit": "W16A4_FC2_8bit"}


def activation_weight_ratio(table: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """R = δ_W16A4 / δ_W4A16 at each (N, D, G) where both trained at the recipe seed, plain and with the FC2
    input at 8 bits in the activation-only run (Fig. 8; W4A16 quantizes no activation, so it has one variant).
    `R_se` propagates the two δs' evaluation SEs; `clear_of_seed_noise`: both δs exceed 2 σ_seed, so R is not a
    ratio of between-run noise (which R_se leaves out)."""
    index = ["N", "D", "G"]
    rows = table[(table["seed"] == settings["training"]["seed"]) & main_grid(table)]

    def deltas(precision):
        return rows[rows["precision"] == precision].set_index(index)[["delta", "delta_se"]]

    frames = [
        deltas(activations)
        .merge(deltas("W4A16"), left_index=True, right_index=True, suffixes=("_activations", "_weights"))
        .reset_index()
        .assign(variant=variant)
        for variant, activations in RATIO_VARIANTS.items()
    ]
    ratios = pd.concat(frames, ignore_index=True)
    ratios["tokens_per_param"] = ratios["D"] / ratios["N"]
    ratios["R"] = ratios["delta_activations"] / ratios["delta_weights"]
    relative = np.hypot(
        ratios["delta_se_activations"] / ratios["delta_activations"],
        ratios["delta_se_weights"] / ratios["delta_weights"],
    )
    ratios["R_se"] = ratios["R"].abs() * relative  # first-order, from the paired evaluation SEs only
    sigma = seed_sigma(table, settings)
    ratios["sigma_seed"] = sigma
    ratios["clear_of_seed_noise"] = (ratios["delta_activations"] > 2 * sigma) & (ratios["delta_weights"] > 2 * sigma)
    return ratios.sort_values(["variant", "G", "N", "D"], ignore_index=True)


def ratio_trend(ratios: pd.DataFrame, bootstrap: int, seed: int = 0) -> tuple[float, float, float]:
    """Slope of log R on log(D/N) by least squares, with its percentile CI over points (R > 0 only)."""

    def slope(rows):
        x, y = np.log(rows["tokens_per_param"].to_numpy(float)), np.log(rows["R"].to_numpy(float))
        return float(np.polyfit(x, y, 1)[0]) if np.ptp(x) > 0 else math.nan

    return _with_percentile_ci(ratios, slope, bootstrap, seed)


def claims(tables: dict, fits: dict, settings: dict) -> list[dict]:
    table = tables["table"]
    sigma = seed_sigma(table, settings)
    noise = f"σ_seed = {sigma:.2g} over {len(seed_points(table, settings))} seeds"
    out = []
    fit = fits.get("qat")
    for name, text, variable in (
        ("gamma_N", "W4A4 QAT error falls with model size (γ_N > 0)", "N"),
        ("gamma_D", "W4A4 QAT error grows with training tokens (γ_D > 0)", "D"),
        ("gamma_G", "W4A4 QAT error grows with the group size (γ_G > 0)", "G"),
    ):
        if fit is None:
            out.append(claim(STUDY, text, statistic="no W4A4 fit", ci="", verdict=INCONCLUSIVE))
            continue
        if fit.held_fixed(name):
            statistic = f"{name} held at the paper's value: the grid has one {variable}"
            out.append(claim(STUDY, text, statistic=statistic, ci="", verdict=INCONCLUSIVE))
            continue
        row = positive_parameter_claim(STUDY, text, fit, name, paper=law.QAT.paper_params["W4A4"][name])
        out.append(_floored(row, _effect_across(grid_rows(table, settings, "W4A4"), fit, variable), sigma, noise))
    out.append(_weights_vs_activations_claim(table, fits, settings, sigma, noise))
    out.append(_fc2_claim(table, settings, sigma, noise))
    out.append(_kurtosis_claim(tables.get("activations")))
    decomposition_row = _decomposition_claim(decomposition(table, settings), settings)
    out.append(_floored_by_w4a4(decomposition_row, table, settings, sigma, noise))
    out.append(_ratio_claim(table, settings, sigma, noise))
    out.append(_floored_by_w4a4(_d_term_claim(fits), table, settings, sigma, noise))
    return out


def _effect_across(rows: pd.DataFrame, fit, variable: str) -> float:
    """How far the fitted δ moves across the grid's range of `variable`, the others at their medians."""
    if rows.empty:
        return math.nan
    at = {column: float(rows[column].median()) for column in LAW_INPUTS}
    ends = [{**at, variable: float(rows[variable].min())}, {**at, variable: float(rows[variable].max())}]
    low, high = (float(fit.predict(pd.DataFrame([point]))[0]) for point in ends)
    return abs(high - low)


def _floored(row: dict, effect: float, sigma: float, noise: str, what: str = "effect over the grid") -> dict:
    """A verdict whose whole effect over the grid is within 2 σ_seed of nothing is inconclusive: separately
    trained runs differ by that much with no precision effect at all."""
    row = {**row, "ci": f"{row['ci']} ({noise})"}
    if math.isfinite(sigma) and effect <= 2 * sigma and row["verdict"] != INCONCLUSIVE:
        statistic = f"{row['statistic']}; {what} {effect:.2g} ≤ 2 σ_seed"
        magnitude = row["magnitude"] if row["magnitude"] == NO_PAPER_VALUE else INCONCLUSIVE
        return {**row, "statistic": statistic, "verdict": INCONCLUSIVE, "magnitude": magnitude}
    return row


def _weights_vs_activations_claim(table: pd.DataFrame, fits: dict, settings: dict, sigma: float, noise: str) -> dict:
    """γ_D(W4A16) − γ_D(W16A4): inconclusive where either exponent is not a free fitted value, or where neither
    precision's fitted δ moves with D by more than the seed noise over the grid."""
    text = "Weight error grows faster with D than activation error (γ_D of W4A16 > γ_D of W16A4)"
    precisions = {"W4A16": fits.get("qat_W4A16"), "W16A4": fits.get("qat_W16A4")}
    if None in precisions.values():
        return claim(STUDY, text, statistic="no W4A16 or W16A4 fit", ci="", verdict=INCONCLUSIVE)
    pinned = [
        f"{precision}'s γ_D {'held at the paper value' if fit.held_fixed('gamma_D') else 'at its bound'}"
        for precision, fit in precisions.items()
        if fit.held_fixed("gamma_D") or fit.at_bound("gamma_D")
    ]
    weights, activations = precisions.values()
    paper = law.QAT.paper_params["W4A16"]["gamma_D"] - law.QAT.paper_params["W16A4"]["gamma_D"]
    if pinned:
        values = ", ".join(f"{p} {f.params['gamma_D']:.3f}" for p, f in precisions.items())
        statistic = f"γ_D {values}: {'; '.join(pinned)}"
        return claim(STUDY, text, statistic=statistic, ci="", verdict=INCONCLUSIVE, paper=paper, magnitude=INCONCLUSIVE)
    difference = weights.params["gamma_D"] - activations.params["gamma_D"]
    low = weights.ci["gamma_D"][0] - activations.ci["gamma_D"][1]
    high = weights.ci["gamma_D"][1] - activations.ci["gamma_D"][0]
    verdict = "reproduced" if low > 0 else ("not reproduced" if high < 0 else INCONCLUSIVE)
    row = claim(
        STUDY,
        text,
        statistic=f"γ_D difference = {difference:.3f} (W4A16 {weights.params['gamma_D']:.3f}, "
        f"W16A4 {activations.params['gamma_D']:.3f})",
        ci=f"[{low:.3f}, {high:.3f}] (difference of the two bootstrap CIs' ends)",
        verdict=verdict,
        paper=paper,
        magnitude=magnitude_from_interval(low, high, paper),
    )
    effect = max(_effect_across(grid_rows(table, settings, p), fit, "D") for p, fit in precisions.items())
    return _floored(row, effect, sigma, noise, what="largest effect of D over the grid")


def _fc2_claim(table: pd.DataFrame, settings: dict, sigma: float, noise: str) -> dict:
    """δ_W4A4 − δ_W4A4_FC2_8bit over the points both trained: separate runs, so its noise is σ_seed·√2 per point."""
    text = "The FC2 input at 8 bits cuts W4A4 QAT error (Fig. 9)"
    index = ["N", "D", "G"]
    plain = grid_rows(table, settings, "W4A4").set_index(index)["delta"]
    fixed = grid_rows(table, settings, "W4A4_FC2_8bit").set_index(index)["delta"]
    cut = (plain - fixed).dropna()
    if cut.empty or not math.isfinite(sigma):
        return claim(
            STUDY, text, statistic="no W4A4 point with an FC2-8bit partner, or no σ_seed", ci="", verdict=INCONCLUSIVE
        )
    mean, half = float(cut.mean()), 1.96 * sigma * math.sqrt(2 / len(cut))
    return claim(
        STUDY,
        text,
        statistic=f"mean cut {mean:.2e} nats over {len(cut)} points (mean δ_W4A4 {float(plain[cut.index].mean()):.2e})",
        ci=f"[{mean - half:.2e}, {mean + half:.2e}] ({noise})",
        verdict="reproduced" if mean - half > 0 else ("not reproduced" if mean + half < 0 else INCONCLUSIVE),
    )


def _kurtosis_claim(activations: pd.DataFrame | None) -> dict:
    text = "The FC2 input has by far the largest kurtosis of the Linear inputs (Fig. 9)"
    if activations is None or activations.empty:
        return claim(STUDY, text, statistic="no activation statistics", ci="", verdict=INCONCLUSIVE)
    full = activations[(activations["precision"] == FULL) & main_grid(activations)]
    per_role = full.groupby("role")["kurtosis"].median()
    others = per_role.drop("fc2").max()
    wins = full.pivot_table(index=["run", "block"], columns="role", values="kurtosis")
    share = float((wins["fc2"] > wins.drop(columns="fc2").max(axis=1)).mean())
    return claim(
        STUDY,
        text,
        statistic=f"median kurtosis fc2 {per_role['fc2']:.1f} vs next {others:.1f} "
        f"({per_role.drop('fc2').idxmax()}); fc2 largest in {share:.0%} of blocks",
        ci="share of full-precision blocks where fc2's is the largest",
        verdict="reproduced" if share > 0.5 and per_role["fc2"] > others else "not reproduced",
    )


def _decomposition_claim(frame: pd.DataFrame, settings: dict) -> dict:
    text = "W4A4 error ≈ c · (weight-only + activation-only error), c near 0.906 (Fig. 6)"
    if len(frame) < 3:
        return claim(STUDY, text, statistic=f"{len(frame)} shared points", ci="", verdict=INCONCLUSIVE)
    c, low, high = decomposition_slope(frame, settings["bootstrap"])
    return claim(
        STUDY,
        text,
        statistic=f"c = {c:.3f} ({len(frame)} points)",
        ci=f"[{low:.3f}, {high:.3f}]",
        verdict="reproduced" if low > 0 else INCONCLUSIVE,
        paper=law.DECOMPOSITION_SLOPE,
        magnitude=magnitude_from_interval(low, high, law.DECOMPOSITION_SLOPE),
    )


def _floored_by_w4a4(row: dict, table: pd.DataFrame, settings: dict, sigma: float, noise: str) -> dict:
    """c and the laws' held-out errors compare W4A4 δs of separately trained runs: with those δs themselves
    inside 2 σ_seed, either comparison is noise."""
    if row["verdict"] == INCONCLUSIVE:
        return row
    typical = float(grid_rows(table, settings, "W4A4")["delta"].abs().mean())
    return _floored(row, typical, sigma, noise, what="mean |δ_W4A4|")


def _ratio_claim(table: pd.DataFrame, settings: dict, sigma: float, noise: str) -> dict:
    """R's trend over the points whose two δs both clear 2 σ_seed: a ratio of δs inside the seed noise is noise."""
    text = "R = δ_W16A4 / δ_W4A16 falls as D/N grows (Fig. 8)"
    ratios = activation_weight_ratio(table, settings)
    plain = ratios[ratios["variant"] == "plain"]
    if not math.isfinite(sigma):
        return claim(STUDY, text, statistic="no σ_seed", ci="", verdict=INCONCLUSIVE)
    clear = plain[plain["clear_of_seed_noise"]]
    if len(clear) < 3 or clear["tokens_per_param"].nunique() < 2:
        statistic = f"{len(clear)} of {len(plain)} points have both δs above 2 σ_seed (3 at 2 D/N needed)"
        return claim(STUDY, text, statistic=statistic, ci=noise, verdict=INCONCLUSIVE)
    slope, low, high = ratio_trend(clear, settings["bootstrap"])
    return claim(
        STUDY,
        text,
        statistic=f"slope of log R on log(D/N) = {slope:.3f} over {len(clear)} of {len(plain)} points "
        f"(R {clear['R'].min():.2f}–{clear['R'].max():.2f})",
        ci=f"[{low:.3f}, {high:.3f}] ({noise})",
        verdict="reproduced" if high < 0 else ("not reproduced" if low > 0 else INCONCLUSIVE),
        paper=round(law.RATIO_SLOPE, 4),
        magnitude=magnitude_from_interval(low, high, law.RATIO_SLOPE),
    )


def _d_term_claim(fits: dict) -> dict:
    text = "The law with the D term predicts held-out sizes better than without it (Table 4)"
    with_d, without = fits.get("qat"), fits.get("qat_no_D")
    if with_d is None or without is None or None in (with_d.heldout_relative_error, without.heldout_relative_error):
        return claim(STUDY, text, statistic="no held-out errors for both laws", ci="", verdict=INCONCLUSIVE)
    better = with_d.heldout_relative_error < without.heldout_relative_error
    return claim(
        STUDY,
        text,
        statistic=f"held-out relative error {with_d.heldout_relative_error:.1%} with D, "
        f"{without.heldout_relative_error:.1%} without (paper W4A4: 4.7 % vs 8.6 %)",
        ci="",
        verdict="reproduced" if better else "not reproduced",
    )
