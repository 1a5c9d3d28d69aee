"""Ahmadian et al. 2023, "Intriguing Properties of Quantization at Scale": PTQ cliffs as a training choice.

Grid: a base recipe (the paper's: weight decay 0.1, clipping 1.0, no dropout, bf16) and one-factor ablations from
it — weight decay, dropout, gradient clipping, and bf16 vs fp16 at two weight decays — on one model size (the
paper's 6B; here the ladder's middle size), plus the final recipe and an "outlier-prone" recipe (low weight decay,
no clipping, fp16; standing in for OPT) across sizes, and the final recipe again with `seeds` more training seeds at
the ablation size. Every run is a WSD trunk of the same length (the final recipe
is the default training recipe, so the size axis reuses the shared trunks); the `tracked` factors (bf16 vs fp16)
are also scored at ~20 % and ~53 % of training, the paper's 15k/40k of 75k steps. On CPU the recipe's "bf16" is
fp32 by default (config `recipe.precision`); the bf16/fp16 comparison is its own ablation.

Each checkpoint is scored unquantized, after W8A8 vector-wise PTQ (per-token INT8 activations × per-channel INT8
weights, no calibration, no outlier decomposition) and after W4 weight-only per-channel RTN: held-out loss
(paired per window) and zero-shot-style accuracy (`qscaling.tasks`, through lm-evaluation-harness, paired per
item), plus the outlier proxies of `qscaling.outliers` on the unquantized model.

Each ablation level is a run of its own, so a difference between levels carries seed-to-seed noise as well as
evaluation noise: the spread of W8A8 loss δ over the recipe's seeds is added to every such comparison (the paper
had one seed per recipe; a difference inside that spread is inconclusive, whatever the evaluation noise).

Precision: bf16 / fp16 runs use native autocast on a GPU (fp16 with loss scaling; norms stay fp32 as the paper
needed) and, on CPU where bf16 autocast is ~8× slower, an emulation that rounds every Linear's weights and inputs
to the 16-bit format in the forward pass (`training_precision`; gradients and the optimizer stay fp32, overflow
saturates instead of producing Inf). `precision_mode` chooses; figure captions say "emulated".
"""

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from qscaling.config import ConfigError, check_sizes, check_weight_spec
from qscaling.studies import Evaluation, Job, Quantization, Scoring, label, with_labels
from qscaling.studies.claims import cannot_fail_claim, claim, verdict_from_interval
from qscaling.tasks import TASKS

STUDY = "ahmadian2023"
# The weight-decay claim reads the optimizer recipe (lr, warmup, batch) to say whether decay had steps to act.
SHARED_SETTINGS = ("training",)
FACTORS = ("weight_decay", "dropout", "grad_clip", "precision")
PRECISIONS = ("fp32", "bf16", "fp16")
# Forward-pass rounding that emulates each 16-bit format on CPU (bf16 = E8M7, fp16 = E5M10; unscaled casts,
# bit-identical to torch's .to(dtype) for finite values in range).
EMULATED_FORMATS = {"bf16": "fp:e8m7:unscaled", "fp16": "fp:e5m10:unscaled"}


@dataclass(frozen=True)
class Variant:
    """One training recipe the study scores: `factor` ("weight_decay" …, "recipe", "outlier_prone") at `level`."""

    factor: str
    level: str
    group: str  # the crossed factor's value ("wd 0.1") or ""
    size: str
    recipe: tuple  # sorted (field, value) pairs over weight_decay, grad_clip, dropout, precision
    tracked: bool  # scored at every checkpoint, not only the last
    seed: int | None = None  # a training seed other than the config's (factor "seed")

    @property
    def label(self) -> str:
        return " · ".join(part for part in (self.factor, self.level, self.group) if part)


def level_label(value) -> str:
    return "none" if value is None else value if isinstance(value, str) else f"{value:g}"


def _check_recipe_value(key: str, name: str, value) -> None:
    """weight_decay ≥ 0, grad_clip null or > 0, dropout in [0, 1), precision one of PRECISIONS."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if name not in FACTORS:
        raise ConfigError(f"config key {key}: unknown recipe field '{name}' (valid: {', '.join(FACTORS)})")
    if name == "precision" and value not in PRECISIONS:
        raise ConfigError(f"config key {key}: precision {value!r} is not one of {', '.join(PRECISIONS)}")
    if name == "weight_decay" and not (number and value >= 0):
        raise ConfigError(f"config key {key}: weight_decay {value!r} must be a number ≥ 0")
    if name == "grad_clip" and not (value is None or (number and value > 0)):
        raise ConfigError(f"config key {key}: grad_clip {value!r} must be null (no clipping) or a number > 0")
    if name == "dropout" and not (number and 0 <= value < 1):
        raise ConfigError(f"config key {key}: dropout {value!r} must be a number in [0, 1)")


def check_config(config: dict) -> None:
    """Sizes, both weight specs and every recipe value of the grid, before any job exists."""
    study, key = config["studies"][STUDY], f"studies.{STUDY}"
    if study["source"] == "train":
        check_sizes(config, f"{key}.size", study["size"])
        check_sizes(config, f"{key}.sizes", study["sizes"])
    check_weight_spec(f"{key}.w8a8_weights", "w8a8", study["w8a8_weights"])
    check_weight_spec(f"{key}.w4", "rtn", study["w4"])
    for part in ("recipe", "outlier_prone"):
        for name, value in study[part].items():
            _check_recipe_value(f"{key}.{part}.{name}", name, value)
    for factor, ablation in study["ablations"].items():
        where = f"{key}.ablations.{factor}"
        for index, value in enumerate(ablation["values"]):
            _check_recipe_value(f"{where}.values.{index}", factor, value)
        for name, value in ablation.get("with", {}).items():
            _check_recipe_value(f"{where}.with.{name}", name, value)
        for name, values in (ablation.get("across") or {}).items():
            for index, value in enumerate(values):
                _check_recipe_value(f"{where}.across.{name}.{index}", name, value)


def _variant(factor, level, group, size, recipe, tracked, seed=None) -> Variant:
    if recipe["precision"] not in PRECISIONS:
        raise ValueError(f"studies.{STUDY}: precision '{recipe['precision']}' is not one of {PRECISIONS}")
    return Variant(factor, level, group, size, tuple(sorted(recipe.items())), tracked, seed)


def variants(config: dict) -> list[Variant]:
    """Every recipe of the grid (the same recipe may appear under several factors; the planner shares its run)."""
    study = config["studies"][STUDY]
    base, size, tracked = dict(study["recipe"]), study["size"], set(study["tracked"])
    out = []
    for factor, ablation in study["ablations"].items():
        crossed = list((ablation.get("across") or {}).items())
        across_field, across_values = crossed[0] if crossed else (None, [None])
        for value, other in itertools.product(ablation["values"], across_values):
            recipe = {**base, **ablation.get("with", {}), factor: value}
            group = ""
            if across_field is not None:
                recipe[across_field] = other
                group = f"{'wd' if across_field == 'weight_decay' else across_field} {level_label(other)}"
            out.append(_variant(factor, level_label(value), group, size, recipe, factor in tracked))
    first_seed = config["training"]["seed"]
    for seed in range(first_seed + 1, first_seed + 1 + study["seeds"]):
        out.append(_variant("seed", str(seed), "", size, base, False, seed))
    for size_label in study["sizes"]:
        out.append(_variant("recipe", "final", "", size_label, base, False))
        out.append(
            _variant("outlier_prone", "outlier-prone", "", size_label, {**base, **study["outlier_prone"]}, False)
        )
    return out


def precision_mode(config: dict) -> str:
    """ "emulate" or "autocast": `auto` autocasts only where training runs on a GPU."""
    from qscaling.device import resolve_device

    mode = config["studies"][STUDY]["precision_mode"]
    if mode != "auto":
        return mode
    return "autocast" if resolve_device(config["device"]) == "cuda" else "emulate"


def run_overrides(recipe: tuple, mode: str) -> dict:
    """RunSpec fields for a recipe: the three optimizer choices plus the training precision."""
    fields = dict(recipe)
    precision = fields.pop("precision")
    if precision == "fp32":
        return fields
    if mode == "autocast":
        return {**fields, "autocast": precision}
    fmt = EMULATED_FORMATS[precision]
    return {**fields, "training_precision": {"weights": fmt, "activations": fmt}}


def checkpoint_tokens(config: dict) -> list[int]:
    study = config["studies"][STUDY]
    return sorted({int(round(fraction * study["tokens"])) for fraction in study["checkpoints"]})


def _run_of(variant: Variant, config: dict, planner) -> str:
    milestones = checkpoint_tokens(config) if variant.tracked else [config["studies"][STUDY]["tokens"]]
    seed = {} if variant.seed is None else {"seed": variant.seed}
    return planner.trunk(
        variant.size,
        upto=config["studies"][STUDY]["tokens"],
        milestones=milestones,
        **run_overrides(variant.recipe, precision_mode(config)),
        **seed,
    )


def plan(config: dict, planner) -> list[Evaluation]:
    """Trunk checkpoints of every variant, or (`source: hub`, paper scale) released OPT checkpoints; each labelled
    with every variant that trained its run (a run shared by several variants is scored once)."""
    study = config["studies"][STUDY]
    if study["source"] == "hub":
        hub = study["hub"]
        return [
            Evaluation(
                STUDY,
                planner.hub(repo, name, {hub["tokens"]: hub["revision"]}),
                hub["tokens"],
                (released_label(name),),
            )
            for name, repo in hub["models"].items()
        ]
    mode = precision_mode(config)
    labels, checkpoints = {}, {}
    for variant in variants(config):
        run = _run_of(variant, config, planner)
        labels.setdefault(run, []).append(variant_label(variant, run, mode))
        tokens = checkpoint_tokens(config) if variant.tracked else [study["tokens"]]
        checkpoints.setdefault(run, {}).update(dict.fromkeys(tokens))
    return [Evaluation(STUDY, run, tokens, tuple(labels[run])) for run in checkpoints for tokens in checkpoints[run]]


def variant_label(variant: Variant, run: str, mode: str) -> tuple:
    precision = dict(variant.recipe)["precision"]
    return label(
        run=run,
        factor=variant.factor,
        level=variant.level,
        group=variant.group,
        variant=variant.label,
        size=variant.size,
        tracked=variant.tracked,
        precision=precision,
        emulated=precision != "fp32" and mode == "emulate",
    )


def released_label(name: str) -> tuple:
    return label(
        run=f"hub-{name}",
        factor="released",
        level=name,
        group="",
        variant=f"released · {name}",
        size=name,
        tracked=False,
        precision="released",
        emulated=False,
    )


def final_tokens(config: dict) -> int:
    """Training tokens of the last checkpoint: the study's `tokens`, or the released models' pre-training tokens."""
    study = config["studies"][STUDY]
    return study["tokens"] if study["source"] == "train" else study["hub"]["tokens"]


def attach_labels(frame: pd.DataFrame, labels: list[dict], final: int) -> pd.DataFrame:
    """`frame` (one run's rows, with a `milestone` column) repeated under each variant that trained the run, with
    `final` (the last checkpoint) and `fraction` of training."""
    labelled = with_labels(frame, labels)
    return labelled.assign(final=labelled["milestone"] == final, fraction=labelled["milestone"] / final)


def scoring(config: dict, layout) -> Scoring:
    """Loss, task accuracy and outlier proxies of each checkpoint, unquantized and after W8A8 and W4."""
    study = config["studies"][STUDY]
    tasks = study["hub_tasks"] if study["source"] == "hub" else list(TASKS)
    return Scoring(
        "qscaling.studies.ahmadian2023:score_job",
        inputs={"val": layout.data("val.bin"), "tokenizer": layout.data("tokenizer.json"), "tasks": task_files()},
        params={
            "quantizations": [q.__dict__ for q in quantizations(config)],
            "final_tokens": final_tokens(config),
            "tasks": tasks,
            "eval_tokens": study["eval_tokens"],
            "proxy_windows": study["proxy_windows"],
            "batch_size": config["evaluation"]["batch_size"],
            "task_batch_size": study["tasks"]["batch_size"],
        },
        outputs=("proxies", "values"),
        message="Scoring loss, tasks and proxies, unquantized / W8A8 / W4, of",
    )


def task_files() -> list[str]:
    return [f"results/{STUDY}/tasks/{task}.{ext}" for task in TASKS for ext in ("yaml", "jsonl")]


def jobs(config: dict, evaluations: list, layout) -> list[Job]:
    """The zero-shot-style tasks built from the held-out set, and the proxy and block-value tables."""
    scored = {
        kind: [layout.scored(STUDY, kind, e.run, e.tokens) for e in evaluations] for kind in ("proxies", "values")
    }
    return [
        Job(
            "build_tasks",
            "qscaling.studies.ahmadian2023:build_tasks_job",
            inputs={
                "val": layout.data("val.bin"),
                "tokenizer": layout.data("tokenizer.json"),
                "corpus": layout.data("corpus.json"),
            },
            outputs={"tasks": task_files()},
            params={"tasks": config["studies"][STUDY]["tasks"]},
            message="Building zero-shot-style tasks from the held-out set",
        ),
        Job(
            "collect_proxies",
            "qscaling.studies.ahmadian2023:collect_proxies_job",
            inputs=scored,
            outputs={"proxies": layout.table(STUDY, "proxies"), "values": layout.table(STUDY, "values")},
            message="Collecting the proxy and weight tables",
        ),
    ]


def build_tasks_job(inputs: dict, outputs: dict, params: dict) -> None:
    import json
    from pathlib import Path

    from tokenizers import Tokenizer

    from qscaling.data import load_tokens
    from qscaling.tasks import build_tasks, held_out_documents

    tasks = params["tasks"]
    tokenizer = Tokenizer.from_file(inputs["tokenizer"])
    eos_id = json.loads(Path(inputs["corpus"]).read_text())["eos_id"]
    documents = held_out_documents(load_tokens(inputs["val"]), tokenizer, eos_id)
    counts = build_tasks(
        documents,
        Path(outputs["tasks"][0]).parent,
        items=tasks["items"],
        context_words=tasks["context_words"],
        continuation_words=tasks["continuation_words"],
        seed=tasks["seed"],
    )
    print(f"built {counts} from {len(documents)} held-out documents")


def collect_proxies_job(inputs: dict, outputs: dict, params: dict) -> None:
    from qscaling.atomic import write_table

    for name in ("proxies", "values"):
        write_table(pd.concat([pd.read_parquet(path) for path in inputs[name]], ignore_index=True), outputs[name])


def score_job(checkpoint, inputs: dict, params: dict, labels: list[dict], device: str) -> dict:
    """The scoring job of `scoring`: one checkpoint's rows, proxies and block values, labelled by variant."""
    from pathlib import Path

    from qscaling.checkpoint import read_metadata
    from qscaling.data import load_tokens

    source = read_metadata(checkpoint).get("source")  # released checkpoints record their repo and revision
    # A released model re-encodes the held-out text; twice the scored tokens leaves room for a longer tokenization.
    tokenizer, held_out = task_tokenizer(
        inputs["tokenizer"], load_tokens(inputs["val"]), source, keep_tokens=2 * params["eval_tokens"]
    )
    rows, proxies, values = score_checkpoint(
        checkpoint,
        [Quantization(**q) for q in params["quantizations"]],
        held_out,
        tokenizer=tokenizer,
        tasks=params["tasks"],
        task_dir=Path(inputs["tasks"][0]).parent if source is None else None,
        eval_tokens=params["eval_tokens"],
        proxy_windows=params["proxy_windows"],
        batch_size=params["batch_size"],
        task_batch_size=params["task_batch_size"],
        device=device,
    )
    frames = {"table": rows.assign(study=STUDY), "proxies": proxies, "values": values}
    return {name: attach_labels(frame, labels, params["final_tokens"]) for name, frame in frames.items()}


def quantizations(config: dict) -> list[Quantization]:
    study = config["studies"][STUDY]
    return [Quantization("w8a8", study["w8a8_weights"]), Quantization("rtn", study["w4"])]


def build_table(rows: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """The scoring rows (already labelled by variant: a shared run appears under each), in a fixed order."""
    order = {factor: i for i, factor in enumerate((*FACTORS, "recipe", "seed", "outlier_prone", "released"))}
    return (
        rows.assign(factor_order=rows["factor"].map(order))
        .sort_values(["factor_order", "group", "level", "N", "D", "method"])
        .drop(columns="factor_order")
        .reset_index(drop=True)
    )


def fit_names(settings: dict) -> list[str]:
    """No scaling law: the paper's claims are comparisons between recipes."""
    return []


def fit_laws(table: pd.DataFrame, settings: dict, **options) -> dict:
    return {}


# ----------------------------------------------------------------------------------------------- claims


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
    return estimate - 1.96 * se, estimate + 1.96 * se


@dataclass(frozen=True)
class SeedNoise:
    """Seed-to-seed standard deviation of W8A8 loss δ: the final recipe at the ablation size over its seeds."""

    sd: float
    seeds: int

    @property
    def measured(self) -> bool:
        return self.seeds >= 2

    def label(self) -> str:
        if not self.measured:
            return "evaluation noise only: one seed, no seed-to-seed estimate, so no verdict between runs"
        return f"evaluation and seed-to-seed noise, σ_seed = {self.sd:.1e} over {self.seeds} seeds"


def seed_noise(table: pd.DataFrame, settings: dict) -> SeedNoise:
    size = settings["size"]
    rows = table[
        table["final"]
        & (table["method"] == "w8a8")
        & ((table["factor"] == "seed") | ((table["factor"] == "recipe") & (table["size"] == size)))
    ]
    deltas = rows.drop_duplicates("run")["delta"].to_numpy(float)
    return SeedNoise(float(np.std(deltas, ddof=1)) if len(deltas) >= 2 else 0.0, len(deltas))


def _ci(low: float, high: float, noise: SeedNoise) -> str:
    return f"[{low:.2e}, {high:.2e}] ({noise.label()})"


def _percent_changes(rows: pd.DataFrame) -> str:
    return ", ".join(f"{r.level}{' ' + r.group if r.group else ''}: {r.pct_change:+.2f} %" for r in rows.itertuples())


def _missing(text: str, what: str) -> dict:
    return claim(STUDY, text, statistic=f"not measured ({what})", ci="", verdict="inconclusive")


def _between_runs(text: str, statistic: str, low: float, high: float, expect: str, noise: SeedNoise) -> dict:
    """A comparison of separately trained runs: decided by its CI only where the seed-to-seed spread is in it."""
    verdict = verdict_from_interval(low, high, expect) if noise.measured else "inconclusive"
    return claim(STUDY, text, statistic=statistic, ci=_ci(low, high, noise), verdict=verdict)


def _trend_claim(rows: pd.DataFrame, factor: str, text: str, *, log_x: bool, expect: str, noise: SeedNoise) -> dict:
    """Weighted slope of W8A8 δ over a factor's levels (one run each): each point's error is its evaluation
    noise and the seed-to-seed spread together."""
    subset = rows[rows["factor"] == factor]
    if subset["level"].nunique() < 2:
        return _missing(text, f"fewer than two {factor} levels")
    x = subset["level"].astype(float)
    point_se = np.hypot(subset["delta_se"].to_numpy(float), noise.sd)
    slope, se = weighted_slope(np.log10(x) if log_x else x, subset["delta"], point_se)
    low, high = _interval(slope, se)
    per = "log10 " if log_x else ""
    statistic = f"slope of W8A8 loss δ on {per}{factor} = {slope:.2e} nats; accuracy change {_percent_changes(subset)}"
    return _between_runs(text, statistic, low, high, expect, noise)


# Below a cumulative decoupled decay Σ lr·wd of 0.2 (decay alone leaves the weights above e^−0.2 ≈ 82 % of their
# size over the whole run) weight decay has barely begun to shape them; the paper's 75k steps are far beyond it.
DECAY_TO_ACT = 0.2


def decay_budget(training: dict, tokens: int, n_params: int) -> tuple[int, float]:
    """(optimizer steps, mean learning rate over them) of one ablation run of `n_params` parameters: a trunk of
    `tokens` tokens on the `training` recipe's schedule, with no cooldown."""
    from types import SimpleNamespace

    from qscaling.plan import peak_lr, warmup_tokens
    from qscaling.train import lr_at

    # The schedule fields of a RunSpec, all that lr_at reads.
    schedule = SimpleNamespace(
        lr=peak_lr(training, n_params),
        min_lr_ratio=training["min_lr_ratio"],
        warmup_tokens=warmup_tokens(training, n_params, training["schedule"], tokens),
        schedule=training["schedule"],
        total_tokens=tokens,
        cooldown=None,
        tokens_per_step=training["batch_size"] * training["seq_len"],
    )
    steps = math.ceil(tokens / schedule.tokens_per_step)
    return steps, float(np.mean([lr_at(schedule, step * schedule.tokens_per_step) for step in range(steps)]))


def _weight_decay_claim(rows: pd.DataFrame, noise: SeedNoise, settings: dict) -> dict:
    """The weight-decay trend, inconclusive where even the largest weight decay cannot act in the run's steps:
    AdamW's decoupled decay multiplies the weights by (1 − lr·wd) per step, ≈ e^(−lr·wd·steps) in all."""
    text = "More weight decay → less W8A8 degradation (Fig. 2)"
    trend = _trend_claim(rows, "weight_decay", text, log_x=True, expect="negative", noise=noise)
    training = settings.get("training")
    if training is None:
        return {**trend, "statistic": f"{trend['statistic']}; optimizer steps unknown (no training recipe given)"}
    ablated = rows.loc[rows["size"] == settings["size"], "N"]  # the one-factor ablations' size
    if ablated.empty:
        return trend
    steps, mean_lr = decay_budget(training, settings["tokens"], int(ablated.iloc[0]))
    weight_decay = max(settings["ablations"]["weight_decay"]["values"])
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
    low, high = _interval(estimate, se)
    statistic = (
        f"W8A8 loss δ({worse}) − δ({better}) = {estimate:.2e} nats; accuracy "
        f"change {_percent_changes(subset.reset_index())}"
    )
    return _between_runs(text, statistic, low, high, "positive", noise)


def ratio_interval(a: float, var_a: float, b: float, var_b: float) -> tuple[float, float] | None:
    """Fieller's 95 % interval for a / b from independent estimates: every R with |a − R·b| ≤ 1.96·√(var_a +
    R²·var_b). None when b is within its own noise of zero: the interval is then unbounded."""
    z2 = 1.96**2
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
        interval = ratio_interval(prone[size], prone_var[size], base[size], base_var[size])
        # A ratio to a δ inside its own noise is a ratio to noise: it is not quoted.
        ratios.append(
            f"{size}: the final δ is within its noise, no ratio"
            if interval is None
            else "{} {:.2f} [{:.2f}, {:.2f}]".format(size, prone[size] / base[size], *interval)
        )
    estimate = float((prone - base).mean())
    low, high = _interval(estimate, math.sqrt(float((prone_var + base_var).sum())) / len(pairs))
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


def claims(tables: dict, fits: dict, settings: dict) -> list[dict]:
    """The paper's claims on the study's table; `settings` is the study's config block, with the `training`
    recipe where the claims should say how far weight decay could act in the run's optimizer steps."""
    table = tables["table"]
    if settings["source"] == "hub":
        return [_w4_claim(table[table["final"]])]
    rows = ablation_rows(table)
    runs = rows.drop_duplicates("run")
    noise = seed_noise(table, settings)
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


# ------------------------------------------------------------------------------------- scoring one checkpoint


def task_changes(base: dict, quantized: dict) -> dict:
    """Accuracy change after quantization, paired per item: mean over tasks of the absolute change (points) and
    of the relative % change (the paper's headline), with the relative change's standard error.

    Tasks the unquantized model never gets right have no relative change and are left out of it.
    """
    absolute, relative, variances = [], [], []
    for task, result in base.items():
        difference = quantized[task]["correct"].astype(float) - result["correct"].astype(float)
        absolute.append(difference.mean())
        accuracy = result["correct"].mean()
        if accuracy > 0:
            relative.append(difference.mean() / accuracy)
            variances.append(
                (difference.std(ddof=1) / math.sqrt(len(difference)) / accuracy) ** 2
                if len(difference) > 1
                else float("nan")
            )
    if not relative:
        return {"acc_change": 100 * float(np.mean(absolute)), "pct_change": float("nan"), "pct_change_se": float("nan")}
    return {
        "acc_change": 100 * float(np.mean(absolute)),
        "pct_change": 100 * float(np.mean(relative)),
        "pct_change_se": 100 * math.sqrt(sum(variances)) / len(relative),
    }


TOKENIZER_PATTERNS = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt"]


def task_tokenizer(tokenizer_file, held_out: np.ndarray, source: dict | None, *, keep_tokens: int | None = None):
    """(transformers tokenizer, held-out token ids) in the vocabulary of the model being scored.

    Our runs (`source` None) use the corpus tokenizer and shard as they are. A released checkpoint (`source` =
    {"repo", "revision"}) brings its own tokenizer, fetched at the same revision (a local directory with one
    subdirectory per revision stands in for the hub); the first `keep_tokens` held-out tokens (all if None) are
    decoded and re-encoded with it.
    """
    from pathlib import Path

    from transformers import AutoTokenizer

    from qscaling.data.tokens import EOS
    from qscaling.tasks import hf_tokenizer

    corpus_tokenizer = hf_tokenizer(tokenizer_file, EOS)
    if source is None:
        return corpus_tokenizer, held_out
    local = Path(source["repo"])
    if local.is_dir():
        path = local / source["revision"]
    else:
        from huggingface_hub import snapshot_download

        path = snapshot_download(source["repo"], revision=source["revision"], allow_patterns=TOKENIZER_PATTERNS)
    tokenizer = AutoTokenizer.from_pretrained(path)
    text = corpus_tokenizer.decode(np.asarray(held_out[:keep_tokens]).tolist())
    return tokenizer, np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int64)


def score_checkpoint(
    checkpoint,
    quantizations,
    held_out: np.ndarray,
    *,
    tokenizer,
    tasks,
    task_dir=None,
    eval_tokens: int,
    proxy_windows: int,
    batch_size: int = 16,
    task_batch_size: int = 32,
    device: str = "cpu",
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(rows, per-block proxies, one block's weights and gains) for one checkpoint.

    Rows: the unquantized model and each quantization, with held-out loss (δ paired per window), task accuracy
    (changes paired per item) and the unquantized model's proxy summaries (block means, outlier counts).
    `held_out` must be in the model's vocabulary; its first `proxy_windows` windows are the proxies' fixed samples.
    """
    import copy

    import torch

    from qscaling.evaluate import evaluate_loss
    from qscaling.outliers import block_proxies, block_values, outlier_counts, qkv_inputs
    from qscaling.quant.as_trained import load_as_trained
    from qscaling.quant.ptq import quantization_config, quantize_model
    from qscaling.studies.ptq import checkpoint_columns, paired_loss, spec_bits
    from qscaling.tasks import run_tasks

    model, metadata = load_as_trained(checkpoint)
    model.to(device)
    seq_len = model.config.max_position_embeddings
    windows_available = len(held_out) // (seq_len + 1)
    if windows_available < proxy_windows:
        raise ValueError(
            f"proxy_windows: {proxy_windows} windows of {seq_len + 1} tokens requested, the held-out "
            f"set has {windows_available}"
        )
    windows = torch.from_numpy(np.asarray(held_out[: proxy_windows * (seq_len + 1)]).astype(np.int64))
    inputs = qkv_inputs(model, windows.view(proxy_windows, seq_len + 1)[:, :-1])
    proxies = block_proxies(model, inputs)
    summary = {
        **{name: float(proxies[name].mean()) for name in ("rmse", "act_std", "gain_std", "spectral_norm")},
        **{f"outliers_{rule}": count for rule, count in outlier_counts(inputs).items()},
    }
    values = block_values(model, len(inputs) // 2)
    base_row = {**checkpoint_columns(model, metadata), **summary}

    def score(candidate):
        loss = evaluate_loss(candidate, held_out, seq_len=seq_len, batch_size=batch_size, max_tokens=eval_tokens)
        accuracy = run_tasks(
            candidate, tokenizer, tasks=tasks, include_path=task_dir, batch_size=task_batch_size, max_length=seq_len
        )
        return loss, accuracy

    base_loss, base_accuracy = score(model)
    rows = []
    for quantization in [Quantization("none", "none"), *quantizations]:
        if quantization.method == "none":
            loss, accuracy = base_loss, base_accuracy
        else:
            quantized = copy.deepcopy(model)
            quantize_model(quantized, quantization_config(quantization.method, quantization.spec))
            loss, accuracy = score(quantized)
            del quantized
        rows.append(
            {
                **base_row,
                "method": quantization.method,
                "spec": quantization.spec,
                "bits": 16 if quantization.method == "none" else spec_bits(quantization.spec),
                **paired_loss(loss, base_loss),
                **{f"acc_{task.removeprefix('qscaling_')}": result["acc"] for task, result in accuracy.items()},
                "mean_acc": float(np.mean([result["acc"] for result in accuracy.values()])),
                "base_mean_acc": float(np.mean([result["acc"] for result in base_accuracy.values()])),
                **task_changes(base_accuracy, accuracy),
            }
        )
    identity = {"run": base_row["run"], "milestone": base_row["milestone"]}
    return pd.DataFrame(rows), proxies.assign(**identity), values.assign(**identity)
