# Every study's jobs, made by one loop over the configured studies (qscaling.studies): scoring each checkpoint,
# the study's other tables, its tidy table, its fits; then every study's claims.


for study, scoring in SCORING.items():

    rule:
        name:
            f"score_{study}"
        input:
            **scoring.inputs,
            summary="results/runs/{run}/run.json",
        output:
            **{name: LAYOUT.scored(study, name) for name in scoring.outputs},
            table=LAYOUT.scored(study),
        log:
            f"logs/ptq/{study}/{{run}}/{{tokens}}.log",
        benchmark:
            f"benchmarks/ptq/{study}/{{run}}/{{tokens}}.tsv"
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


for study, study_jobs in STUDY_JOBS.items():
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
        rows=lambda wildcards: [LAYOUT.scored(e.study, "table", e.run, e.tokens) for e in EVALUATIONS[wildcards.study]],
    output:
        table="results/tables/{study}.parquet",
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
        module=lambda wildcards: STUDIES[wildcards.study].__name__,
        settings=lambda wildcards: settings(config, wildcards.study),
    message:
        "Collecting the {wildcards.study} table"
    script:
        "../scripts/collect_study_table.py"


for study, module in STUDIES.items():
    if not STUDY_FITS[study] and not FIT_TABLES[study]:
        continue

    rule:
        name:
            f"fit_{study}"
        input:
            **FIT_INPUTS[study],
            table=ARTIFACTS[study],
        output:
            **STUDY_FITS[study],
            **FIT_TABLES[study],
        log:
            f"logs/fits/{study}.log",
        benchmark:
            f"benchmarks/fits/{study}.tsv"
        conda:
            CONDA_ENV
        threads: 2
        resources:
            mem_mb=2000,
            runtime=20,
        params:
            module=module.__name__,
            fits=list(STUDY_FITS[study]),
            fit_tables=list(FIT_TABLES[study]),
            fit_inputs=list(FIT_INPUTS[study]),
            settings=settings(config, study),
        message:
            f"Fitting the {study} laws"
        script:
            "../scripts/fit_study.py"


# Named inputs "<study>.<table>" and "<study>.fit.<name>": the claims script reads exactly these files.
CLAIM_INPUTS = {
    **{f"{study}.{name}": path for study, named in STUDY_ARTIFACTS.items() for name, path in named.items()},
    **{f"{study}.fit.{name}": path for study, fits in STUDY_FITS.items() for name, path in fits.items()},
}


rule collect_claims:
    input:
        **CLAIM_INPUTS,
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
        studies={study: module.__name__ for study, module in STUDIES.items()},
        settings={study: settings(config, study) for study in STUDIES},
        scale=config["scale"],
    message:
        "Checking every claim against this run"
    script:
        "../scripts/collect_claims.py"
