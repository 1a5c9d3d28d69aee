"""Rule collect_claims: every study's claims checked against this run → results/claims.csv and .md.

Reads exactly the rule's named inputs: "<study>.<table>" (parquet), "<study>.fit.<name>" (fit JSON) and, where the
seed study runs, "noise" (its noise model, which every claim between separately trained runs is held to). The
studies that contribute law points also give the law comparison's claims (`qscaling.studies.law_claims`).
"""

from qscaling.worker import delegate

delegate()  # run in the warm worker of `qscaling run` when there is one

from qscaling.atomic import write_csv, write_text
from qscaling.comparison import gather
from qscaling.figures import load_figure_inputs
from qscaling.noise import ClaimNoise
from qscaling.provenance import job_context
from qscaling.studies.claims import claims_frame, render_markdown
from qscaling.studies.law_claims import comparison_claims
from qscaling.studies.registry import configured_from_params

with job_context(snakemake):
    params, named = snakemake.params, dict(snakemake.input.items())
    noise = ClaimNoise.read(named.pop("noise", None))
    rows, law_points = [], []
    for configured in params.studies:
        study, settings = configured_from_params(configured)
        prefix = f"{study.name}."
        tables, fits = load_figure_inputs(
            {
                name.removeprefix(prefix).removeprefix("fit."): path
                for name, path in named.items()
                if name.startswith(prefix)
            }
        )
        rows.extend(study.claims(tables, fits, settings, noise))
        if study.law_points:
            law_points.append(study.law_points(tables["table"], settings))
    if law_points:
        rows.extend(comparison_claims(*gather(law_points), noise))
    frame = claims_frame(rows, params.scale)
    write_csv(frame, snakemake.output.table)
    write_text(snakemake.output.rendered, render_markdown(frame))
