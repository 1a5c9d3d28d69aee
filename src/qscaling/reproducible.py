"""Reproducible CPU mode: the environment under which a run gives the same bytes on any x86-64 machine with AVX2.

Float results follow the code path each library picks for the CPU it finds: MKL's GEMM kernels (AVX-512 on one
machine, AVX2 or SSE on another), torch's vectorised ATen kernels, numpy's SIMD loops and OpenBLAS's kernels
(the fits' linear algebra). A training run amplifies a last-bit difference into a loss that moves by ~1e-4, and
at small scale several fitted laws are not identified, so their parameters then land elsewhere (measured:
Sun et al.'s smoke exponent fit, α 0.80 vs 0.25; one Ouyang δ crossing its 2-SE selection). No tolerance both
absorbs that and still catches a real change, so the committed reference (`reference/regenerate.sh`) and the
suite's runs compared with it pin every path:

  MKL_CBWR=COMPATIBLE         MKL's conditional numerical reproducibility: one GEMM code path on every CPU
  ATEN_CPU_CAPABILITY=default torch's non-vectorised ATen kernels (and Inductor's scalar C++)
  NPY_DISABLE_CPU_FEATURES    numpy's AVX-512 loops off, so AVX-512 and AVX2 machines take the same (AVX2) ones
  OPENBLAS_CORETYPE=Haswell   OpenBLAS's AVX2 kernels, whatever core it detects

Results are then the same for the same thread count (every job sets torch's from its Snakemake `threads`, so use
the same `--cores`). The mode costs little at smoke scale (the smoke DAG's job time was 1,081 s against 1,414 s
native, measured one after the other on a 2-core AMD EPYC, the native one sharing the cores); on a real budget
it gives up the vector units, so it is for references and cross-machine diffs, not for production runs.

    eval "$(python -m qscaling.reproducible)"    # export the variables into a shell
"""

import shlex

REPRODUCIBLE_CPU_ENV = {
    "MKL_CBWR": "COMPATIBLE",
    "ATEN_CPU_CAPABILITY": "default",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
    "OPENBLAS_CORETYPE": "Haswell",
}


def shell_exports() -> str:
    return "\n".join(f"export {name}={shlex.quote(value)}" for name, value in REPRODUCIBLE_CPU_ENV.items())


if __name__ == "__main__":
    print(shell_exports())
