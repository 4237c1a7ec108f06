"""Sparse matrix-vector product y = A x, A in CSR (NPBench's ``spmv``; scipy.sparse does the
product in compiled code): 100,000 rows and columns, about 10 non-zeros per row."""

import numpy as np
import scipy.sparse
from timing import report

N, NNZ_PER_ROW = 100_000, 10
rng = np.random.default_rng(42)
A = scipy.sparse.random(
    N, N, density=NNZ_PER_ROW / N, format="csr", dtype=np.float64, random_state=rng
)
x = rng.random(N)


def spmv() -> np.ndarray:
    return A @ x


report(spmv)
