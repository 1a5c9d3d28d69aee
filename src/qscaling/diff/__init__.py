"""Compare two result trees: metric tables, fitted laws, claims verdicts and figures, with tolerances.

A result tree is a Snakemake working directory (or a `reference/<scale>` copy of one): its small outputs under
`figures/` and `results/` are compared file by file (`artifacts`), each by its kind (`tables`, `fits`, `figures`,
`values` for any other JSON), within `tolerances`; `trees` walks both trees; `cli` is `qscaling diff`.
"""
