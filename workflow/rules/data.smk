rule prepare_corpus:
    output:
        train=LAYOUT.data("train.bin"),
        val=LAYOUT.data("val.bin"),
        tokenizer=LAYOUT.data("tokenizer.json"),
        summary=LAYOUT.data("corpus.json"),
    log:
        f"logs/data/{CORPUS}.log",
    benchmark:
        f"benchmarks/data/{CORPUS}.tsv"
    conda:
        CONDA_ENV
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        corpus=CONFIG.corpus.model_dump(mode="json", exclude_unset=True),
    message:
        f"Fetching, splitting and tokenizing corpus {CORPUS}"
    script:
        "../scripts/prepare_corpus.py"


rule prepare_ood_set:
    input:
        tokenizer=rules.prepare_corpus.output.tokenizer,
    output:
        ood=LAYOUT.data("ood.bin"),
    log:
        f"logs/data/{CORPUS}.ood.log",
    benchmark:
        f"benchmarks/data/{CORPUS}.ood.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        source=CONFIG.evaluation.ood_source,
        document_chars=CONFIG.corpus.document_chars,
    message:
        f"Tokenizing the out-of-domain held-out set ({{params.source}}) with corpus {CORPUS}'s tokenizer"
    script:
        "../scripts/prepare_ood_set.py"
