"""Where the workflow keeps each artifact: every rule, script and study names its paths through `Layout`.

A path holds "{run}" or "{tokens}" where a rule declares a wildcard. Outputs live under results/, logs under
logs/, timings under benchmarks/, figures under figures/ (all relative to the working directory).
"""

from dataclasses import dataclass

LEARNING_CURVES = "learning_curves"
LAW_COMPARISON = "law_comparison"  # every law fitted on every study's runs (qscaling.comparison)
PUBLIC_PREDICTIONS = "public_predictions"  # the laws' paper constants against published tables (qscaling.public)


@dataclass(frozen=True)
class Layout:
    corpus: str  # the token data's identity (`qscaling.config.Common.corpus_id`)

    def data(self, name: str) -> str:
        """A file of the token data: train.bin, val.bin, ood.bin, tokenizer.json, corpus.json."""
        return f"results/data/{self.corpus}/{name}"

    @staticmethod
    def run_dir(run: str = "{run}") -> str:
        return f"results/runs/{run}"

    @classmethod
    def run_summary(cls, run: str = "{run}") -> str:
        """A run's run.json (`qscaling.train`): its spec, checkpoints and training-loss curve."""
        return f"{cls.run_dir(run)}/run.json"

    @staticmethod
    def evaluations(run: str = "{run}") -> str:
        """Held-out loss of every checkpoint of a learning-curve run."""
        return f"results/evals/{run}/val.parquet"

    @staticmethod
    def table(study: str, name: str | None = None) -> str:
        return f"results/tables/{study}.parquet" if name is None else f"results/tables/{study}_{name}.parquet"

    @staticmethod
    def law_comparison() -> str:
        return f"results/tables/{LAW_COMPARISON}.csv"

    @staticmethod
    def public_predictions() -> str:
        return f"results/tables/{PUBLIC_PREDICTIONS}.csv"

    @staticmethod
    def fit(study: str, name: str) -> str:
        return f"results/fits/{study}/{name}.json"

    @staticmethod
    def fit_table(study: str, name: str) -> str:
        return f"results/fits/{study}/{name}.parquet"

    @staticmethod
    def scored(study: str, output: str = "table", run: str = "{run}", tokens="{tokens}") -> str:
        """One checkpoint's scoring output (as trained or post-quantized): its rows (`table`) or another
        per-checkpoint table the study's scoring writes."""
        if output == "table":
            return f"results/scores/{study}/{run}/{tokens}.parquet"
        return f"results/{study}/{output}/{run}/{tokens}.parquet"

    @staticmethod
    def scored_log(study: str, kind: str = "logs") -> str:
        """The log (`kind` "logs") or timing ("benchmarks") of one checkpoint's scoring job."""
        return f"{kind}/scores/{study}/{{run}}/{{tokens}}.{'log' if kind == 'logs' else 'tsv'}"
