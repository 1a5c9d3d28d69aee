rule prepare_corpus:
    output:
        train="results/data/{corpus}/train.bin",
        val="results/data/{corpus}/val.bin",
        tokenizer="results/data/{corpus}/tokenizer.json",
        summary="results/data/{corpus}/corpus.json",
    params:
        corpus=config["corpus"],
    log:
        "logs/data/{corpus}.log",
    benchmark:
        "benchmarks/data/{corpus}.tsv"
    message:
        "Fetching, splitting and tokenizing corpus {wildcards.corpus}"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/prepare_corpus.py"
