"""Two-dimensional complex FFT of a 1024 x 1024 complex128 array (numpy.fft, pocketfft)."""

import numpy as np
from timing import report

rng = np.random.default_rng(42)
signal = rng.random((1024, 1024)) + 1j * rng.random((1024, 1024))


def fft() -> np.ndarray:
    return np.fft.fft2(signal)


report(fft)
