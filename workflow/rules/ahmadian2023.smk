# Ahmadian et al. 2023: zero-shot-style tasks from the held-out set, per-checkpoint scoring (loss, task accuracy,
# outlier proxies; unquantized, W8A8, W4), the proxy tables, and the study's figures and tables.
from qscaling.studies.ahmadian2023 import final_tokens, variant_labels
from qscaling.studies.ahmadian2023 import quantizations as ahmadian_quantizations
from qscaling.tasks import TASKS as AHMADIAN_TASKS

AHMADIAN = config["studies"]["ahmadian2023"]
# run id -> the variants (factor, level, …) it trained; a run shared by several variants is scored once.
AHMADIAN_LABELS = {run: labels.to_dict("records") for run, labels in variant_labels(config, CORPUS).groupby("run")}
AHMADIAN_FIGURES = ["fig1", "fig2", "fig3", "fig4", "fig5", "fig10", "fig11"]
AHMADIAN_TABLES = ["table_ablations", "table4", "table5"]
AHMADIAN_TARGETS = [f"figures/ahmadian2023/{name}.png" for name in AHMADIAN_FIGURES] + [
    f"figures/ahmadian2023/{name}.{ext}" for name in AHMADIAN_TABLES for ext in ("csv", "png")
]


# This study's checkpoints are scored by ahmadian2023_score (tasks and proxies too), not the generic PTQ rule.
ruleorder: ahmadian2023_score > evaluate_ptq


def get_ahmadian_outputs(kind):
    return [f"results/ahmadian2023/{kind}/{e.run}/{e.tokens}.parquet" for e in EVALUATIONS["ahmadian2023"]]


rule ahmadian2023_build_tasks:
    input:
        val=rules.prepare_corpus.output.val.format(corpus=CORPUS),
        tokenizer=rules.prepare_corpus.output.tokenizer.format(corpus=CORPUS),
        corpus=rules.prepare_corpus.output.summary.format(corpus=CORPUS),
    output:
        expand(
            "results/ahmadian2023/tasks/{task}.{ext}",
            task=AHMADIAN_TASKS,
            ext=("yaml", "jsonl"),
        ),
    log:
        "logs/ahmadian2023/build_tasks.log",
    benchmark:
        "benchmarks/ahmadian2023/build_tasks.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    params:
        tasks=AHMADIAN["tasks"],
    message:
        "Building zero-shot-style tasks from the held-out set of corpus {CORPUS}"
    script:
        "../scripts/ahmadian_build_tasks.py"


rule ahmadian2023_score:
    input:
        summary="results/runs/{run}/run.json",
        val=rules.prepare_corpus.output.val.format(corpus=CORPUS),
        tokenizer=rules.prepare_corpus.output.tokenizer.format(corpus=CORPUS),
        tasks=rules.ahmadian2023_build_tasks.output,
    output:
        table="results/ptq/ahmadian2023/{run}/{tokens}.parquet",
        proxies="results/ahmadian2023/proxies/{run}/{tokens}.parquet",
        values="results/ahmadian2023/values/{run}/{tokens}.parquet",
    log:
        "logs/ahmadian2023/score/{run}/{tokens}.log",
    benchmark:
        "benchmarks/ahmadian2023/score/{run}/{tokens}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=lambda wildcards: 1 if DEVICE == "cuda" else 0,
    params:
        quantizations=[q.__dict__ for q in ahmadian_quantizations(config)],
        labels=lambda wildcards: AHMADIAN_LABELS[wildcards.run],
        final_tokens=final_tokens(config),
        tasks=AHMADIAN["hub_tasks"] if AHMADIAN["source"] == "hub" else list(AHMADIAN_TASKS),
        eval_tokens=AHMADIAN["eval_tokens"],
        proxy_windows=AHMADIAN["proxy_windows"],
        batch_size=config["evaluation"]["batch_size"],
        task_batch_size=AHMADIAN["tasks"]["batch_size"],
        device=DEVICE,
    message:
        "Scoring {wildcards.run} at {wildcards.tokens} tokens: loss, tasks and proxies, unquantized / W8A8 / W4"
    script:
        "../scripts/ahmadian_score.py"


rule ahmadian2023_collect_proxies:
    input:
        proxies=get_ahmadian_outputs("proxies"),
        values=get_ahmadian_outputs("values"),
    output:
        proxies="results/tables/ahmadian2023_proxies.parquet",
        values="results/tables/ahmadian2023_values.parquet",
    log:
        "logs/tables/ahmadian2023_proxies.log",
    benchmark:
        "benchmarks/tables/ahmadian2023_proxies.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    message:
        "Collecting the ahmadian2023 proxy and weight tables"
    script:
        "../scripts/ahmadian_collect.py"


AHMADIAN_INPUTS = {
    "evals": study_table("ahmadian2023"),
    "proxies": rules.ahmadian2023_collect_proxies.output.proxies,
    "values": rules.ahmadian2023_collect_proxies.output.values,
}

for figure in AHMADIAN_FIGURES:

    rule:
        name:
            f"ahmadian2023_{figure}"
        input:
            **AHMADIAN_INPUTS,
        output:
            report(
                f"figures/ahmadian2023/{figure}.png",
                caption=f"../report/ahmadian2023_{figure}.rst",
                category="ahmadian2023",
            ),
        log:
            f"logs/figures/ahmadian2023/{figure}.log",
        benchmark:
            f"benchmarks/figures/ahmadian2023/{figure}.tsv"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=5,
        params:
            function=f"qscaling.figures.ahmadian2023:{figure}",
        message:
            f"Rendering ahmadian2023_{figure}"
        script:
            "../scripts/render_figure.py"


for table in AHMADIAN_TABLES:

    rule:
        name:
            f"ahmadian2023_{table}"
        input:
            **AHMADIAN_INPUTS,
        output:
            csv=report(
                f"figures/ahmadian2023/{table}.csv",
                caption=f"../report/ahmadian2023_{table}.rst",
                category="ahmadian2023",
            ),
            png=report(
                f"figures/ahmadian2023/{table}.png",
                caption=f"../report/ahmadian2023_{table}.rst",
                category="ahmadian2023",
            ),
        log:
            f"logs/figures/ahmadian2023/{table}.log",
        benchmark:
            f"benchmarks/figures/ahmadian2023/{table}.tsv"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=5,
        params:
            table=f"qscaling.figures.ahmadian2023:{table}_frame",
            function=f"qscaling.figures.ahmadian2023:{table}",
        message:
            f"Rendering ahmadian2023_{table}"
        script:
            "../scripts/law_table.py"
