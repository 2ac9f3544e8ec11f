"""``ltr export``: a trained neural scorer as an ONNX or TorchScript file for serving.

The graph takes raw features ``[B, L, F]`` and a mask ``[B, L]`` and returns scores ``[B, L]``; the
feature normalisation is inside it and both B and L are dynamic (:mod:`ltr.models.export`).
"""

from __future__ import annotations

import json
from pathlib import Path

from ltr.commands import add_force_option
from ltr.errors import LtrError

FORMATS = ("onnx", "torchscript")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        help="export a trained neural scorer to ONNX or TorchScript for serving",
        description="Write the model of a run folder from `ltr train` as ONNX (for onnxruntime and other ONNX "
        "runtimes) or TorchScript (torch.jit.load). Inputs: features [B, L, F] float32 (raw, as in the data "
        "file) and mask [B, L] bool; output: scores [B, L] (0 on padding). The normalisation fitted on the "
        "training split is inside the graph; batch and list length are dynamic. The file is checked against "
        "the trained model before it is written.",
    )
    p.add_argument("--model", required=True, metavar="DIR", help="run folder holding model.json + model.pt (from ltr train)")
    p.add_argument("--format", required=True, choices=FORMATS, help="onnx or torchscript")
    p.add_argument("--out", required=True, metavar="FILE", help="file to write (e.g. model.onnx, model.pt)")
    add_force_option(p, "--out")
    p.set_defaults(func=run)


def run(args) -> int:
    from ltr.checks import input_folder, output_file
    from ltr.models.export import export_model
    from ltr.train.models import load_model

    folder = input_folder(args.model, "--model")  # missing, a file, unreadable: said so
    # never over or into the model's folder, nor over an existing file without --force
    output_file(args.out, "--out", inputs=[("--model", args.model)], force=args.force)
    try:
        meta = json.loads((folder / "model.json").read_text())
    except FileNotFoundError:
        if (folder / "blend.json").exists():
            raise LtrError(f"--model {folder}: is a blend (ltr blend), which export does not write; export its "
                           "neural members one by one") from None
        raise LtrError(f"--model {folder}: no model.json (not a run folder written by ltr train)") from None
    except json.JSONDecodeError as exc:
        raise LtrError(f"{folder / 'model.json'}: invalid JSON: {exc}") from None
    if meta.get("type") == "lightgbm":
        raise LtrError(f"--model {folder} holds a LightGBM model; ltr export covers the neural scorers of ltr train "
                       "(serve model.txt with LightGBM itself, or convert it with onnxmltools)")
    if args.format == "onnx":
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
            import onnxscript  # noqa: F401
        except ImportError as exc:
            raise LtrError(f"ltr export --format onnx needs {exc.name}: pip install 'ltr[export]'") from None
    model = load_model(folder)
    info = export_model(model, args.out, args.format, metadata={"ltr.model": meta})
    print(f"wrote {info['path']} ({info['format']}, exporter {info['exporter']}; largest difference from the trained "
          f"model on the check inputs {info['max_abs_difference']:.2g})")
    print("inputs: features [B, L, F] float32, mask [B, L] bool -> scores [B, L] float32")
    return 0
