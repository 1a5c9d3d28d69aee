# Every study's jobs, made by one loop over the configured studies (qscaling.pipeline): scoring each checkpoint,
# the study's other tables, its tidy table, its fits; then every study's claims.


for study, scoring in PIPELINE.scoring.items():

    rule:
        name:
            f"score_{study}"
        input:
            **scoring.inputs,
            summary=LAYOUT.run_summary(),
        output:
            **{name: LAYOUT.scored(study, name) for name in scoring.outputs},
            table=LAYOUT.scored(study),
        log:
            LAYOUT.scored_log(study),
        benchmark:
            LAYOUT.scored_log(study, "benchmarks")
        conda:
            CONDA_ENV
        threads: 1
        resources:
            mem_mb=4000,
            runtime=60,
            gpu=GPU,
        params:
            function=scoring.function,
            settings=scoring.params,
            labels=lambda wildcards, study=study: SCORED_LABELS[(study, wildcards.run, wildcards.tokens)],
            device=DEVICE,
        message:
            f"{scoring.message} {{wildcards.run}} at {{wildcards.tokens}} tokens for {study} (gpu={{resources.gpu}})"
        script:
            "../scripts/score_checkpoint.py"


for study, study_jobs in PIPELINE.jobs.items():
    for job in study_jobs:

        rule:
            name:
                f"{study}_{job.name}"
            input:
                **job.inputs,
            output:
                **job.outputs,
            log:
                f"logs/{study}/{job.name}.log",
            benchmark:
                f"benchmarks/{study}/{job.name}.tsv"
            conda:
                CONDA_ENV
            threads: 1
            resources:
                mem_mb=2000,
                runtime=10,
            params:
                function=job.function,
                settings=job.params,
            message:
                f"{study}: {job.message}"
            script:
                "../scripts/study_job.py"


rule collect_study_table:
    input:
        rows=lambda wildcards: [
            LAYOUT.scored(e.study, "table", e.run, e.tokens) for e in PIPELINE.evaluations[wildcards.study]
        ],
    output:
        table=LAYOUT.table("{study}"),
    log:
        "logs/tables/{study}.log",
    benchmark:
        "benchmarks/tables/{study}.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    params:
        study=lambda wildcards: STUDIES[wildcards.study].params,
    message:
        "Collecting the {wildcards.study} table"
    script:
        "../scripts/collect_study_table.py"


for study, configured in STUDIES.items():
    if not PIPELINE.fits[study] and not PIPELINE.fit_tables[study]:
        continue

    rule:
        name:
            f"fit_{study}"
        input:
            **PIPELINE.fit_inputs(study),
            table=LAYOUT.table(study),
        output:
            **PIPELINE.fits[study],
            **PIPELINE.fit_tables[study],
        log:
            f"logs/fits/{study}.log",
        benchmark:
            f"benchmarks/fits/{study}.tsv"
        conda:
            CONDA_ENV
        threads: 1
        resources:
            mem_mb=2000,
            runtime=20,
        params:
            study=configured.params,
            fits=list(PIPELINE.fits[study]),
            fit_tables=list(PIPELINE.fit_tables[study]),
            fit_inputs=list(PIPELINE.fit_inputs(study)),
        message:
            f"Fitting the {study} laws"
        script:
            "../scripts/fit_study.py"


if PIPELINE.comparison_inputs:

    rule compare_laws:
        input:
            **PIPELINE.comparison_inputs,
            **PIPELINE.noise_input(),
        output:
            table=LAYOUT.law_comparison(),
        log:
            "logs/tables/law_comparison.log",
        benchmark:
            "benchmarks/tables/law_comparison.tsv"
        conda:
            CONDA_ENV
        threads: 1
        resources:
            mem_mb=2000,
            runtime=20,
        params:
            studies=[STUDIES[study].params for study in PIPELINE.comparison_inputs],
        message:
            "Fitting every law on the runs of every study"
        script:
            "../scripts/compare_laws.py"


rule predict_public_tables:
    input:
        tables=PUBLIC_TABLES,
    output:
        table=LAYOUT.public_predictions(),
    log:
        "logs/tables/public_predictions.log",
    benchmark:
        "benchmarks/tables/public_predictions.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    message:
        "Predicting the published tables of data/public from the papers' constants"
    script:
        "../scripts/predict_public_tables.py"


rule collect_claims:
    input:
        **PIPELINE.claim_inputs(),
    output:
        table=report("results/claims.csv", caption="../report/claims.rst", category="claims"),
        rendered="results/claims.md",
    log:
        "logs/claims.log",
    benchmark:
        "benchmarks/claims.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    params:
        studies=[configured.params for configured in STUDIES.values()],
        scale=CONFIG.scale,
    message:
        "Checking every claim against this run"
    script:
        "../scripts/collect_claims.py"
