"""A user's table made ready for a law's fit: read it, select rows, name its columns, pair it with baselines.

Every expression and column option refers to the file's own column names; `--map COLUMN=INPUT` then says
which of them feed which law input or the target. Rows are named by their 0-based position among the file's
data rows, so an error points at the row to look at.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from qscaling.laws.law import Law

READERS = {
    ".csv": pd.read_csv,
    ".parquet": pd.read_parquet,
    ".jsonl": lambda path: pd.read_json(path, lines=True),
    ".ndjson": lambda path: pd.read_json(path, lines=True),
}
# Rows matched to a baseline share these (model size and training tokens), where the table has them.
PAIR_KEYS = ("N", "D")


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV, parquet or JSON-lines file as a DataFrame, chosen by suffix."""
    path = Path(path)
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise ValueError(f"--table {path}: unknown suffix {path.suffix!r}; valid: {', '.join(READERS)}")
    if not path.is_file():
        raise ValueError(f"--table {path}: no such file")
    try:
        table = reader(path)
    except Exception as error:  # each reader raises its own kinds; all mean "not a table of that format"
        raise ValueError(f"--table {path}: unreadable as {path.suffix[1:]}: {_first_line(error)}") from error
    if table.empty:
        raise ValueError(f"--table {path}: no rows")
    return table


def parse_map(pairs: Sequence[str], law: Law, table: pd.DataFrame, extra_names: Sequence[str] = ()) -> dict[str, str]:
    """`COLUMN=INPUT` pairs -> {column: name}, checked against the table and the law's inputs and target."""
    names = (*law.inputs, law.target, *extra_names)
    mapping = {}
    for pair in pairs:
        column, sep, name = pair.partition("=")
        if not sep or not column or not name:
            raise ValueError(f"--map {pair!r}: expected COLUMN=INPUT, e.g. params=N")
        if column not in table.columns:
            hint = f" (the form is COLUMN=INPUT: did you mean {name}={column}?)" if name in table.columns else ""
            raise ValueError(f"--map {pair}: no column {column!r} in the table{hint}; columns: {list(table.columns)}")
        if name not in names:
            raise ValueError(f"--map {pair}: {name!r} is not an input or target of {law.name}; valid: {list(names)}")
        if name in mapping.values():
            raise ValueError(f"--map {pair}: {name!r} is already mapped from another column")
        if name in table.columns and name not in mapping:
            raise ValueError(f"--map {pair}: the table already has a column {name!r}; drop or map that one first")
        mapping[column] = name
    return mapping


def derive_column(table: pd.DataFrame, expression: str) -> pd.DataFrame:
    """The table with the column a `DataFrame.eval` assignment ("D = C / (6 * N)") computes."""
    if "=" not in expression.replace("==", ""):
        raise ValueError(f"--derive {expression!r}: expected an assignment NAME = EXPR")
    try:
        derived = table.eval(expression)
    except Exception as error:  # pandas raises SyntaxError, NameError, TypeError… for a bad expression
        raise ValueError(f"--derive {expression!r}: {_first_line(error)}") from error
    if not isinstance(derived, pd.DataFrame):
        raise ValueError(f"--derive {expression!r}: expected an assignment NAME = EXPR")
    return derived


def select_rows(table: pd.DataFrame, expression: str, option: str) -> pd.Series:
    """The boolean row mask of a `DataFrame.query` expression, with a one-line error for a bad one."""
    try:
        selected = table.query(expression)
    except Exception as error:  # pandas raises SyntaxError, NameError, TypeError, KeyError… for a bad expression
        raise ValueError(f"{option} {expression!r}: {_first_line(error)}") from error
    return table.index.isin(selected.index)


def pair_with_baselines(table: pd.DataFrame, is_baseline, loss_column: str, target: str) -> pd.DataFrame:
    """The non-baseline rows with `target` = their loss − the loss of the baseline row with the same N, D.

    Exactly one baseline per (N, D) is required: averaging several, or picking one, would be a silent choice.
    """
    keys = [key for key in PAIR_KEYS if key in table.columns]
    if not keys:
        raise ValueError(
            f"--baseline: rows are matched to baselines on {' and '.join(PAIR_KEYS)}; the table has neither"
        )
    baselines, others = table[is_baseline], table[~is_baseline]
    if baselines.empty or others.empty:
        which = "no rows" if baselines.empty else "every row"
        raise ValueError(f"--baseline selects {which}; it must select some rows and leave others to compare")
    if loss_column not in table.columns:
        raise ValueError(f"--loss-column {loss_column!r}: no such column; columns: {list(table.columns)}")
    if target in table.columns:
        raise ValueError(f"--baseline computes {target!r}, but the table already has a column {target!r}")
    repeated = baselines[baselines.duplicated(keys, keep=False)]
    if not repeated.empty:
        row = repeated.index[0]
        raise ValueError(
            f"--baseline: rows {list(repeated.index[:2])} are both baselines for {_describe(table, row, keys)}"
        )
    reference = baselines.set_index(keys)[loss_column]
    matched = pd.MultiIndex.from_frame(others[keys]) if len(keys) > 1 else pd.Index(others[keys[0]])
    missing = ~matched.isin(reference.index)
    if missing.any():
        row = others.index[np.argmax(missing)]
        raise ValueError(f"--baseline: row {row} ({_describe(table, row, keys)}) has no baseline row")
    paired = others.copy()
    paired[target] = others[loss_column].to_numpy(dtype=float) - reference.loc[matched].to_numpy(dtype=float)
    return paired


def check_rows(law: Law, table: pd.DataFrame) -> None:
    """Every input and the target present, numeric and where the law is defined; the error names the cause."""
    needed = (*law.inputs, law.target)
    missing = [name for name in needed if name not in table.columns]
    if missing:
        raise ValueError(
            f"law {law.name} needs column {missing[0]!r} (inputs {list(law.inputs)}, target {law.target!r}); "
            f"the table has {list(table.columns)} — name it with --map COLUMN={missing[0]}"
        )
    for name in needed:
        values = pd.to_numeric(table[name], errors="coerce")
        bad = values.isna()
        if bad.any():
            row = table.index[np.argmax(bad.to_numpy())]
            raise ValueError(f"column {name!r}, row {row}: {_shown(table.at[row, name])} is not a number")
        # A value beyond float64 (1e400) reads as inf; neither can be fitted, nor a prediction made at it.
        numbers = values.to_numpy(dtype=float)
        infinite = ~np.isfinite(numbers) & ~((numbers == np.inf) & (name in law.infinite_allowed))
        if infinite.any():
            row = table.index[np.argmax(infinite)]
            raise ValueError(f"column {name!r}, row {row}: {_shown(table.at[row, name])} is not a finite number")
    target = table[law.target].to_numpy(dtype=float)
    not_positive = ~np.isfinite(target) | (~(target > 0) if law.residuals == "log" else False)
    if not_positive.any():
        row = table.index[np.argmax(not_positive)]
        raise ValueError(
            f"column {law.target!r}, row {row}: {target[np.argmax(not_positive)]:g} is not finite"
            + (" and > 0 (the fit takes its log)" if law.residuals == "log" else "")
            + "; drop such rows with --where"
        )
    # Where a law takes a log or a power of an input (N^alpha, log2 G), a value outside its domain makes the
    # prediction non-finite or non-positive; the paper's constants are a parameter set known to be sensible.
    with np.errstate(all="ignore"):
        prediction = law(law.reference_params(), table)
    outside = ~(prediction > 0) | ~np.isfinite(prediction)
    if outside.any():
        row = table.index[np.argmax(outside)]
        non_positive = [name for name in law.inputs if not float(table.at[row, name]) > 0]
        if non_positive:
            name = non_positive[0]
            raise ValueError(
                f"column {name!r}, row {row}: {float(table.at[row, name]):g} is outside law {law.name}'s domain "
                "(it takes logs or powers of its inputs)"
            )
        raise ValueError(
            f"row {row} ({_describe(table, row, law.inputs)}): law {law.name} is not finite and > 0 there "
            "at its reference constants (the paper's); these inputs are outside its domain"
        )


def repeated_rows(law: Law, table: pd.DataFrame) -> list:
    """Rows whose inputs and target repeat an earlier row exactly: each still counts as a point of its own."""
    repeated = table.duplicated(subset=[*law.inputs, law.target])
    return list(table.index[repeated.to_numpy()])


def constant_inputs(law: Law, table: pd.DataFrame) -> dict[str, float]:
    """The law's inputs that take one value throughout the table -> that value."""
    return {name: float(table[name].iloc[0]) for name in law.inputs if table[name].nunique(dropna=False) == 1}


def unidentifiable(law: Law, constant: Mapping[str, float]) -> dict[str, tuple[str, ...]]:
    """Params that the table cannot pin down -> the constant inputs responsible (see Law.identified_by)."""
    return {param: inputs for param, inputs in law.identified_by.items() if all(name in constant for name in inputs)}


def absent_levels(law: Law, table: pd.DataFrame) -> dict[str, str]:
    """Per-level params (Law.levels) that the table cannot pin down -> why: no row at their level, or no row at a
    level where no such param acts (the factor 1 the others are measured against)."""
    reasons = {}
    for param, (name, value) in law.levels.items():
        column = table[name].to_numpy(dtype=float)
        own_levels = [level for input_name, level in law.levels.values() if input_name == name]
        if not np.any(column == value):
            reasons[param] = f"no row has {name} = {value:g}"
        elif np.all(np.isin(column, own_levels)):
            reasons[param] = f"no row has {name} outside {', '.join(f'{level:g}' for level in own_levels)} (factor 1)"
    return reasons


def _shown(value) -> str:
    """A cell as a user wrote it: numbers plainly (nan, inf, 1e+300), anything else quoted."""
    return f"{value:g}" if isinstance(value, (int, float, np.number)) else repr(value)


def _describe(table: pd.DataFrame, row, columns) -> str:
    return ", ".join(f"{name}={_shown(table.at[row, name])}" for name in columns)


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def held_params(law: Law, table: pd.DataFrame, constant: Mapping[str, float]) -> dict[str, tuple[str, str]]:
    """Params the table cannot pin down -> (cause, the values behind it): an input they are identified by that is
    constant (Law.identified_by), or a precision level the table lacks (Law.levels)."""
    held = {
        name: (
            f"input {' and '.join(repr(i) for i in inputs)} constant",
            f" ({', '.join(f'{i} = {constant[i]:g}' for i in inputs)})",
        )
        for name, inputs in unidentifiable(law, constant).items()
    }
    return {**{name: (cause, "") for name, cause in absent_levels(law, table).items()}, **held}
