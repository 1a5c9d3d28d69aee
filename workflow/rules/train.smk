rule train_run:
    input:
        train=rules.prepare_corpus.output.train.format(corpus=CORPUS),
        trunk=get_trunk_inputs,
    output:
        summary="results/runs/{run}/run.json",
    params:
        spec=lambda wildcards: RUNS[wildcards.run].spec.to_dict(),
        milestones=lambda wildcards: sorted(RUNS[wildcards.run].milestones),
        branch_points=lambda wildcards: sorted(RUNS[wildcards.run].branch_points),
        state_every_steps=config["training"]["state_every_steps"],
        device=DEVICE,
    log:
        "logs/train/{run}.log",
    benchmark:
        "benchmarks/train/{run}.tsv"
    message:
        "Training run {wildcards.run}"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=240,
    script:
        "../scripts/train_run.py"
