rule train_run:
    input:
        train=rules.prepare_corpus.output.train,
        trunk=get_trunk_inputs,
    output:
        summary=LAYOUT.run_summary(),
    log:
        "logs/train/{run}.log",
    benchmark:
        "benchmarks/train/{run}.tsv"
    wildcard_constraints:
        run="|".join(RUNS),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=240,
        gpu=GPU,
    params:
        spec=lambda wildcards: RUNS[wildcards.run].spec.to_dict(),
        milestones=lambda wildcards: sorted(RUNS[wildcards.run].milestones),
        branch_points=lambda wildcards: sorted(RUNS[wildcards.run].branch_points),
        state_every_steps=CONFIG.training.state_every_steps,
        device=DEVICE,
    message:
        "Training run {wildcards.run} (gpu={resources.gpu})"
    script:
        "../scripts/train_run.py"


rule import_hub_run:
    output:
        summary=LAYOUT.run_summary(),
    log:
        "logs/train/{run}.log",
    benchmark:
        "benchmarks/train/{run}.tsv"
    wildcard_constraints:
        run="|".join(HUB_RUNS) or "NO_HUB_RUNS",
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=16000,
        runtime=120,
    params:
        repo=lambda wildcards: HUB_RUNS[wildcards.run].repo,
        size=lambda wildcards: HUB_RUNS[wildcards.run].size,
        revisions=lambda wildcards: HUB_RUNS[wildcards.run].revisions,
    message:
        "Importing released checkpoints of {params.repo} as run {wildcards.run}"
    script:
        "../scripts/import_hub_run.py"
