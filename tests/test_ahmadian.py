"""Ahmadian et al. 2023: the ablation grid, precision emulation, statistics, claims, released-OPT scoring, DAG."""

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from test_figure_content import draws_data, figure_record

from qscaling.config import ConfigError, deep_merge, resolve_config
from qscaling.noise import mad_sigma
from qscaling.pipeline import learning_curve_runs
from qscaling.plan import Planner
from qscaling.quant import quantize
from qscaling.studies.ahmadian2023 import STUDY, claims, grid, score
from qscaling.studies.ahmadian2023.settings import Ahmadian2023Settings
from qscaling.studies.registry import study_settings


@pytest.fixture(scope="module")
def raw_config(repo_root):
    return yaml.safe_load((repo_root / "config.yaml").read_text())


@pytest.fixture(scope="module")
def default_config(raw_config):
    return resolve_config(raw_config)


def ahmadian_settings(raw_config, **overrides) -> Ahmadian2023Settings:
    """The study's typed settings, with the training recipe its claims read, from config.yaml with `overrides`."""
    config = resolve_config(deep_merge(raw_config, overrides))
    return study_settings(STUDY, config.studies["ahmadian2023"], config.common())


@pytest.fixture(scope="module")
def default_settings(raw_config):
    return ahmadian_settings(raw_config)


def plan_study(config, settings: Ahmadian2023Settings):
    """(planner, the learning curves' trunks, the study's evaluations) with the learning curves planned first."""
    common = config.common()
    planner = Planner(common, common.corpus_id)
    curves = learning_curve_runs(common, planner)
    return planner, curves, STUDY.plan(settings, common, planner)


def test_grid_has_the_papers_one_factor_ablations(default_config, default_settings):
    variants = grid.variants(default_settings, default_config.common())
    by_factor = {f: [v for v in variants if v.factor == f] for f in {v.factor for v in variants}}
    assert [v.level for v in by_factor["weight_decay"]] == ["0.001", "0.01", "0.1"]
    assert all(dict(v.recipe)["grad_clip"] is None for v in by_factor["weight_decay"])  # the paper's: no clipping
    assert {(dict(v.recipe)["grad_clip"], dict(v.recipe)["weight_decay"]) for v in by_factor["grad_clip"]} == {
        (None, 0.001),
        (1.0, 0.001),
    }
    assert {(v.level, v.group) for v in by_factor["precision"]} == {
        ("bf16", "wd 0.1"),
        ("bf16", "wd 0.01"),
        ("fp16", "wd 0.1"),
        ("fp16", "wd 0.01"),
    }
    assert [v.size for v in by_factor["recipe"]] == default_settings.sizes
    assert dict(by_factor["outlier_prone"][0].recipe) == {
        "weight_decay": 0.001,
        "grad_clip": None,
        "dropout": 0.0,
        "precision": "fp16",
    }


def variant_table(evaluations) -> pd.DataFrame:
    """One row per variant: the labels the plan attached to its run's evaluations (each run labelled once)."""
    first = {}
    for evaluation in evaluations:
        first.setdefault(evaluation.run, evaluation)
    return pd.DataFrame([record for evaluation in first.values() for record in evaluation.label_records()])


def test_plan_reuses_the_shared_trunks_and_tracks_only_the_precision_runs(raw_config, default_config, default_settings):
    planner, curves, evaluations = plan_study(default_config, default_settings)
    labels = variant_table(evaluations)
    recipe_runs = set(labels.loc[labels["factor"] == "recipe", "run"])
    assert recipe_runs <= set(curves)  # the final recipe costs nothing
    runs = labels.set_index("variant")["run"]
    assert runs["grad_clip · none"] == runs["weight_decay · 0.001"]  # one run serves both ablations
    assert len(set(labels["run"])) == 19 and len(set(labels["run"]) - recipe_runs) == 16
    seeds = labels[labels["factor"] == "seed"]
    assert seeds["level"].tolist() == ["1", "2"] and set(seeds["size"]) == {"N40k"}
    for run in seeds["run"]:  # the final recipe again, another seed
        spec = planner.runs[run].spec
        assert spec.seed in (1, 2) and spec.weight_decay == 0.1 and spec.grad_clip == 1.0 and spec.dropout == 0.0
    tokens = {}
    for evaluation in evaluations:
        tokens.setdefault(evaluation.run, set()).add(evaluation.tokens)
    for row in labels.itertuples():
        expected = set(grid.checkpoint_tokens(default_settings)) if row.tracked else {600_000}
        assert tokens[row.run] == expected
    assert grid.checkpoint_tokens(default_settings) == [120_000, 319_800, 600_000]
    bf16 = planner.runs[runs["precision · bf16 · wd 0.1"]].spec
    assert bf16.training_precision["weights"] == "fp:e8m7:unscaled" and bf16.autocast is None
    autocast = ahmadian_settings(raw_config, studies={"ahmadian2023": {"precision_mode": "autocast"}})
    planner, _, evaluations = plan_study(default_config, autocast)
    labels = variant_table(evaluations)
    fp16 = planner.runs[labels.set_index("variant")["run"]["precision · fp16 · wd 0.01"]].spec
    assert fp16.autocast == "fp16" and fp16.training_precision is None and fp16.weight_decay == 0.01


@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_precision_emulation_is_the_16_bit_cast(precision, dtype):
    finfo = torch.finfo(dtype)
    x = torch.cat(
        [
            torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 50,
            torch.tensor([finfo.tiny, finfo.tiny / 8, -finfo.max, finfo.max * 0.999, 0.0, -0.0, 1 / 3]),
        ]
    )
    assert torch.equal(quantize(x, grid.EMULATED_FORMATS[precision]), x.to(dtype).float())


def test_config_errors_name_the_key(raw_config):
    with pytest.raises(ConfigError, match="studies.ahmadian2023.precision_mode"):
        ahmadian_settings(raw_config, studies={"ahmadian2023": {"precision_mode": "native"}})
    with pytest.raises(ConfigError, match="studies.ahmadian2023.recipe.precision"):
        ahmadian_settings(raw_config, studies={"ahmadian2023": {"recipe": {"precision": "fp8"}}})
    with pytest.raises(ConfigError, match=r"studies.ahmadian2023.sizes.1: size 'N6B' is not in ladder \(defined: N21k"):
        ahmadian_settings(raw_config, studies={"ahmadian2023": {"sizes": ["N21k", "N6B"]}})


def test_weighted_slope_and_its_error():
    slope, se = claims.weighted_slope([0, 1, 2], [1.0, 3.0, 5.0], [0.5, 0.5, 0.5])
    assert slope == pytest.approx(2.0) and se == pytest.approx(0.5 / np.sqrt(2))
    # A noisier point counts less: the slope leans towards the two precise points.
    assert claims.weighted_slope([0, 1, 2], [0.0, 1.0, 10.0], [0.1, 0.1, 100.0])[0] == pytest.approx(1.0, abs=1e-3)


def test_task_changes_are_paired_per_item():
    base = {"a": {"correct": np.array([1, 1, 0, 1], dtype=np.int8)}, "b": {"correct": np.zeros(4, dtype=np.int8)}}
    quantized = {"a": {"correct": np.array([1, 0, 0, 1], dtype=np.int8)}, "b": {"correct": np.array([0, 1, 0, 0])}}
    changes = score.task_changes(base, quantized)
    assert changes["acc_change"] == pytest.approx(100 * (-0.25 + 0.25) / 2)
    assert changes["pct_change"] == pytest.approx(-100 / 3)  # task b has no base accuracy: no relative change
    assert changes["pct_change_se"] == pytest.approx(100 * 0.5 / 2 / 0.75)


def test_attach_labels_repeats_a_shared_run_under_each_variant():
    rows = pd.DataFrame({"run": ["r", "r"], "milestone": [300, 600], "size": ["N40k", "N40k"]})
    labels = [
        {"run": "r", "factor": "weight_decay", "level": "0.001", "size": "N40k"},
        {"run": "r", "factor": "grad_clip", "level": "none", "size": "N40k"},
    ]
    table = score.attach_labels(rows, labels, 600)
    assert len(table) == 4 and table["final"].tolist() == [False, False, True, True]
    assert sorted(table["factor"].unique()) == ["grad_clip", "weight_decay"]


SYNTHETIC_LEVELS = [  # (factor, level, group, badness: how much the paper says the level hurts W8A8)
    ("weight_decay", "0.001", "", 3.0),
    ("weight_decay", "0.01", "", 2.0),
    ("weight_decay", "0.1", "", 1.0),
    ("dropout", "0", "", 1.0),
    ("dropout", "0.4", "", 2.0),
    ("dropout", "0.8", "", 3.0),
    ("grad_clip", "none", "", 3.0),
    ("grad_clip", "1", "", 1.0),
    ("precision", "bf16", "wd 0.1", 1.0),
    ("precision", "fp16", "wd 0.1", 2.5),
]
# 6.0-rule counts of the ablation runs, unrelated to their badness (Spearman ρ = −0.18)
SYNTHETIC_OUTLIER_COUNTS = [0, 1, 1, 0, 2, 0, 1, 0, 2, 1]
SIZES = {"N21k": 20_904, "N40k": 40_160}


def synthetic_row(run, factor, level, method, delta, *, group="", size="N40k", badness=1.0, outliers=0) -> dict:
    return {
        "run": run,
        "factor": factor,
        "level": level,
        "group": group,
        "final": True,
        "method": method,
        "base_loss": 5.0,
        "loss": 5.0 + delta,
        "delta": delta,
        "delta_se": 0.0 if method == "none" else 1e-5,
        "pct_change": -badness if factor in grid.FACTORS else 0.0,
        "gain_std": badness,
        "rmse": badness,
        "outliers_llm_int8": outliers,
        "size": size,
        "N": SIZES[size],
    }


def synthetic_table(sensitive: bool, seed_spread: float = 1e-6, seeds: int = 2) -> pd.DataFrame:
    """Final rows where W8A8 degradation follows the paper (sensitive=True) or its opposite: the one-factor
    ablations (unquantized, W8A8 and a W4 twenty times worse), the final and outlier-prone recipes at two sizes,
    and the final recipe's W8A8 δ over `seeds` more seeds, `seed_spread` either side of it (by default a
    thousandth of the effects: seeds that agree exactly would measure no spread at all)."""
    sign = 1.0 if sensitive else -1.0
    rows = []
    for index, ((factor, level, group, badness), outliers) in enumerate(
        zip(SYNTHETIC_LEVELS, SYNTHETIC_OUTLIER_COUNTS, strict=True)
    ):
        delta = 1e-3 * (2 + sign * badness)
        for method, scale in (("none", 0.0), ("w8a8", 1.0), ("rtn", 20.0)):
            rows.append(
                synthetic_row(
                    f"run{index}",
                    factor,
                    level,
                    method,
                    delta * scale,
                    group=group,
                    badness=badness + 0.1 * index,
                    outliers=outliers,
                )
            )
    for size in SIZES:
        for factor, level, delta in (
            ("recipe", "final", 2e-3),
            ("outlier_prone", "outlier-prone", 2e-3 + sign * 1.5e-3),  # the paper: outlier-prone degrades more
        ):
            run = "recipe" if (factor, size) == ("recipe", "N40k") else f"{factor}-{size}"
            rows += [
                synthetic_row(run, factor, level, method, d, size=size) for method, d in (("none", 0), ("w8a8", delta))
            ]
    offsets = [1, -1][:seeds]
    rows += [
        synthetic_row(f"seed{i}", "seed", str(i), "w8a8", 2e-3 + o * seed_spread) for i, o in enumerate(offsets, 1)
    ]
    return pd.DataFrame(rows)


def by_claim(claims: list[dict], words: str) -> dict:
    (row,) = [row for row in claims if words in row["claim"]]
    return row


def test_claims_follow_the_data(raw_config):
    # At lr 0.3, Σ lr·wd over the 293 steps is ≈ 8 at wd 0.1: weight decay can act, so its trend decides.
    settings = ahmadian_settings(raw_config, training={"lr": 0.3})
    verdicts = [row["verdict"] for row in claims.claims({"table": synthetic_table(True)}, {}, settings)]
    assert verdicts == ["reproduced"] * 9
    opposite = [row["verdict"] for row in claims.claims({"table": synthetic_table(False)}, {}, settings)]
    assert opposite[:4] == ["not reproduced"] * 4 and opposite[6:] == ["not reproduced"] * 3
    assert opposite[4] == "reproduced"  # W4 still costs more than W8A8 in the opposite world
    assert opposite[5] == "reproduced"  # the 6.0 rule's counts are unrelated to δ in both worlds
    empty = claims.claims({"table": synthetic_table(True).iloc[:0]}, {}, settings)
    assert all(row["verdict"] == "inconclusive" for row in empty)


def test_a_difference_between_runs_inside_the_seed_spread_is_inconclusive(default_settings):
    """The ablation effects above are ~1e-3 nats; three seeds of the recipe 1e-2 apart make every comparison of
    separately trained runs inconclusive, while W4 vs W8A8 (both on each checkpoint) stays reproduced."""
    table = synthetic_table(True, seed_spread=1e-2)
    noise = claims.seed_noise(table, default_settings)
    assert noise.sigma.runs == 3 and noise.sd == pytest.approx(mad_sigma([2e-3, 1.2e-2, -8e-3]).value)
    checked = claims.claims({"table": table}, {}, default_settings)
    between_runs = [*checked[:4], checked[8]]
    assert [row["verdict"] for row in between_runs] == ["inconclusive"] * 5
    assert all("MAD of 3 seeds at N40k" in row["noise"] for row in between_runs)
    assert checked[4]["verdict"] == "reproduced" and "paired evaluation noise" in checked[4]["ci"]


def test_one_seed_gives_no_verdict_between_runs(default_settings):
    """With the recipe on one seed only evaluation noise is known: the same clear effects get no verdict."""
    table = synthetic_table(True, seeds=0)
    checked = claims.claims({"table": table}, {}, default_settings)
    for row in [*checked[:4], checked[8]]:
        assert row["verdict"] == "inconclusive" and "no verdict between runs" in row["ci"], row["claim"]
    assert checked[4]["verdict"] == "reproduced"  # W4 vs W8A8 is paired on each checkpoint: no seed noise in it


def test_identical_clipped_and_unclipped_runs_are_not_exercised(default_settings):
    """Clipping that never triggers leaves the clipped run bit-identical to the unclipped one."""
    table = synthetic_table(True)
    unclipped = table[(table["factor"] == "grad_clip") & (table["level"] == "none")]
    clipped = table.index[(table["factor"] == "grad_clip") & (table["level"] == "1")]
    columns = ["base_loss", "loss", "delta", "delta_se"]
    table.loc[clipped, columns] = unclipped[columns].to_numpy()
    row = by_claim(claims.claims({"table": table}, {}, default_settings), "Gradient clipping")
    assert row["verdict"] == "inconclusive"
    assert row["statistic"].startswith("not exercised: clipped and unclipped runs identical")
    table.loc[clipped[table.loc[clipped, "method"] == "w8a8"], "loss"] += 1e-12  # one bit apart: compared again
    row = by_claim(claims.claims({"table": table}, {}, default_settings), "Gradient clipping")
    assert row["statistic"].startswith("W8A8 loss δ(none) − δ(1)")


def test_an_outlier_rule_that_counts_zero_everywhere_cannot_fail(default_settings):
    table = synthetic_table(True).assign(outliers_llm_int8=0, **{"outliers_threshold_4.2": 0, "outliers_zscore_4": 0})
    row = by_claim(claims.claims({"table": table}, {}, default_settings), "6.0 rule")
    assert row["verdict"] == "inconclusive"
    assert (
        "every rule (llm_int8, threshold_4.2, zscore_4) counts 0 outlier dims in all 14 scored runs" in row["statistic"]
    )
    table.loc[table["factor"] == "outlier_prone", "outliers_llm_int8"] = 3  # the rule finds dims somewhere
    row = by_claim(claims.claims({"table": table}, {}, default_settings), "6.0 rule")
    assert row["verdict"] == "reproduced"


def test_decay_budget_follows_the_sizes_recipe(default_config):
    """Default: 600k tokens of 16 × 128 are 293 steps; N40k warms up over the recipe's 50-step floor (102,400
    tokens) to its peak LR 0.00846, so Σ lr·wd at wd 0.1 is ≈ 0.23: enough for weight decay to act."""
    steps, mean_lr = claims.decay_budget(default_config.training, 600_000, 40_160)
    warmup = [0.00846 * (i + 1) * 2048 / (102_400 + 2048) for i in range(50)]  # lr_at's linear warmup, by hand
    assert steps == 293 and mean_lr == pytest.approx((sum(warmup) + 243 * 0.00846) / 293)
    assert mean_lr * 0.1 * steps == pytest.approx(0.227, abs=1e-3)
    assert mean_lr * 0.1 * steps > claims.DECAY_TO_ACT


def test_weight_decay_that_cannot_act_in_the_runs_steps_is_not_exercised(default_config, raw_config, default_settings):
    """60k tokens are 30 steps, two thirds of them warmup: Σ lr·wd ≈ 0.02 at N40k, a tenth of what weight decay
    needs to act, so the (clear) trend is not evidence. At the default's 600k tokens it is."""
    short = ahmadian_settings(raw_config, studies={"ahmadian2023": {"tokens": 60_000}})
    steps, mean_lr = claims.decay_budget(default_config.training, 60_000, SIZES["N40k"])
    row = claims.claims({"table": synthetic_table(True)}, {}, short)[0]
    assert row["verdict"] == "inconclusive" and mean_lr * 0.1 * steps < claims.DECAY_TO_ACT
    assert row["statistic"].startswith(f"not exercised: lr·wd·steps = {mean_lr:.2e} · 0.1 · {steps} = ")
    assert claims.claims({"table": synthetic_table(True)}, {}, default_settings)[0]["verdict"] == "reproduced"


def test_outlier_prone_ratio_is_reported_per_size(default_settings):
    """δ(outlier-prone) / δ(final) at each size, smallest first, each with its Fieller interval (t at the seed
    noise's dof)."""
    row = by_claim(claims.claims({"table": synthetic_table(False)}, {}, default_settings), "outlier-prone recipe")
    assert row["verdict"] == "not reproduced"  # 0.25× the final recipe's δ: the opposite of the paper
    assert row["statistic"].startswith(
        "W8A8 loss δ outlier-prone / final: N21k 0.25 [0.19, 0.31]; N40k 0.25 [0.19, 0.31]"
    )
    assert "mean δ difference = -1.50e-03 nats" in row["statistic"]


def test_ratio_interval_is_fiellers():
    assert claims.ratio_interval(2.0, 0.0, 1.0, 0.0) == pytest.approx((2.0, 2.0))
    a, var_a, b, var_b = 2.0, 0.04, 4.0, 0.09
    low, high = claims.ratio_interval(a, var_a, b, var_b)
    grid = np.linspace(-1, 2, 300_001)  # every ratio the 95 % test does not reject, by brute force
    kept = grid[np.abs(a - grid * b) <= 1.96 * np.sqrt(var_a + grid**2 * var_b)]
    assert low == pytest.approx(kept.min(), abs=1e-5) and high == pytest.approx(kept.max(), abs=1e-5)
    assert claims.ratio_interval(1.0, 0.01, 0.1, 0.01) is None  # denominator within its noise of zero


def test_released_opt_checkpoint_is_scored_with_its_own_tokenizer(tmp_path):
    """Paper scale, offline: a local HF-format OPT directory stands in for facebook/opt-* at a revision."""
    from test_tasks import synthetic_documents
    from transformers import OPTConfig, OPTForCausalLM, PreTrainedTokenizerFast

    from qscaling.data.tokens import train_tokenizer
    from qscaling.hub import import_revision
    from qscaling.tasks import TASKS, build_tasks, held_out_documents

    documents = synthetic_documents(count=8)
    corpus_tokenizer = train_tokenizer([" ".join(d) for d in documents], 300)
    corpus_tokenizer.save(str(tmp_path / "tokenizer.json"))
    opt_tokenizer = train_tokenizer([" ".join(d) for d in documents[::-1]], 280)  # a different vocabulary
    revision = tmp_path / "opt-tiny" / "main"
    PreTrainedTokenizerFast(tokenizer_object=opt_tokenizer, eos_token="<|endoftext|>").save_pretrained(revision)
    torch.manual_seed(0)
    OPTForCausalLM(
        OPTConfig(
            vocab_size=280,
            hidden_size=16,
            num_hidden_layers=2,
            ffn_dim=32,
            num_attention_heads=2,
            word_embed_proj_dim=16,
            max_position_embeddings=64,
        )
    ).save_pretrained(revision)
    import_revision(
        str(tmp_path / "opt-tiny"), "main", tmp_path / "ckpt", run_id="hub-opt-tiny", tokens_seen=1000, size="opt-tiny"
    )
    eos = corpus_tokenizer.token_to_id("<|endoftext|>")
    val = np.array([i for d in documents for i in (*corpus_tokenizer.encode(" ".join(d)).ids, eos)], dtype=np.uint16)
    source = {"repo": str(tmp_path / "opt-tiny"), "revision": "main"}
    tokenizer, held_out = score.task_tokenizer(tmp_path / "tokenizer.json", val, source)
    assert held_out.max() < 280 and tokenizer.decode(held_out[:40].tolist()).split()[:2] == documents[0][:2]
    build_tasks(
        held_out_documents(val, corpus_tokenizer, eos),
        tmp_path / "tasks",
        items=4,
        context_words=6,
        continuation_words=2,
        seed=0,
    )
    rows, proxies, _ = score.score_checkpoint(
        tmp_path / "ckpt",
        grid.quantizations(Ahmadian2023Settings.model_construct(w8a8_weights="int8:channel", w4="int4:channel")),
        held_out,
        tokenizer=tokenizer,
        tasks=TASKS,
        task_dir=tmp_path / "tasks",
        eval_tokens=600,
        proxy_windows=2,
    )
    assert rows["method"].tolist() == ["none", "w8a8", "rtn"] and (rows["D"] == 1000).all()
    assert rows.loc[rows["method"] == "none", "delta"].item() == 0.0
    assert proxies["gain_std"].notna().all() and len(proxies) == 2  # pre-norm OPT: LayerNorm gains exist


@pytest.mark.slow
def test_smoke_dag_builds_every_ahmadian_target(smoke_run):
    names = [f"fig{n}.png" for n in (1, 2, 3, 4, 5, 10, 11)]
    names += [f"{t}.{ext}" for t in ("table_ablations", "table4", "table5") for ext in ("csv", "png")]
    for name in names:
        path = smoke_run / "figures" / "ahmadian2023" / name
        drawn = len(pd.read_csv(path)) > 0 if name.endswith(".csv") else draws_data(figure_record(path))
        assert drawn, name
    claims = pd.read_csv(smoke_run / "results" / "claims.csv")
    mine = claims[claims["study"] == "ahmadian2023"]
    assert len(mine) == 9 and set(mine["verdict"]) <= {"reproduced", "not reproduced", "inconclusive"}
    table = pd.read_parquet(smoke_run / "results" / "tables" / "ahmadian2023.parquet")
    assert {"none", "w8a8", "rtn"} == set(table["method"]) and table["mean_acc"].between(0, 1).all()
    assert table.loc[table["factor"] == "precision", "emulated"].all()  # CPU: bf16/fp16 are emulated


def test_runs_whose_degradation_spreads_within_their_noise_are_not_ranked(default_settings):
    """A rank correlation of W8A8 δs that differ by less than their noise is a correlation with noise (and flips
    with the CPU the runs were scored on): no ranking, and no ratio to a final δ within its noise."""
    quiet = synthetic_table(True)
    quiet["delta"] = 1e-4 + 1e-7 * np.arange(len(quiet))  # every run alike, well inside delta_se
    rows = claims.claims({"table": quiet}, {}, default_settings)
    for text in ("norm gains", "activation RMSE"):
        row = by_claim(rows, text)
        assert row["verdict"] == "inconclusive" and "no ranking to correlate" in row["statistic"], row
    assert (
        "Spearman"
        in by_claim(claims.claims({"table": synthetic_table(True)}, {}, default_settings), "norm gains")["statistic"]
    )
    within = synthetic_table(False)
    within.loc[within["factor"] == "recipe", "delta_se"] = 1.0
    assert (
        "the final δ is within its noise, no ratio"
        in by_claim(claims.claims({"table": within}, {}, default_settings), "outlier-prone recipe")["statistic"]
    )
