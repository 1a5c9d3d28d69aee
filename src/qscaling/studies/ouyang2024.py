"""Ouyang et al. 2024: quantization-induced degradation (QiD) of intermediate checkpoints, the Pythia way.

Grid: the shared WSD trunk of each size (constant learning rate, never annealed, like Pythia's intermediate
checkpoints) at log-spaced token counts; GPTQ weight-only at 2/3/4 bits with groups (GPTQ's own symmetric
convention: 2^b levels), scored on the in-domain held-out set and on technical English (Fig. 8); AWQ and a
bitsandbytes-style FP4 for the method comparison (Fig. 9). QiD = loss(quantized) − loss(unquantized).

Fig. 14 (`bitnet`): BitNet b1.58-style trunks (ternary absmean weights, 8-bit per-token activations, identity STE)
beside the fp32 trunks of the same sizes and recipe, their training loss averaged over equal token spans after
warmup: the `ouyang2024_bitnet` table. Whether the gap widens with training is measured against the seed noise of
that change (the first size run again with `extra_seeds`).
"""

import numpy as np
import pandas as pd

from qscaling.config import ConfigError, check_method_spec, check_sizes, check_weight_spec
from qscaling.laws import LAWS, fit
from qscaling.laws.ouyang2024 import TOKENS_EXPONENT, UNIFIED_CONSTANTS
from qscaling.plan import Planner, log_spaced_tokens
from qscaling.studies import (
    Evaluation,
    Job,
    Quantization,
    check_local_models,
    local_evaluations,
    non_embedding_params,
    ptq_scoring,
    try_fit,
)
from qscaling.studies.claims import (
    INCONCLUSIVE,
    NOISE_SIGMAS,
    claim,
    positive_parameter_claim,
    slope_claim,
    verdict_from_interval,
)

STUDY = "ouyang2024"
FIT_TABLES = ("one_factor",)
ONE_FACTOR = {"qid_tokens": ("D", ["N", "bits"]), "qid_size": ("N", ["D", "bits"]), "qid_bits": ("P", ["N", "D"])}
BITNET, FULL = "bitnet", "fp32"  # the two precisions of Fig. 14's runs
SHARED_SETTINGS = ("training",)  # the recipe's seed: which of Fig. 14's runs are the main ones


def checkpoints(config: dict) -> list[int]:
    study = config["studies"][STUDY]
    return log_spaced_tokens(study["first_checkpoint"], study["last_checkpoint"], study["checkpoints"])


def check_config(config: dict) -> None:
    """Sizes, checkpoint range and every GPTQ / comparison spec, before any job exists."""
    study, key = config["studies"][STUDY], f"studies.{STUDY}"
    if study["source"] == "train":
        check_sizes(config, f"{key}.sizes", study["sizes"])
    if study["source"] == "local":
        check_local_models(f"{key}.local", study["local"])
    if study["source"] == "hub" and not study["hub"]:
        raise ConfigError(f"config key {key}.hub: source 'hub' needs {{models:, steps:, tokens_per_step:}}")
    if study["first_checkpoint"] >= study["last_checkpoint"]:
        raise ConfigError(f"config key {key}.first_checkpoint: must be below last_checkpoint")
    for bits in study["gptq_bits"]:
        check_weight_spec(f"{key}.group_size", "gptq", f"int{bits}:g{{group}}:gptq", group=study["group_size"])
    for index, entry in enumerate(study["compare"]):
        check_method_spec(f"{key}.compare.{index}", entry, group=study["group_size"])
    bitnet = study["bitnet"]
    if bitnet:
        from qscaling.quant.precision import canonical_training_precision

        check_sizes(config, f"{key}.bitnet.sizes", bitnet["sizes"])
        if config["training"]["seed"] in bitnet["extra_seeds"]:
            raise ConfigError(
                f"config key {key}.bitnet.extra_seeds: repeats the recipe's seed {config['training']['seed']}"
            )
        try:
            canonical_training_precision(bitnet["precision"])
        except (TypeError, ValueError) as error:
            raise ConfigError(f"config key {key}.bitnet.precision: {error}") from None


def plan(config: dict, planner) -> list[Evaluation]:
    """Trunk checkpoints of our ladder, (`source: hub`, paper scale) released Pythia revisions, or (`source:
    local`) your own checkpoints; whatever the source, Fig. 14's BitNet and fp32 trunks are trained here."""
    study = config["studies"][STUDY]
    bitnet_runs(config, planner)
    if study["source"] == "local":
        return local_evaluations(STUDY, study["local"], planner)
    if study["source"] == "hub":
        hub = study["hub"]
        revisions = {step * hub["tokens_per_step"]: f"step{step}" for step in hub["steps"]}
        return [
            Evaluation(STUDY, planner.hub(repo, size, revisions), tokens)
            for size, repo in hub["models"].items()
            for tokens in sorted(revisions)
        ]
    tokens = checkpoints(config)
    return [
        Evaluation(STUDY, planner.trunk(size, upto=study["last_checkpoint"], milestones=tokens), milestone)
        for size in study["sizes"]
        for milestone in tokens
    ]


def bitnet_runs(config: dict, planner) -> list[dict]:
    """Fig. 14's runs, planned: per size (and at the first size per extra seed) a BitNet trunk and the fp32 trunk of
    the same recipe, both to `tokens` (a WSD trunk's warmup does not depend on its length): {size, seed, run, precision}.
    Their training-loss curves are the result; no checkpoint is scored."""
    block, seed = config["studies"][STUDY]["bitnet"], config["training"]["seed"]
    if not block:
        return []
    pairs = [(size, seed) for size in block["sizes"]] + [(block["sizes"][0], extra) for extra in block["extra_seeds"]]
    return [
        {
            "size": size,
            "seed": run_seed,
            "precision": name,
            "run": planner.curve(STUDY, size, block["tokens"], seed=run_seed, **overrides),
        }
        for size, run_seed in pairs
        for name, overrides in ((BITNET, {"training_precision": block["precision"]}), (FULL, {}))
    ]


def compared(settings: dict) -> list[Quantization]:
    study = settings
    return [Quantization(*entry.format(group=study["group_size"]).split(":", 1)) for entry in study["compare"]]


def quantizations(config: dict) -> list[Quantization]:
    study = config["studies"][STUDY]
    splits = ("val", "ood") if config["evaluation"]["ood_source"] else ("val",)
    gptq = [Quantization("gptq", f"int{bits}:g{study['group_size']}:gptq", splits) for bits in study["gptq_bits"]]
    return gptq + [q for q in compared(study) if q not in gptq]


def scoring(config: dict, layout):
    return ptq_scoring(config, layout, STUDY, quantizations(config))


def jobs(config: dict, evaluations: list, layout) -> list[Job]:
    """Fig. 12's table: weight change between adjacent checkpoints of every run the study scores."""
    milestones = {}
    for evaluation in evaluations:
        milestones.setdefault(evaluation.run, set()).add(evaluation.tokens)
    runs = sorted(milestones)
    return _bitnet_jobs(config, layout) + [
        Job(
            "weight_changes",
            "qscaling.studies.ouyang2024:weight_changes_job",
            inputs={"summaries": [layout.run_summary(run) for run in runs]},
            outputs={"weight_changes": layout.table(STUDY, "weight_changes")},
            params={"milestones": [sorted(milestones[run]) for run in runs]},
            message="Measuring weight change between adjacent checkpoints",
        )
    ]


def _bitnet_jobs(config: dict, layout) -> list[Job]:
    block = config["studies"][STUDY]["bitnet"]
    runs = bitnet_runs(config, Planner(config, layout.corpus))  # the same run ids `plan` registered
    if not runs:
        return []
    return [
        Job(
            "bitnet",
            "qscaling.studies.ouyang2024:bitnet_curves_job",
            inputs={"summaries": [layout.run_summary(run["run"]) for run in runs]},
            outputs={"bitnet": layout.table(STUDY, "bitnet")},
            params={
                "runs": [
                    {key: run[key] for key in ("size", "seed", "precision")}
                    | {"N": non_embedding_params(config, run["size"])}
                    for run in runs
                ],
                "tokens": block["tokens"],
                "bins": block["bins"],
            },
            message="Binning the BitNet and fp32 training-loss curves",
        )
    ]


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
    import json

    from qscaling.atomic import write_table

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


def bitnet_claim(curves: pd.DataFrame, recipe_seed: int) -> dict:
    """The gap's widening at every size (the recipe's seed), against the larger of its span noise and the seed noise:
    the widenings' spread over the seeds of the first size. Reproduced when every size widens by more than
    NOISE_SIGMAS of that floor, not reproduced when every size narrows by more; inconclusive otherwise, and always
    without a second seed."""
    widening = bitnet_widening(curves)
    if widening.empty:
        return claim(STUDY, BITNET_CLAIM, statistic="no BitNet and fp32 curves to compare", ci="", verdict=INCONCLUSIVE)
    main = widening[widening["seed"] == recipe_seed].sort_values("N")
    seeded = widening.groupby("size")["widening"].agg(["std", "count"])
    repeated = seeded[seeded["count"] > 1]
    sigma_seed = float(repeated["std"].iloc[0]) if len(repeated) else float("nan")
    floors = np.maximum(main["widening_se"], sigma_seed if np.isfinite(sigma_seed) else 0.0)
    statistic = "; ".join(
        f"{row.size}: gap {row.first_gap:+.3f} → {row.last_gap:+.3f}, widening {row.widening:+.3f}"
        for row in main.itertuples()
    )
    low, high = (main["widening"] - NOISE_SIGMAS * floors).min(), (main["widening"] + NOISE_SIGMAS * floors).max()
    if not np.isfinite(sigma_seed):
        verdict, noise = INCONCLUSIVE, "no repeated seed: the seed noise of the widening is unmeasured"
    else:
        verdict = verdict_from_interval(low, high, "positive")
        noise = f"σ_seed of the widening {sigma_seed:.3f} over {int(repeated['count'].iloc[0])} seeds at {repeated.index[0]}"
    return claim(
        STUDY,
        BITNET_CLAIM,
        statistic=statistic,
        ci=f"every size's widening ± {NOISE_SIGMAS}·max(span SE, σ_seed): [{low:.3f}, {high:.3f}] ({noise})",
        verdict=verdict,
    )


def build_table(rows: pd.DataFrame, settings: dict) -> pd.DataFrame:
    table = rows.copy()
    table["P"] = table["bits"]
    table["qid"] = table["delta"]
    return table.sort_values(["split", "method", "bits", "N", "D"]).reset_index(drop=True)


def gptq_rows(table: pd.DataFrame, split: str = "val") -> pd.DataFrame:
    rows = table[(table["method"] == "gptq") & (table["split"] == split)]
    return rows[rows["delta"] > 2 * rows["delta_se"]]


def fit_names(settings: dict) -> list[str]:
    return ["qid", "kaplan"] + [f"compare_{q.method}_{q.spec.replace(':', '_')}" for q in compared(settings)]


def fit_laws(table: pd.DataFrame, settings: dict, *, bootstrap: int = 200) -> dict:
    base = table[(table["method"] == "none") & (table["split"] == "val")]
    fits = {
        "qid": try_fit(
            "ouyang2024.qid",
            gptq_rows(table),
            target="delta",
            bootstrap=bootstrap,
            group_col="N",
            run_col="run",
            seed=0,
        ),
        "kaplan": try_fit("kaplan", base, target="loss", bootstrap=bootstrap, group_col="N", seed=0),
    }
    for quantization, name in zip(compared(settings), fit_names(settings)[2:]):
        rows = table[
            (table["method"] == quantization.method) & (table["spec"] == quantization.spec) & (table["split"] == "val")
        ]
        fits[name] = try_fit(
            "ouyang2024.qid_fixed_bits",
            rows[rows["delta"] > 2 * rows["delta_se"]],
            target="delta",
            bootstrap=bootstrap,
            group_col="N",
            seed=0,
        )
    return fits


def fit_tables(table: pd.DataFrame, settings: dict) -> dict:
    return {"one_factor": one_factor_fits(table)}


def one_factor_fits(table: pd.DataFrame) -> pd.DataFrame:
    """Figs. 3–5: each one-factor law fitted within every group that holds the other two factors fixed."""
    records = []
    rows = gptq_rows(table)
    for law_name, (factor, fixed) in ONE_FACTOR.items():
        law = LAWS[f"ouyang2024.{law_name}"]
        for key, group in rows.groupby(fixed):
            if group[factor].nunique() <= len(law.param_names):
                continue
            result = fit(law, group, target="delta", bootstrap=100, group_col=None, seed=0)
            standard_errors = {f"{name}_se": value for name, value in result.standard_errors.items()}
            records.append(
                {
                    "law": law_name,
                    "factor": factor,
                    **dict(zip(fixed, key)),
                    **result.params,
                    **standard_errors,
                    "r2": result.r2,
                    "points": len(group),
                }
            )
    return pd.DataFrame(records)


def weight_changes(checkpoint_paths: list) -> pd.DataFrame:
    """Fig. 12: relative change ‖W_t+1 − W_t‖/‖W_t‖ of every matrix between adjacent checkpoints of one run."""
    import torch
    from safetensors.torch import load_file

    from qscaling.checkpoint import read_metadata

    records, previous = [], None
    for path in checkpoint_paths:
        weights, metadata = load_file(f"{path}/model.safetensors"), read_metadata(path)
        if previous is not None:
            for name, tensor in weights.items():
                if tensor.dim() == 2 and "embed" not in name:
                    change = torch.linalg.norm(tensor - previous[0][name]) / torch.linalg.norm(previous[0][name])
                    records.append(
                        {
                            "run": metadata["run_id"],
                            "size": metadata["spec"]["size"],
                            "D_from": previous[1],
                            "D_to": metadata["tokens_seen"],
                            # Hub checkpoints record no schedule: NaN, and the claim then uses every interval.
                            "warmup_tokens": metadata["spec"].get("warmup_tokens", np.nan),
                            "matrix": name,
                            "relative_change": float(change),
                        }
                    )
        previous = (weights, metadata["tokens_seen"])
    return pd.DataFrame(records)


def weight_changes_job(inputs: dict, outputs: dict, params: dict) -> None:
    from pathlib import Path

    from qscaling.atomic import write_table
    from qscaling.train import milestone_name

    frames = []
    for summary, milestones in zip(inputs["summaries"], params["milestones"]):
        run_dir = Path(summary).parent
        frames.append(weight_changes([run_dir / "checkpoints" / milestone_name(m) for m in milestones]))
    write_table(pd.concat(frames, ignore_index=True), outputs["weight_changes"])


def claims(tables: dict, fits: dict, settings: dict) -> list[dict]:
    table = tables["table"]
    out = []
    qid = fits.get("qid")
    if qid is not None:
        for name in ("beta", "alpha", "gamma"):
            paper = UNIFIED_CONSTANTS[name]
            text = f"Unified QiD law: {name} > 0 (paper {paper})"
            out.append(positive_parameter_claim(STUDY, text, qid, name, paper=paper))
    rows = gptq_rows(table)
    out.append(
        slope_claim(
            STUDY,
            "QiD grows with training tokens at fixed size and bits (Fig. 3)",
            rows,
            x="D",
            y="delta",
            by=["N", "bits"],
            expect="positive",
            paper=TOKENS_EXPONENT,  # Sec. 4.1: at fixed size and bits, QiD ∝ D^β
        )
    )
    ood = gptq_rows(table, "ood")
    if len(ood):
        out.append(
            slope_claim(
                STUDY,
                "QiD grows with training tokens on an out-of-domain set too (Fig. 8)",
                ood,
                x="D",
                y="delta",
                by=["N", "bits"],
                expect="positive",
            )
        )
    out.append(weight_change_claim(tables["weight_changes"]))
    if "bitnet" in tables:
        out.append(bitnet_claim(tables["bitnet"], settings["training"]["seed"]))
    return out


def weight_change_claim(changes: pd.DataFrame, *, bootstrap: int = 1000, seed: int = 0) -> dict:
    """Fig. 12's premise: checkpoints change less per token late in training than early.

    Over geometric checkpoint intervals, change per token falls by itself (a random walk moves as √length), so
    only adjacent intervals of equal length (within EQUAL_LENGTH_TOLERANCE) that start after warmup are
    compared: the statistic is the mean, over matrices, of log(rate late / rate early), its CI a bootstrap over
    matrices (every interval pair of a matrix is resampled together: its pairs are not independent).
    """
    text = "Weights change less per training token late in training (Fig. 12 premise; equal-length intervals)"
    pairs = equal_interval_pairs(changes)
    if not len(pairs):
        return claim(STUDY, text, statistic=_grid_without_equal_intervals(changes), ci="", verdict="inconclusive")
    per_matrix = pairs.groupby(["run", "matrix"])["log_rate_ratio"].mean().to_numpy()
    rng = np.random.default_rng(seed)
    draws = [per_matrix[rng.integers(0, len(per_matrix), len(per_matrix))].mean() for _ in range(bootstrap)]
    low, high = np.percentile(draws, [2.5, 97.5])
    statistic = (
        f"mean log(rate late / rate early) = {per_matrix.mean():.3f} over {len(per_matrix)} matrices, "
        f"{pairs[['run', 'D_from']].drop_duplicates().shape[0]} equal-length interval pairs after warmup"
    )
    return claim(
        STUDY,
        text,
        statistic=statistic,
        ci=f"[{low:.3f}, {high:.3f}]",
        verdict=verdict_from_interval(low, high, "negative"),
    )


EQUAL_LENGTH_TOLERANCE = 0.10  # adjacent intervals count as equal when their token lengths differ by ≤ 10 %


def _intervals(changes: pd.DataFrame) -> pd.DataFrame:
    """Each run's checkpoint intervals after warmup (warmup unknown, as for hub checkpoints: all of them)."""
    warmup = changes["warmup_tokens"].fillna(0) if "warmup_tokens" in changes else 0
    return changes[changes["D_from"] >= warmup].assign(length=lambda f: f["D_to"] - f["D_from"])


def equal_interval_pairs(changes: pd.DataFrame) -> pd.DataFrame:
    """Per matrix, log of the change rate over an interval divided by the rate over the one before it, for
    adjacent post-warmup intervals whose lengths agree within EQUAL_LENGTH_TOLERANCE."""
    intervals = _intervals(changes)
    rate = intervals.assign(rate=intervals["relative_change"] / intervals["length"])
    late = rate.rename(columns={"D_from": "D_mid", "rate": "rate_late", "length": "length_late"})
    early = rate.rename(columns={"D_to": "D_mid", "rate": "rate_early", "length": "length_early"})
    pairs = early.merge(late[["run", "matrix", "D_mid", "rate_late", "length_late"]], on=["run", "matrix", "D_mid"])
    equal = (pairs["length_late"] / pairs["length_early"] - 1).abs() <= EQUAL_LENGTH_TOLERANCE
    pairs = pairs[equal & (pairs["rate_early"] > 0) & (pairs["rate_late"] > 0)]
    return pairs.assign(log_rate_ratio=np.log(pairs["rate_late"] / pairs["rate_early"]))


def _grid_without_equal_intervals(changes: pd.DataFrame) -> str:
    """Why the grid cannot test the claim, in numbers: its post-warmup interval lengths and their ratios."""
    lengths = sorted(_intervals(changes)[["D_from", "D_to"]].drop_duplicates().eval("D_to - D_from").unique())
    ratios = [later / earlier for earlier, later in zip(lengths, lengths[1:])]
    warmup = "warmup not recorded" if "warmup_tokens" not in changes else "after warmup"
    return (
        f"no adjacent intervals of equal length (±{EQUAL_LENGTH_TOLERANCE:.0%}) {warmup}: lengths "
        + ", ".join(f"{length:,.0f}" for length in lengths)
        + " tokens"
        + (", successive ratios " + ", ".join(f"{ratio:.2f}" for ratio in ratios) if ratios else "")
    )
