"""Every bad input the command line can be given ends in one line on stderr naming its cause, exit status 2, and
nothing written: no traceback, no half-made output."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from qscaling.checkpoint import save_checkpoint
from qscaling.cli import main
from qscaling.laws import LAWS
from qscaling.model import ModelShape, build_model

SMALL_VOCAB = ModelShape(d_model=16, n_layers=1, n_heads=2, d_ff=32, vocab_size=300, seq_len=16)
TOKEN_VOCAB = 64


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Files the bad calls point at: a checkpoint, token shards, law tables, config files, a plain file."""
    root = tmp_path_factory.mktemp("cli_inputs")
    save_checkpoint(build_model(SMALL_VOCAB, seed=0), root / "ckpt", {"run_id": "tiny", "tokens_seen": 0})
    rng = np.random.default_rng(0)
    rng.integers(0, TOKEN_VOCAB, size=4000).astype(np.uint16).tofile(root / "tokens.bin")
    np.full(4000, 400, dtype=np.uint16).tofile(root / "foreign.bin")  # ids beyond the model's 300
    (root / "odd.bin").write_bytes(b"\x00\x01\x02")
    law = LAWS["chinchilla"]
    grid = pd.DataFrame({"N": np.repeat([1e4, 3e4, 1e5], 3), "D": np.tile([1e6, 3e6, 1e7], 3)})
    grid["loss"] = law(law.default_paper_params(), grid)
    grid.to_csv(root / "good.csv", index=False)
    for name, column, value in [("inf_d", "D", "inf"), ("huge_d", "D", "1e400"), ("nan_loss", "loss", "nan"),
                                ("huge_loss", "loss", "1e300")]:  # fmt: skip
        table = grid.astype(object)
        table.loc[4, column] = value
        table.to_csv(root / f"{name}.csv", index=False)
    (root / "a_file").write_text("not a folder\n")
    (root / "broken.yaml").write_text("studies:\n  ladder: [unclosed\n")
    (root / "unknown_study.yaml").write_text("studies:\n  nosuch2099: {sizes: [N21k]}\n")
    (root / "bad_key.yaml").write_text("training:\n  lrr: 0.1\n")
    (root / "list.yaml").write_text("- a\n- b\n")
    return root


CASES = [
    # laws fit
    ("laws fit nosuchlaw --table {r}/good.csv --out {out}/fit.json", "law 'nosuchlaw' unknown"),
    ("laws fit chinchilla --table {r}/missing.csv --out {out}/fit.json", "missing.csv: no such file"),
    ("laws fit chinchilla --table {r}/good.xlsx --out {out}/fit.json", "unknown suffix"),
    ("laws fit chinchilla --table {r}/inf_d.csv --out {out}/fit.json", "column 'D', row 4: inf is not a finite"),
    ("laws fit chinchilla --table {r}/huge_d.csv --out {out}/fit.json", "column 'D', row 4: inf is not a finite"),
    ("laws fit chinchilla --table {r}/nan_loss.csv --out {out}/fit.json", "column 'loss', row 4: nan is not a"),
    ("laws fit chinchilla --table {r}/huge_loss.csv --bootstrap 0 --out {out}/fit.json", "not finite"),
    ("laws fit chinchilla --table {r}/good.csv --out {r}/a_file/fit.json", "a_file is a file, not a folder"),
    ("laws fit chinchilla --table {r}/good.csv --plot {r}/a_file/p.png --out {out}/fit.json", "--plot"),
    ("laws fit chinchilla --table {r}/good.csv --plot {out}/p.gif --out {out}/fit.json", "expected a .png"),
    ("laws fit chinchilla --table {r}/good.csv --map N --out {out}/fit.json", "expected COLUMN=INPUT"),
    ("laws fit chinchilla --table {r}/good.csv --where N>> --out {out}/fit.json", "--where"),
    ("laws fit chinchilla --table {r}/good.csv --bootstrap -1 --out {out}/fit.json", "--bootstrap must be >= 0"),
    ("laws fit chinchilla --table {r}/good.csv --starts 3 --out {out}/fit.json", "--starts must be a power of 2"),
    ("laws fit chinchilla --table {r}/good.csv --variant nope --out {out}/fit.json", "--variant 'nope' unknown"),
    ("laws fit chinchilla --table {r}/good.csv", "the following arguments are required: --out"),
    ("laws show nosuchlaw", "law 'nosuchlaw' unknown"),
    ("laws show chinchilla --params {r}/missing.json", "missing.json"),
    # predict
    ("predict --N -1B --D 1e10", "--N: expected a positive count"),
    ("predict --N abc --D 1e10", "--N: expected a positive count"),
    ("predict --N 1e9 --D 0", "--D: expected a positive count"),
    ("predict --N 1e9 --D 1e10 --ptq gptq:int9:g128", "bits must be 2..8"),
    ("predict --N 1e9 --D 1e10 --ptq int4:g128", "expected METHOD:SPEC"),
    ("predict --N 1e9 --D 1e10 --train fp:e9m9", "--train"),
    ("predict --N 1e9 --D 1e10 --fit {r}/missing.json", "--fit"),
    ("predict --N 1e9 --D 1e10 --resamples -1", "--resamples: expected a count >= 0"),
    ("predict --N 1e9", "the following arguments are required: --D"),
    # quantize
    ("quantize {r}/ckpt/config.json --method rtn --spec int4:g8 --out {out}/q", "a file; a checkpoint is its folder"),
    ("quantize {r}/nockpt --method rtn --spec int4:g8 --out {out}/q", "checkpoint"),
    ("quantize {r}/ckpt --method nope --spec int4:g8 --out {out}/q", "invalid choice: 'nope'"),
    ("quantize {r}/ckpt --method rtn --spec int9:g8 --out {out}/q", "bits must be 2..8"),
    ("quantize {r}/ckpt --method gptq --spec int4:g8 --out {out}/q", "--calib: method 'gptq' needs"),
    ("quantize {r}/ckpt --method gptq --spec int4:g8 --calib {r}/foreign.bin --out {out}/q", "token id 400 >= model"),
    ("quantize {r}/ckpt --method rtn --spec int4:g8 --out {r}/a_file/q", "a_file"),
    # evaluate
    ("evaluate {r}/nockpt --data {r}/tokens.bin", "checkpoint"),
    ("evaluate {r}/ckpt --data {r}/missing.bin", "token shard"),
    ("evaluate {r}/ckpt --data {r}/odd.bin", "odd byte count"),
    ("evaluate {r}/ckpt --data {r}/foreign.bin --out {out}/rows.parquet", "token id 400 >= model vocab_size 300"),
    # plan
    ("plan --scale huge", "config key scale: 'huge' is not a preset"),
    ("plan --configfile {r}/broken.yaml", "broken.yaml:3:1: invalid YAML"),
    ("plan --configfile {r}/missing.yaml", "missing.yaml"),
    ("plan --configfile {r}/unknown_study.yaml", "config key studies.nosuch2099: not a built-in study"),
    ("plan --configfile {r}/bad_key.yaml", "config key training.lrr: unknown key"),
    ("plan --configfile {r}/list.yaml", "expected a mapping"),
    # diff
    ("diff {r}/norun {r}/norun2", "norun"),
    ("diff {r} {r} --tolerances {r}/missing.yaml", "missing.yaml"),
    ("diff {r} {r} --column loss", "loss"),
    # trace
    ("trace {r}/good.csv --root {r}", "good.csv"),
    ("trace figures/x.png --root {r}/a_file", "a_file"),
    # the command itself
    ("nosuchcommand", "invalid choice: 'nosuchcommand'"),
]


@pytest.mark.parametrize("command, cause", CASES, ids=[c for c, _ in CASES])
def test_a_bad_input_gets_one_line_exit_2_and_writes_nothing(inputs, tmp_path, capsys, command, cause):
    out = tmp_path / "out"
    argv = command.format(r=inputs, out=out).split()
    with pytest.raises(SystemExit) as exited:
        raise SystemExit(main(argv))
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert exited.value.code == 2, captured.err
    assert len(lines) == 1 and lines[0].startswith("qscaling"), captured.err
    assert cause in lines[0]
    assert not out.exists() or not any(out.iterdir())
    assert sorted(p.name for p in inputs.iterdir() if not p.name.startswith(".")) == sorted(
        ["ckpt", "tokens.bin", "foreign.bin", "odd.bin", "good.csv", "inf_d.csv", "huge_d.csv", "nan_loss.csv",
         "huge_loss.csv", "a_file", "broken.yaml", "unknown_study.yaml", "bad_key.yaml", "list.yaml"]
    )  # fmt: skip


def test_a_repeated_row_is_a_warning_and_the_fit_still_made(inputs, tmp_path, capsys):
    table = pd.read_csv(inputs / "good.csv")
    pd.concat([table, table.iloc[:2]]).to_csv(tmp_path / "repeated.csv", index=False)
    code = main(["laws", "fit", "chinchilla", "--table", str(tmp_path / "repeated.csv"), "--bootstrap", "0",
                 "--out", str(tmp_path / "fit.json")])  # fmt: skip
    assert code == 0 and (tmp_path / "fit.json").is_file()
    assert "warning: 2 row(s) repeat an earlier row exactly (rows 9, 10)" in capsys.readouterr().err


def test_a_closed_pipe_ends_the_command_quietly():
    """`qscaling … | head`: the reader leaves before the output is written; no traceback, exit 0."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to the pipe now fails as a reader's exit makes it fail
    command = [sys.executable, "-m", "qscaling.cli", "laws", "list"]
    result = subprocess.run(command, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write_end)
    assert result.returncode == 0 and result.stderr == ""


def test_plan_merges_a_configfile_over_the_embedded_config_as_snakemake_does(tmp_path, capsys):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("studies:\n  ladder:\n    bootstrap: 5\n")  # one key of one study: the rest stays
    assert main(["plan", "--scale", "smoke", "--configfile", str(overlay)]) == 0
    assert capsys.readouterr().out.startswith("smoke: ")
