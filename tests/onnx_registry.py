"""Memoise the list of onnxscript's torchlib functions that ``torch.onnx.export(dynamo=True)`` reads.

Every call of the exporter builds its operator registry anew from that list, and building the list
parses the source of about 500 onnxscript functions: 1.2-1.5 s of each export on the test machine,
identical every time within a process. The tests export a few dozen models (tests/test_export.py,
test_serving.py, test_guarantees.py, the serving guide's examples), so the test processes and the
warm ``ltr`` server of the documentation examples (tests/warm_ltr.py) keep the first list. The graphs
are the same: the registry is built from the same functions, only not parsed again. ``ltr export``
itself is left as torch ships it.
"""

from __future__ import annotations

import functools
import importlib

#: where torch.onnx's exporter looks the list up (torch.onnx._internal._lazy_import.onnxscript_apis)
APIS = "onnxscript._framework_apis.torch_2_11"


def memoise_torchlib_ops(fill: bool = False) -> bool:
    """Replace ``get_torchlib_ops`` of :data:`APIS` by a memoised one (once); ``fill``: compute the list
    now (a fork server, so that its children inherit it). False when onnxscript or that module is absent."""
    try:
        apis = importlib.import_module(APIS)
    except ImportError:
        return False
    if not getattr(apis.get_torchlib_ops, "ltr_memoised", False):
        memoised = functools.lru_cache(maxsize=None)(apis.get_torchlib_ops)
        memoised.ltr_memoised = True
        apis.get_torchlib_ops = memoised
    if fill:
        apis.get_torchlib_ops()
    return True
