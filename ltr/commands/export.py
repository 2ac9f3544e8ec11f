"""``ltr export``: any trained model folder as one ONNX graph (or a neural one as TorchScript) for serving.

Neural runs (``ltr train``), GBDT runs (``ltr gbdt``: LightGBM, XGBoost, CatBoost) and blends
(``ltr blend``) export to ONNX with one interface: features ``[B, L, F]`` float32 (raw) and a mask
``[B, L]`` -> ``scores [B, L]``, B and L dynamic; a blend's lists are queries. The graph is checked
against the model in onnxruntime before it is written, and ``<file>.json`` beside it states the
interface, the feature names and the toolkit's version (:mod:`ltr.models.export_folder`).
"""

from __future__ import annotations

from ltr.commands import add_force_option

FORMATS = ("onnx", "torchscript")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        help="export a trained model (neural, GBDT or blend) to ONNX, or a neural one to TorchScript, for serving",
        description="Write the model of a model folder (ltr train, ltr gbdt with any engine, ltr blend) as ONNX "
        "(for onnxruntime and other ONNX runtimes), or a neural one as TorchScript (torch.jit.load). Inputs: "
        "features [B, L, F] float32 (raw, as in the data file) and mask [B, L] bool; output: scores [B, L] (0 on "
        "padding); a blend standardises each list, so one list is one query. The normalisation fitted on the "
        "training split is inside the graph; batch and list length are dynamic. The file is checked against the "
        "model before it is written, and FILE.json beside it states the interface and the feature names.",
    )
    p.add_argument("--model", required=True, metavar="DIR", help="model folder: a run of ltr train or ltr gbdt, or a blend of ltr blend")
    p.add_argument("--format", required=True, choices=FORMATS, help="onnx (every kind) or torchscript (neural runs)")
    p.add_argument("--out", required=True, metavar="FILE", help="file to write (e.g. model.onnx, model.pt); FILE.json is written beside it")
    add_force_option(p, "--out and FILE.json")
    p.set_defaults(func=run)


def run(args) -> int:
    from ltr.base.checks import input_folder, output_file
    from ltr.models.export_folder import export_folder

    from ltr.models.export_folder import facts_path

    input_folder(args.model, "--model")  # missing, a file, unreadable: said so
    # never over or into the model's folder, nor over an existing file without --force
    for path, what in ((args.out, "--out"), (facts_path(args.out), "--out's facts file")):
        output_file(path, what, inputs=[("--model", args.model)], force=args.force)
    info = export_folder(args.model, args.out, args.format)
    print(f"wrote {info['path']} ({info['format']} of a {info['kind']} model, exporter {info['exporter']}; largest "
          f"difference from the model on the check inputs {info['max_abs_difference']:.2g}) and {info['facts']}")
    print("inputs: features [B, L, F] float32, mask [B, L] bool -> scores [B, L] float32")
    return 0
