"""Moved to :mod:`ltr.clicks.logs.table` in ltr 0.2; this stub forwards every name with a DeprecationWarning until 0.3."""

from ltr.base._moved import forward

__getattr__ = forward(__name__)
