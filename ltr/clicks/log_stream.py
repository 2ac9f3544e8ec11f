"""Moved in ltr 0.2: the reader and its sums to :mod:`ltr.clicks.logs.stream`, the training lists from the sums to
:mod:`ltr.clicks.estimators.cells`; this stub forwards every name with a DeprecationWarning until 0.3."""

from ltr.base._moved import forward

__getattr__ = forward(__name__)
