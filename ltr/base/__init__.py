"""What every part of ltr uses, one floor below all of them (as scikit-learn's ``utils``).

- :mod:`ltr.base.errors`    the toolkit's exceptions (:class:`~ltr.base.errors.LtrError` and its kinds)
- :mod:`ltr.base.checks`    input checks that name the option or file and what was wrong
- :mod:`ltr.base.io_utils`  atomic writes, strict JSON, the overwrite rule
- :mod:`ltr.base.threads`   the thread budget (``LTR_THREADS``) for torch, BLAS and OpenMP
- :mod:`ltr.base.collector` the garbage collector's full passes, spaced while the libraries load
- :mod:`ltr.base.processes` the start method of worker processes (a forkserver that imported torch once)
- :mod:`ltr.base.figures`   figure margins in inches (layouts known in advance, without tight_layout's pass)
- :mod:`ltr.base._lazy`     lazy re-exports of a package's names (PEP 562)
- :mod:`ltr.base._moved`    stubs that forward moved names with a DeprecationWarning

Nothing is imported here, so that ``import ltr.base.errors`` stays as cheap as the module itself.
"""
