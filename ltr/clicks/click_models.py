"""Moved in ltr 0.2: the simulator to :mod:`ltr.clicks.simulate.click_models`, the log type and its modes to
:mod:`ltr.clicks.logs.click_log`; this stub forwards every name with a DeprecationWarning until 0.3."""

from ltr.base._moved import forward

__getattr__ = forward(__name__)
