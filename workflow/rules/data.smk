rule prepare_corpus:
    output:
        train="results/data/{corpus}/train.bin",
        val="results/data/{corpus}/val.bin",
        tokenizer="results/data/{corpus}/tokenizer.json",
        summary="results/data/{corpus}/corpus.json",
    log:
        "logs/data/{corpus}.log",
    benchmark:
        "benchmarks/data/{corpus}.tsv"
    conda:
        CONDA_ENV
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        corpus=config["corpus"],
    message:
        "Fetching, splitting and tokenizing corpus {wildcards.corpus}"
    script:
        "../scripts/prepare_corpus.py"


rule prepare_ood_set:
    input:
        tokenizer=rules.prepare_corpus.output.tokenizer,
    output:
        ood="results/data/{corpus}/ood.bin",
    log:
        "logs/data/{corpus}.ood.log",
    benchmark:
        "benchmarks/data/{corpus}.ood.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        source=config["evaluation"]["ood_source"],
        document_chars=config["corpus"]["document_chars"],
    message:
        "Tokenizing the out-of-domain held-out set ({params.source}) with corpus {wildcards.corpus}'s tokenizer"
    script:
        "../scripts/prepare_ood_set.py"
