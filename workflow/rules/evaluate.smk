rule evaluate_run:
    input:
        summary=rules.train_run.output.summary,
        val=rules.prepare_corpus.output.val,
    output:
        table=LAYOUT.evaluations(),
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
        max_tokens=CONFIG.evaluation.max_tokens,
        batch_size=CONFIG.evaluation.batch_size,
        device=DEVICE,
    message:
        "Evaluating every checkpoint of run {wildcards.run}"
    script:
        "../scripts/evaluate_run.py"


rule collect_learning_curves:
    input:
        tables=expand(rules.evaluate_run.output.table, run=PIPELINE.learning_curve_runs),
        summaries=expand(rules.train_run.output.summary, run=PIPELINE.learning_curve_runs),
    output:
        table=LAYOUT.table("learning_curves"),
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
