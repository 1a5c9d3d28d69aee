rule evaluate_run:
    input:
        summary=rules.train_run.output.summary,
        val=rules.prepare_corpus.output.val.format(corpus=CORPUS),
    output:
        table="results/evals/{run}/val.parquet",
    log:
        "logs/evaluate/{run}.log",
    benchmark:
        "benchmarks/evaluate/{run}.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        max_tokens=config["evaluation"]["max_tokens"],
        batch_size=config["evaluation"]["batch_size"],
        device=DEVICE,
    message:
        "Evaluating every checkpoint of run {wildcards.run}"
    script:
        "../scripts/evaluate_run.py"


rule collect_learning_curves:
    input:
        tables=expand(rules.evaluate_run.output.table, run=LEARNING_CURVE_RUNS),
        summaries=expand(rules.train_run.output.summary, run=LEARNING_CURVE_RUNS),
    output:
        table="results/tables/learning_curves.parquet",
    log:
        "logs/tables/learning_curves.log",
    benchmark:
        "benchmarks/tables/learning_curves.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    message:
        "Collecting the learning-curve table"
    script:
        "../scripts/collect_learning_curves.py"
