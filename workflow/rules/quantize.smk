rule evaluate_ptq:
    input:
        unpack(get_held_out),
        summary=rules.train_run.output.summary,
        calibration=rules.prepare_corpus.output.train.format(corpus=CORPUS),
    output:
        table="results/ptq/{study}/{run}/{tokens}.parquet",
    log:
        "logs/ptq/{study}/{run}/{tokens}.log",
    benchmark:
        "benchmarks/ptq/{study}/{run}/{tokens}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=lambda wildcards: 1 if DEVICE == "cuda" else 0,
    params:
        quantizations=lambda wildcards: [q.__dict__ for q in STUDIES[wildcards.study].quantizations(config)],
        calibration=lambda wildcards: config["studies"][wildcards.study]["calibration"],
        eval_tokens=lambda wildcards: config["studies"][wildcards.study]["eval_tokens"],
        batch_size=config["evaluation"]["batch_size"],
        gptq_damp=config["ptq"]["gptq_damp"],
        device=DEVICE,
    message:
        "Quantizing and scoring {wildcards.run} at {wildcards.tokens} tokens for {wildcards.study} (gpu={resources.gpu})"
    script:
        "../scripts/evaluate_ptq.py"
