"""Kumar et al. 2024, "Scaling Laws for Precision", training-precision part: loss of INT-quantized training.

Grid (`cells`): each cell trains every listed precision × size at every budget, from scratch. A precision names
the tensors it quantizes and their bits, e.g. `W4` (weights only), `A8` (activations only), `KV4` (KV cache only)
or `W4A8KV8` (joint); a tensor it does not name stays in fp32. As in the paper, quantization is integer fake-quant
of the forward pass with a straight-through estimator, symmetric absmax: weights per output channel, activations
and the k/v projection outputs per tensor. Every point is a WSD cooldown branch of its (size, precision) trunk and
has a full-precision (fp32, the paper's BF16 baseline) partner at the same (size, budget, seed): the ladder's own
run. `seeds` repeats one point with more seeds, whose spread σ_seed of δ is the noise floor of any comparison
between separately trained runs.

PTQ after training (`ptq`, Fig. 7): each weight-only point and every full-precision partner is also post-quantized
(GPTQ, RTN; INT per output channel) to each P_post ≤ its P_w, and scored against itself as trained on the same
windows: the `kumar2024_training_ptq` table.

Fits: the N_eff law on each marginal sweep (one tensor quantized, with every partner) and on every point; the
compute-optimal precision P* of the joint fit, with its bootstrap distribution from refits on resampled runs; the
unified law (Eq. 7) per PTQ method on the PTQ-after-training grid. In the laws a full-precision tensor enters at
FULL_BITS (fp32): f_x(32) ≈ 1 for any sensible γ_x, n_x; a checkpoint scored as trained has P_post = inf.
"""

import itertools
import math
import re

import numpy as np
import pandas as pd

from qscaling.config import ConfigError, check_sizes, check_weight_spec
from qscaling.laws import LAWS
from qscaling.laws import kumar2024 as law
from qscaling.studies import (
    Evaluation,
    Job,
    PartneredPoint,
    Quantization,
    Scoring,
    label,
    partnered_evaluations,
    partnered_table,
    recipe_seed,
    trained,
    try_fit,
    with_labels,
)
from qscaling.studies.claims import (
    INCONCLUSIVE,
    claim,
    floored_by_seed_noise,
    magnitude_from_interval,
    verdict_from_interval,
)

STUDY = "kumar2024_training"
FULL = "fp32"  # the precision label of every full-precision partner
FULL_BITS = 32.0  # P_x of a tensor trained in fp32, as the N_eff law reads it
LAW = "kumar2024.neff"
# A label: terms W, A, KV (in that order), each INT bits ("4") or an FP format ("E3M2"); a one-term label may end in
# "/tensor" or "/channel", a granularity other than the paper's (the Fig. 13 ablation).
PRECISION_PATTERN = re.compile(r"(?:W(\d+|E\dM\d))?(?:A(\d+|E\dM\d))?(?:KV(\d+|E\dM\d))?(?:/(tensor|channel))?")
FP_FORMAT = re.compile(r"E(\d)M(\d)")
# Per tensor: its training-precision field and its scaling granularity (Kumar et al.'s setup: weights per channel,
# activations and KV cache per tensor).
TENSOR_SPECS = {"w": ("weights", "channel"), "a": ("activations", "tensor"), "kv": ("kv", "tensor")}
JOINT = "joint"  # the `varied` value of a point that quantizes more than one tensor
MAIN_SWEEPS = ("", "w", "a", "kv", JOINT)  # the paper's setup (INT at its granularities): what the main fits read
LABELS = ["precision", "P_w", "P_a", "P_kv"]
DIVERGED_RULE = (
    "a point whose run diverged keeps its row with diverged = True and no loss (a partner that diverged leaves δ "
    "empty); fits, figures and claims read only the rows that trained"
)
# "Saturated by 8 bits": less than this share of the effective parameters is lost at P_w = 8. Table 2's constants
# lose 6.8 %; at 6 bits they lose 14 %, so the paper's "6–8 bits" is read at its upper end.
SATURATION_LOSS = 0.1
SATURATION_BITS = 8
MOST_BITS = law.SOLVER_CEILING  # the top of the range the P* solvers search
PAPER_OPTIMAL_RANGE = (7.0, 8.0)  # "7–8 bits" (Sec. 4.3.1); Table 2's constants give P* = 7.00
PAPER = LAWS[LAW].paper_params["table2"]
UNIFIED_LAW = "kumar2024.unified"
UNIFIED_PAPER = LAWS[UNIFIED_LAW].paper_params["table2_assumed_C"]
AS_TRAINED = "none"  # the method of a PTQ-table row scoring its checkpoint as trained (P_post = inf)


def precision_terms(name: str) -> dict[str, tuple[str, str]]:
    """Each tensor a precision label quantizes → (its format, its granularity): "W4A8" → {"w": ("int4", "channel"),
    "a": ("int8", "tensor")}, "WE3M2" → {"w": ("fp:e3m2", "channel")}, "W4/tensor" → {"w": ("int4", "tensor")}."""
    match = PRECISION_PATTERN.fullmatch(name) if isinstance(name, str) else None
    if match is None or not any(match.groups()[:3]):
        raise ValueError(
            f"precision {name!r} is not W<bits>, A<bits>, KV<bits> or a combination (e.g. W4A8KV8), each term INT "
            "bits or an FP format E<e>M<m>, one term optionally /tensor or /channel"
        )
    *formats, granularity = match.groups()
    named = {tensor: value for tensor, value in zip(TENSOR_SPECS, formats) if value is not None}
    if granularity and len(named) > 1:
        raise ValueError(f"precision {name!r}: a /{granularity} granularity names one tensor only")
    terms = {}
    for tensor, value in named.items():
        fp = FP_FORMAT.fullmatch(value)
        kind = f"fp:e{fp[1]}m{fp[2]}" if fp else f"int{value}"
        terms[tensor] = (kind, granularity or TENSOR_SPECS[tensor][1])
    if len(terms) > 1 and any(kind.startswith("fp") for kind, _ in terms.values()):
        raise ValueError(f"precision {name!r}: a joint precision is INT in every tensor")
    return terms


def precision_bits(name: str) -> dict[str, int]:
    """The bits of each tensor a precision label quantizes (an FP format: 1 + exponent + mantissa bits): "W4A8" →
    {"w": 4, "a": 8}, "WE3M2" → {"w": 6}."""
    bits = {}
    for tensor, (kind, _) in precision_terms(name).items():
        fp = re.fullmatch(r"fp:e(\d)m(\d)", kind)
        bits[tensor] = 1 + int(fp[1]) + int(fp[2]) if fp else int(kind.removeprefix("int"))
    return bits


def training_precision(name: str) -> dict:
    """The training precision of a label: each tensor it names in its format at its granularity (symmetric INT or
    FP, absmax-scaled)."""
    return {
        TENSOR_SPECS[tensor][0]: f"{kind}:{granularity}"
        for tensor, (kind, granularity) in precision_terms(name).items()
    }


def law_precisions(name: str) -> dict[str, float]:
    """P_w, P_a, P_kv of a precision label (FULL_BITS for a tensor it leaves in fp32)."""
    bits = {} if name == FULL else precision_bits(name)
    return {f"P_{tensor}": float(bits.get(tensor, FULL_BITS)) for tensor in TENSOR_SPECS}


def varied_tensor(name: str) -> str:
    """Which sweep a precision belongs to: the one tensor it quantizes (w, a, kv), JOINT for several, "" for fp32;
    an ablation's sweep adds what it changes: "w_fp" (FP weights), "w_tensor" (INT weights per tensor)."""
    if name == FULL:
        return ""
    terms = precision_terms(name)
    if len(terms) > 1:
        return JOINT
    ((tensor, (kind, granularity)),) = terms.items()
    suffix = "_fp" if kind.startswith("fp") else ""
    return tensor + suffix + ("" if granularity == TENSOR_SPECS[tensor][1] else f"_{granularity}")


def check_config(config: dict) -> None:
    block, key = config["studies"][STUDY], f"studies.{STUDY}"
    for index, cell in enumerate(block["cells"]):
        where = f"{key}.cells.{index}"
        check_sizes(config, f"{where}.sizes", cell["sizes"])
        for position, name in enumerate(cell["precisions"]):
            _check_precision(f"{where}.precisions.{position}", name)
        if not set(cell.get("budgets", [])) <= set(block["budgets"]):
            raise ConfigError(f"config key {where}.budgets: not all of them are in {key}.budgets")
    seeds = block["seeds"]
    check_sizes(config, f"{key}.seeds.size", seeds["size"])
    _check_precision(f"{key}.seeds.precision", seeds["precision"])
    if config["training"]["seed"] in seeds["extra"]:
        raise ConfigError(f"config key {key}.seeds.extra: repeats the recipe's seed {config['training']['seed']}")
    ptq = block["ptq"]
    for method, bits in itertools.product(ptq["methods"], ptq["bits"]):
        check_weight_spec(f"{key}.ptq.weight_format", method, ptq["weight_format"], bits=bits)


def _check_precision(key: str, name) -> None:
    from qscaling.quant import parse_spec

    try:
        for spec in training_precision(name).values():
            parse_spec(spec)
    except ValueError as error:
        raise ConfigError(f"config key {key}: {error}") from None


def points(config: dict) -> list[dict]:
    """Every quantized point, once: {size, budget, precision, seed}."""
    block, seed = config["studies"][STUDY], config["training"]["seed"]
    grid = [
        {"size": size, "budget": budget, "precision": name, "seed": seed}
        for cell in block["cells"]
        for name, size in itertools.product(cell["precisions"], cell["sizes"])
        for budget in cell.get("budgets", block["budgets"])
    ]
    repeats = block["seeds"]
    grid += [
        {"size": repeats["size"], "budget": repeats["budget"], "precision": repeats["precision"], "seed": run_seed}
        for run_seed in [seed, *repeats["extra"]]
    ]
    unique = {tuple(p.values()): p for p in grid}
    return list(unique.values())


def plan(config: dict, planner) -> list[Evaluation]:
    """Each quantized point and its full-precision partner (one evaluation per checkpoint, every label it carries)."""
    full = label(precision=FULL, **law_precisions(FULL))
    return partnered_evaluations(
        STUDY,
        config["studies"][STUDY],
        planner,
        [
            PartneredPoint(
                p["size"],
                p["budget"],
                training_precision(p["precision"]),
                label(precision=p["precision"], **law_precisions(p["precision"]), seed=p["seed"]),
                full + label(seed=p["seed"]),
                {"seed": p["seed"]},
            )
            for p in points(config)
        ],
    )


def post_training_bits(settings: dict, precision: str) -> list[int]:
    """The P_post a checkpoint trained at `precision` is post-quantized to: every configured bit width for fp32,
    those ≤ P_w for a weight-only point (a lower P_post than P_w is what Fig. 7 asks about; an equal one tells how
    much PTQ adds to the training-time quantizer), none for a point that quantizes activations or the KV cache."""
    bits = sorted(settings["ptq"]["bits"])
    if precision == FULL:
        return bits
    if varied_tensor(precision) != "w":
        return []
    return [value for value in bits if value <= precision_bits(precision)["w"]]


def scoring(config: dict, layout) -> Scoring:
    block = config["studies"][STUDY]
    inputs = {"val": layout.data("val.bin"), "calibration": layout.data("train.bin")}
    params = {
        "eval_tokens": block["eval_tokens"],
        "batch_size": config["evaluation"]["batch_size"],
        "ptq": block["ptq"],
        "gptq_damp": config["ptq"]["gptq_damp"],
    }
    return Scoring(
        f"{__name__}:score_job", inputs, params, outputs=("ptq",), message="Scoring as trained and post-quantized"
    )


def score_job(checkpoint, inputs: dict, params: dict, labels: list[dict], device: str) -> dict:
    """One checkpoint evaluated as trained on every held-out window (the rows δ is paired over) and, where
    `post_training_bits` names any, post-quantized by each method at each of them (the `ptq` rows)."""
    from qscaling.data import load_tokens
    from qscaling.studies import score_as_trained
    from qscaling.studies.ptq import score_checkpoint

    scored = score_as_trained(checkpoint, inputs, params, labels, device)
    ptq = params["ptq"]
    # A checkpoint's labels share its precision; the seed is all that tells them apart.
    bits = post_training_bits({"ptq": ptq}, labels[0]["precision"]) if labels else []
    if not bits:
        scored["ptq"] = pd.DataFrame()
        return scored
    quantizations = [
        Quantization(method, ptq["weight_format"].format(bits=value)) for method in ptq["methods"] for value in bits
    ]
    rows = score_checkpoint(
        checkpoint,
        quantizations,
        {"val": load_tokens(inputs["val"])},
        load_tokens(inputs["calibration"]),
        calibration=ptq["calibration"],
        eval_tokens=params["eval_tokens"],
        batch_size=params["batch_size"],
        gptq_damp=params["gptq_damp"],
        device=device,
    )
    rows["P_post"] = np.where(rows["method"] == AS_TRAINED, np.inf, rows["bits"]).astype(float)
    scored["ptq"] = with_labels(rows.drop(columns=["split", "bits"]), labels)
    return scored


def jobs(config: dict, evaluations: list[Evaluation], layout) -> list[Job]:
    """`kumar2024_training_ptq`: every checkpoint's PTQ rows in one table (Fig. 7, the unified law)."""
    return [
        Job(
            "ptq",
            f"{__name__}:collect_ptq_job",
            {"scored": [layout.scored(STUDY, "ptq", e.run, e.tokens) for e in evaluations]},
            {"ptq": layout.table(STUDY, "ptq")},
            message="Collecting the PTQ-after-training rows",
        )
    ]


def collect_ptq_job(inputs: dict, outputs: dict, params: dict) -> None:
    from qscaling.atomic import write_table

    frames = [frame for path in inputs["scored"] if not (frame := pd.read_parquet(path)).empty]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*LABELS, "method", "P_post"])
    write_table(ptq_table(table), outputs["ptq"])


def ptq_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The PTQ rows, sorted, with `P_train` (the weights' training bits, FULL_BITS for fp32): one row per
    (checkpoint, label, method, P_post), its as-trained row (`AS_TRAINED`, P_post = inf) included."""
    table = rows.assign(P_train=rows["P_w"])
    order = ["method", "P_train", "P_post", "N", "D", "seed"]
    return table.sort_values(order).reset_index(drop=True)


def build_table(rows: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """One row per checkpoint and precision (`partnered_table`): its loss and, for a quantized point, δ against its
    full-precision partner; `varied` the sweep the point belongs to (w, a, kv, joint; "" for a partner). Diverged
    runs keep a row (DIVERGED_RULE)."""
    table = partnered_table(rows, STUDY, ["precision"], LABELS, "precision", FULL)
    table["varied"] = table["precision"].map(varied_tensor)
    table["tokens_per_param"] = table["D"] / table["N"]
    return table.sort_values(["varied", "precision", "N", "D", "seed"]).reset_index(drop=True)


def recipe_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Every point that trained at the recipe's seed (seed repeats would weigh their point thrice), the
    ablations' (FP weights, other granularities) included."""
    rows = trained(table)
    return rows[rows["seed"] == recipe_seed(table)]


def law_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The points the main laws describe: `recipe_rows` of the paper's INT setup (MAIN_SWEEPS)."""
    rows = recipe_rows(table)
    return rows[rows["varied"].isin(MAIN_SWEEPS)]


def sweep_rows(rows: pd.DataFrame, varied: str) -> pd.DataFrame:
    """One sweep's quantized points (`varied`: w, a, kv or joint) and every full-precision partner, which pin the
    law's size and data terms."""
    return rows[rows["varied"].isin([varied, ""])]


# name: the sweep it is fitted on (None: every point of the main grid). neff_w_fp: Fig. 16's FP weight fit.
FITS = {"neff_w": "w", "neff_a": "a", "neff_kv": "kv", "neff_joint": None, "neff_w_fp": "w_fp"}


FIT_INPUTS = ("ptq",)  # the fits read the PTQ-after-training table besides the study's own


def fit_names(settings: dict) -> list[str]:
    return [*FITS, *(f"unified_{method}" for method in settings["ptq"]["methods"])]


def fit_laws(table: pd.DataFrame, settings: dict, ptq: pd.DataFrame | None = None) -> dict:
    """The N_eff law on each marginal sweep and on every point, and the unified law per PTQ method on the PTQ
    table, with CIs from resampling runs and the error on each left-out size."""
    rows = recipe_rows(table)
    options = {"bootstrap": settings["bootstrap"], "group_col": "N", "run_col": "run", "seed": 0}
    fits = {name: _fit_sweep(rows, varied, **options) for name, varied in FITS.items()}
    for method in settings["ptq"]["methods"]:
        fits[f"unified_{method}"] = fit_unified(unified_rows(ptq, method), **options)
    return fits


def unified_rows(ptq: pd.DataFrame | None, method: str) -> pd.DataFrame:
    """What the unified law is fitted on for one PTQ method: every checkpoint of the PTQ table at the recipe seed,
    as trained (P_post = inf) and post-quantized by `method`."""
    if ptq is None or ptq.empty:
        return pd.DataFrame(columns=[*LAWS[UNIFIED_LAW].inputs, "loss", "run", "method"])
    rows = ptq[ptq["method"].isin([method, AS_TRAINED])]
    return rows[rows["seed"] == recipe_seed(ptq)].reset_index(drop=True)


def fit_unified(rows: pd.DataFrame, **options):
    """The unified law on one method's rows, or why it cannot be fitted. A tensor the rows never quantize (P_x one
    value throughout) keeps Table 2's γ_x, n_x and the assumed C_x = 1: its factors are then constants."""
    from qscaling.laws.table import constant_inputs, unidentifiable

    unified = LAWS[UNIFIED_LAW]
    if not (rows["P_post"] < np.inf).any():
        return f"{UNIFIED_LAW}: no post-quantized checkpoint"
    constant = constant_inputs(unified, rows)
    held = set(unidentifiable(unified, constant)) | {f"C_{t}" for t in TENSOR_SPECS if f"P_{t}" in constant}
    fixed = {param: UNIFIED_PAPER[param] for param in sorted(held)}
    free = len(unified.params) - len(fixed)
    if len(rows) <= free:
        return f"{UNIFIED_LAW}: {len(rows)} points for {free} free parameters (an exact fit; need more)"
    return try_fit(UNIFIED_LAW, rows, fixed=fixed or None, **options)


def _fit_sweep(rows: pd.DataFrame, varied: str | None, **options):
    """The N_eff law on one sweep (`varied` None: every row), or why it cannot be fitted. γ_x and n_x of a tensor
    the rows never quantize are held at Table 2's values (the fit's notes say so): f_x(FULL_BITS) is then a
    constant factor the law's A absorbs."""
    from qscaling.laws.table import constant_inputs, unidentifiable

    selected = rows[rows["varied"].isin(MAIN_SWEEPS)] if varied is None else sweep_rows(rows, varied)
    if not (selected["varied"] != "").any():
        return f"{LAW}: no trained point quantizes {'any tensor' if varied is None else f'{varied} alone'}"
    fixed = {param: PAPER[param] for param in unidentifiable(LAWS[LAW], constant_inputs(LAWS[LAW], selected))}
    free = len(LAWS[LAW].params) - len(fixed)
    if len(selected) <= free:
        # As many points as free parameters fit exactly, whatever the law: such a fit says nothing.
        return f"{LAW}: {len(selected)} points for {free} free parameters (an exact fit; need more)"
    return try_fit(LAW, selected, fixed=fixed or None, **options)


FIT_TABLES = ("optimal_precision", "forms")


def fit_tables(table: pd.DataFrame, settings: dict, ptq: pd.DataFrame | None = None) -> dict:
    return {"optimal_precision": optimal_precision_draws(table, settings["bootstrap"]), "forms": form_comparison(table)}


FORM_COLUMNS = ["form", "law", "paper_heldout_r2", "heldout_r2", "heldout_r2_delta", "r2", "points", "folds", "at_bound",
                "error"]  # fmt: skip


def form_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Table 1: each functional form of weight training precision fitted on the weight sweep and its partners, and
    its held-out R²: every (N, D) cell left out in turn, its points predicted by the form refitted on the others
    (started from the full fit), R² of those predictions pooled; `heldout_r2_delta` the same for the precision
    effect alone, δ = loss − the partner's loss, predicted as the form at P_w less the form at FULL_BITS (the size
    and data terms, which every form shares, dominate the loss's own spread). A form that cannot be fitted keeps
    its row, with the reason in `error`."""
    rows = sweep_rows(law_rows(table), "w").reset_index(drop=True)
    cells = sorted(set(zip(rows["N"], rows["D"])))
    forms = {"neff": LAWS[LAW], **law.FORMS}
    out = []
    for name, form in forms.items():
        record = {"form": name, "law": form.name, "paper_heldout_r2": law.PAPER_FORM_R2[name], "points": len(rows),
                  "folds": len(cells), "heldout_r2": math.nan, "r2": math.nan, "at_bound": "", "error": ""}  # fmt: skip
        # The N_eff law's γ_x, n_x of the activations and KV cache stay Table 2's: this sweep never quantizes them.
        fixed = {param: PAPER[param] for param in PAPER if param.endswith(("_a", "_kv"))} if form is LAWS[LAW] else None
        full = try_fit(form.name, rows, fixed=fixed, bootstrap=0, group_col=None) if len(cells) >= 2 else "one cell"
        if isinstance(full, str):
            out.append({**record, "error": full})
            continue
        predicted, predicted_delta = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
        for cell in cells:
            held_out = (rows["N"] == cell[0]).to_numpy() & (rows["D"] == cell[1]).to_numpy()
            refit = try_fit(form.name, rows[~held_out], fixed=fixed, starts=[full.params], bootstrap=0, group_col=None)
            if not isinstance(refit, str):
                predicted[held_out] = refit.predict(rows[held_out])
                predicted_delta[held_out] = predicted[held_out] - refit.predict(rows[held_out].assign(P_w=FULL_BITS))
        quantized = (rows["varied"] != "").to_numpy()
        bound = [param for param in form.param_names if not full.held_fixed(param) and full.at_bound(param)]
        out.append({**record, "heldout_r2": _r_squared(rows["loss"], predicted), "r2": full.r2,
                    "heldout_r2_delta": _r_squared(rows["delta"][quantized], predicted_delta[quantized]),
                    "at_bound": ", ".join(bound)})  # fmt: skip
    return pd.DataFrame(out, columns=FORM_COLUMNS)


def _r_squared(measured, predicted) -> float:
    """1 − SSE/SST over the rows with a prediction (NaN where they do not vary)."""
    measured, predicted = np.asarray(measured, float), np.asarray(predicted, float)
    scored = np.isfinite(predicted) & np.isfinite(measured)
    spread = np.sum((measured[scored] - measured[scored].mean()) ** 2)
    return float(1 - np.sum((measured[scored] - predicted[scored]) ** 2) / spread) if spread > 0 else math.nan


def optimal_precision(params: dict, offsets: bool = True) -> float:
    """Compute-optimal precision P* (Sec. 4.3.1), NaN where the law's N_eff has no optimum below MOST_BITS."""
    return law.optimum_or_nan(law.compute_optimal_precision, params, offsets=offsets)


def optimal_precision_draws(table: pd.DataFrame, draws: int, seed: int = 0) -> pd.DataFrame:
    """P* with and without the offsets n_x of the joint fit refitted on each of `draws` resamples of its runs,
    started from the joint fit's optimum: P*'s bootstrap distribution (a Fit keeps per-parameter CIs only). A
    resample that cannot be fitted, or whose law has no P*, gives NaN. Empty without a joint fit. Each row carries
    the joint fit's `ill_conditioned`: refits started from an optimum the data do not pin down land anywhere along
    the directions they leave free."""
    columns = ["draw", "P_star", "P_star_no_offsets", "ill_conditioned"]
    rows = law_rows(table)
    joint = _fit_sweep(rows, None, bootstrap=0, group_col=None, seed=seed)
    if isinstance(joint, str):
        return pd.DataFrame(columns=columns)
    fixed = {name: joint.params[name] for name in joint.law.param_names if joint.held_fixed(name)}
    rng = np.random.default_rng(seed)
    out = []
    for draw in range(draws):
        sample = rows.iloc[rng.integers(0, len(rows), len(rows))]
        refit = try_fit(LAW, sample, starts=[joint.params], bootstrap=0, group_col=None, fixed=fixed or None)
        values = (math.nan, math.nan) if isinstance(refit, str) else (
            optimal_precision(refit.params), optimal_precision(refit.params, offsets=False)
        )  # fmt: skip
        out.append(dict(zip(columns, (draw, *values, joint.ill_conditioned))))
    return pd.DataFrame(out, columns=columns)


def seed_points(table: pd.DataFrame) -> pd.DataFrame:
    """Every seed of the repeated point (the one the recipe-seed-less points share), quantized, trained."""
    rows = trained(table)
    rows = rows[rows["precision"] != FULL]
    repeats = rows[rows["seed"] != recipe_seed(table)]
    if repeats.empty:
        return repeats
    point = repeats.iloc[0]
    return rows[(rows[["size", "budget", "precision"]] == point[["size", "budget", "precision"]]).all(axis=1)]


def seed_sigma(table: pd.DataFrame) -> float:
    """σ_seed: the spread (sample SD) over seeds of δ at the repeated point. A point and its partner share their
    seed (initialisation and data order), so a seed moves both losses together; what it moves apart — the noise
    floor of a difference between two points' losses or δs — is δ."""
    deltas = seed_points(table)["delta"]
    return float(deltas.std(ddof=1)) if len(deltas) >= 2 else math.nan


def precision_cost(fit, rows: pd.DataFrame) -> float:
    """The largest loss the fitted law puts on quantization over the quantized points of `rows` (nats): each point's
    prediction less its prediction with every tensor at FULL_BITS."""
    points = rows[rows["varied"] != ""]
    if points.empty:
        return math.nan
    full = points.assign(**{f"P_{tensor}": FULL_BITS for tensor in TENSOR_SPECS})
    return float(np.max(fit.predict(points) - fit.predict(full)))


def _pinned(fit, *names) -> list[str]:
    return [
        f"{name} {'held at the paper value' if fit.held_fixed(name) else 'at its bound'}"
        for name in names
        if fit.held_fixed(name) or fit.at_bound(name)
    ]


def claims(tables: dict, fits: dict, settings: dict) -> list[dict]:
    table = tables["table"]
    sigma = seed_sigma(table)
    noise = f"σ_seed = {sigma:.2g} over {len(seed_points(table))} seeds"
    rows = law_rows(table)
    return [
        *(_ordering_claim(fits, rows, tensor, sigma, noise) for tensor in ("a", "kv")),
        _saturation_claim(fits.get("neff_w"), rows, sigma, noise),
        _optimal_precision_claim(fits.get("neff_joint"), tables.get("optimal_precision"), rows, sigma, noise),
        *(_robustness_claim(tables.get("ptq"), method) for method in settings["ptq"]["methods"]),
    ]


def robustness_gaps(ptq: pd.DataFrame, method: str) -> pd.DataFrame:
    """Per weight-only point and P_post below its P_w: δ_PTQ of its fp32 partner less its own at the same P_post
    (`gap`, positive where the low-precision-trained model degrades less), by (size, D, seed, P_train, P_post)."""
    columns = ["size", "N", "D", "seed", "P_train", "P_post", "gap"]
    rows = ptq[ptq["method"] == method] if ptq is not None and not ptq.empty else pd.DataFrame(columns=columns)
    if rows.empty:
        return pd.DataFrame(columns=columns)
    keys = ["size", "N", "D", "seed", "P_post"]
    partner = rows[rows["precision"] == FULL].set_index(keys)["delta"].rename("partner_delta")
    points = rows[(rows["precision"] != FULL) & (rows["P_post"] < rows["P_train"])]
    joined = points.join(partner, on=keys, how="inner")
    return joined.assign(gap=joined["partner_delta"] - joined["delta"])[columns].reset_index(drop=True)


def _robustness_claim(ptq: pd.DataFrame | None, method: str) -> dict:
    """The mean over points and P_post < P_w of δ_PTQ(fp32 partner) − δ_PTQ(point), its CI from the spread over
    (size, D) cells; held to the seed floor of the gap itself: its spread over the repeated point's seeds."""
    text = f"Models trained at lower weight precision degrade less under later PTQ ({method.upper()}; Sec. 5, Fig. 7)"
    gaps = robustness_gaps(ptq, method)
    if gaps.empty:
        return claim(STUDY, text, statistic="no weight-only point post-quantized below its P_w", ci="",
                     verdict=INCONCLUSIVE)  # fmt: skip
    recipe = gaps[gaps["seed"] == recipe_seed(gaps)]
    per_cell = recipe.groupby(["N", "D"])["gap"].mean()
    mean = float(recipe["gap"].mean())
    if len(per_cell) >= 2:
        half = 1.96 * float(per_cell.std(ddof=1)) / math.sqrt(len(per_cell))
        low, high = mean - half, mean + half
        ci = f"[{low:.3g}, {high:.3g}] (over {len(per_cell)} (N, D) cells)"
    else:
        low, high, ci = -math.inf, math.inf, "one (N, D) cell: no CI"
    repeated = gaps.groupby(["size", "D", "P_train", "P_post"]).filter(lambda group: group["seed"].nunique() >= 2)
    spreads = repeated.groupby(["size", "D", "P_train", "P_post"])["gap"].var(ddof=1)
    sigma = float(np.sqrt(spreads.mean())) if len(spreads) else math.nan
    row = claim(
        STUDY,
        text,
        statistic=f"mean δ_PTQ(fp32) − δ_PTQ(P_w) = {mean:.3g} nats over {len(recipe)} (point, P_post) pairs",
        ci=ci,
        verdict=verdict_from_interval(low, high, "positive"),
    )
    noise = f"σ_seed of the gap = {sigma:.2g} over {repeated['seed'].nunique()} seeds at {len(spreads)} (P_w, P_post)"
    return floored_by_seed_noise(row, abs(mean), sigma, noise, "|mean gap| (nats)")


def _ordering_claim(fits: dict, rows: pd.DataFrame, tensor: str, sigma: float, noise: str) -> dict:
    """γ_w − γ_x from the two marginal fits, its CI the difference of the two CIs' far ends. γ alone does not
    rank sensitivities where the offsets n_x differ, so the statistic also gives N_eff/N of each at 4 bits."""
    name = {"a": "activations", "kv": "the KV cache"}[tensor]
    text = f"Training precision of {name} has a smaller γ than that of weights (γ_{tensor} < γ_w, Table 2)"
    paper = round(PAPER["gamma_w"] - PAPER[f"gamma_{tensor}"], 4)
    weights, other = fits.get("neff_w"), fits.get(f"neff_{tensor}")
    if weights is None or other is None:
        return claim(STUDY, text, statistic=f"no neff_w or neff_{tensor} fit", ci="", verdict=INCONCLUSIVE,
                     paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    gamma_w, gamma_x = weights.params["gamma_w"], other.params[f"gamma_{tensor}"]
    fractions = (
        f"N_eff/N at 4 bits: w {float(law.precision_fraction(weights.params, 4, 'w')):.3f}, "
        f"{tensor} {float(law.precision_fraction(other.params, 4, tensor)):.3f}"
    )
    values = f"γ_w {gamma_w:.3g}, γ_{tensor} {gamma_x:.3g}; {fractions}"
    pinned = _pinned(weights, "gamma_w", "n_w") + _pinned(other, f"gamma_{tensor}", f"n_{tensor}")
    if pinned:
        return claim(STUDY, text, statistic=f"{values}: {'; '.join(pinned)}", ci="", verdict=INCONCLUSIVE,
                     paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    low = weights.ci["gamma_w"][0] - other.ci[f"gamma_{tensor}"][1]
    high = weights.ci["gamma_w"][1] - other.ci[f"gamma_{tensor}"][0]
    row = claim(
        STUDY,
        text,
        statistic=f"γ_w − γ_{tensor} = {gamma_w - gamma_x:.3g} ({values})",
        ci=f"[{low:.3g}, {high:.3g}] (difference of the two bootstrap CIs' ends)",
        verdict=verdict_from_interval(low, high, "positive"),
        paper=paper,
        magnitude=magnitude_from_interval(low, high, paper),
    )
    # Each γ is read off its own sweep: the smaller of the two fitted precision costs bounds what either shows.
    effect = min(precision_cost(weights, sweep_rows(rows, "w")), precision_cost(other, sweep_rows(rows, tensor)))
    return floored_by_seed_noise(row, effect, sigma, noise, "smaller sweep's fitted precision cost (nats)")


def lost_share(params: dict, bits: float) -> float:
    """1 − f_w(P) = e^(−P/γ_w + n_w), at most 1 (no effective parameters left): the share of effective parameters
    a P-bit weight precision loses."""
    return min(1.0, math.exp(-bits / params["gamma_w"] + params["n_w"]))


def _saturation_claim(fit, rows: pd.DataFrame, sigma: float, noise: str) -> dict:
    """The share of effective parameters lost at 8-bit weights, from the weight sweep's fit; it grows with both γ_w
    and n_w, so the corners of their CIs bound it."""
    text = (
        f"N_eff/N saturates by 6–8 bits: 8-bit weights lose under {SATURATION_LOSS:.0%} of the effective "
        "parameters (Fig. 3 left)"
    )
    paper = round(lost_share(PAPER, SATURATION_BITS), 4)
    if fit is None:
        return claim(STUDY, text, statistic="no neff_w fit", ci="", verdict=INCONCLUSIVE, paper=paper,
                     magnitude=INCONCLUSIVE)  # fmt: skip
    share = lost_share(fit.params, SATURATION_BITS)
    gamma, offset = fit.params["gamma_w"], fit.params["n_w"]
    values = f"1 − N_eff/N at P_w = {SATURATION_BITS}: {share:.3g} (γ_w {gamma:.3g}, n_w {offset:.3g})"
    pinned = _pinned(fit, "gamma_w", "n_w")
    if pinned:
        return claim(STUDY, text, statistic=f"{values}: {'; '.join(pinned)}", ci="", verdict=INCONCLUSIVE,
                     paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    (gamma_low, gamma_high), (n_low, n_high) = fit.ci["gamma_w"], fit.ci["n_w"]
    low = lost_share({"gamma_w": gamma_low, "n_w": n_low}, SATURATION_BITS)
    high = lost_share({"gamma_w": gamma_high, "n_w": n_high}, SATURATION_BITS)
    row = claim(
        STUDY,
        text,
        statistic=values,
        ci=f"[{low:.3g}, {high:.3g}] (at the corners of the bootstrap CIs of γ_w and n_w)",
        verdict=verdict_from_interval(low - SATURATION_LOSS, high - SATURATION_LOSS, "negative"),
        paper=paper,
        magnitude=magnitude_from_interval(low, high, paper),
    )
    return floored_by_seed_noise(row, precision_cost(fit, sweep_rows(rows, "w")), sigma, noise,
                                 "weight sweep's fitted precision cost (nats)")  # fmt: skip


def _optimal_precision_claim(fit, draws, rows: pd.DataFrame, sigma: float, noise: str) -> dict:
    """P* of the joint fit, its CI the percentiles of the bootstrap refits' P* (`optimal_precision_draws`):
    reproduced where the whole CI lies within 7–8 bits, not reproduced where it lies wholly outside; inconclusive
    where the joint fit is ill-conditioned."""
    low_bits, high_bits = PAPER_OPTIMAL_RANGE
    text = (
        f"Compute-optimal training precision is {low_bits:g}–{high_bits:g} bits (Sec. 4.3.1, P* with the offsets n_x)"
    )
    paper = round(optimal_precision(PAPER), 2)
    if fit is None:
        return claim(STUDY, text, statistic="no neff_joint fit", ci="", verdict=INCONCLUSIVE, paper=paper,
                     magnitude=INCONCLUSIVE)  # fmt: skip
    values = f"P* = {optimal_precision(fit.params):.3g} bits ({optimal_precision(fit.params, offsets=False):.3g} without the offsets)"
    pinned = _pinned(fit, *(f"{name}_{tensor}" for tensor in TENSOR_SPECS for name in ("gamma", "n")))
    if pinned:
        return claim(STUDY, text, statistic=f"{values}: {'; '.join(pinned)}", ci="", verdict=INCONCLUSIVE,
                     paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    solved = draws["P_star"].dropna() if draws is not None else pd.Series(dtype=float)
    if len(solved) < 2:
        return claim(STUDY, text, statistic=f"{values}; fewer than 2 bootstrap refits with a P*", ci="",
                     verdict=INCONCLUSIVE, paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    low, high = (float(value) for value in np.percentile(solved, [2.5, 97.5]))
    ci = f"[{low:.3g}, {high:.3g}] ({len(solved)} of {len(draws)} bootstrap refits of the joint fit have a P*)"
    if fit.ill_conditioned:
        # Its γ_x and n_x trade against each other along directions the data leave free: P* moves with them.
        unidentified = f"the joint fit is ill-conditioned (Jacobian condition number {fit.jacobian_condition:.2g})"
        return claim(STUDY, text, statistic=f"{values}: {unidentified}, P* is not identified", ci=ci,
                     verdict=INCONCLUSIVE, paper=paper, magnitude=INCONCLUSIVE)  # fmt: skip
    inside, outside = low >= low_bits and high <= high_bits, high < low_bits or low > high_bits
    row = claim(
        STUDY,
        text,
        statistic=values,
        ci=ci,
        verdict="reproduced" if inside else ("not reproduced" if outside else INCONCLUSIVE),
        paper=paper,
        magnitude=magnitude_from_interval(low, high, paper),
    )
    return floored_by_seed_noise(row, precision_cost(fit, rows), sigma, noise, "joint fit's precision cost (nats)")
