"""numba-cuda's ``cuda`` module, as every numba-cuda kernel of the suite imports it.

numba-cuda 0.30 registers its implementation of ``numpy.row_stack`` when it types its first kernel
(``numba.cuda.np.arrayobj``), and NumPy 2.5 no longer has that name, an alias of ``numpy.vstack`` deprecated since
NumPy 2.0: with NumPy 2.5 numba-cuda compiles no kernel at all ("module 'numpy' has no attribute 'row_stack'"). Where
NumPy lacks it, the alias is put back, naming the function it always named, before numba-cuda is imported; no kernel
here calls it.
"""

import numpy

if not hasattr(numpy, "row_stack"):
    numpy.row_stack = numpy.vstack

from numba import cuda  # after the alias, which numba-cuda reads

__all__ = ["cuda"]
