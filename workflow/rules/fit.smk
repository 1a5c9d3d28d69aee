rule collect_study_table:
    input:
        get_study_evaluations,
    output:
        table="results/tables/{study}.parquet",
    log:
        "logs/tables/{study}.log",
    benchmark:
        "benchmarks/tables/{study}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    message:
        "Collecting the {wildcards.study} table"
    script:
        "../scripts/collect_study_table.py"


rule fit_kumar2024:
    input:
        table=study_table("kumar2024"),
    output:
        **study_fits("kumar2024"),
    log:
        "logs/fits/kumar2024.log",
    benchmark:
        "benchmarks/fits/kumar2024.tsv"
    threads: 2
    resources:
        mem_mb=2000,
        runtime=20,
    message:
        "Fitting the kumar2024 laws"
    script:
        "../scripts/fit_study.py"


rule fit_ouyang2024:
    input:
        table=study_table("ouyang2024"),
    output:
        **study_fits("ouyang2024"),
        one_factor="results/fits/ouyang2024/one_factor.parquet",
    log:
        "logs/fits/ouyang2024.log",
    benchmark:
        "benchmarks/fits/ouyang2024.tsv"
    threads: 2
    resources:
        mem_mb=2000,
        runtime=20,
    message:
        "Fitting the ouyang2024 laws"
    script:
        "../scripts/fit_study.py"


rule ouyang2024_weight_changes:
    input:
        summaries=lambda wildcards: [
            f"results/runs/{run}/run.json" for run in sorted({e.run for e in EVALUATIONS["ouyang2024"]})
        ],
    output:
        table="results/tables/ouyang2024_weight_changes.parquet",
    log:
        "logs/tables/ouyang2024_weight_changes.log",
    benchmark:
        "benchmarks/tables/ouyang2024_weight_changes.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    params:
        milestones=lambda wildcards: sorted({e.tokens for e in EVALUATIONS["ouyang2024"]}),
    message:
        "Measuring weight change between adjacent checkpoints"
    script:
        "../scripts/weight_changes.py"


rule collect_claims:
    input:
        tables=[study_table(study) for study in STUDIES],
        fits=[path for study in STUDIES for path in study_fits(study).values()],
        weight_changes=rules.ouyang2024_weight_changes.output.table,
    output:
        table=report("results/claims.csv", caption="../report/claims.rst", category="claims"),
        rendered="results/claims.md",
    log:
        "logs/claims.log",
    benchmark:
        "benchmarks/claims.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    message:
        "Checking every claim against this run"
    script:
        "../scripts/collect_claims.py"
