"""``ltr export``: the ONNX file in onnxruntime and the TorchScript file in torch score a test set as
``ltr predict`` does; any scorer module exports, list-aware ones included."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from test_cli_train import read_run, run_scores
from test_training import make_ds
from torch import nn

from ltr.cli import main
from ltr.data import load_svmlight, save_svmlight
from ltr.data.batching import make_batch
from ltr.models.export import export_onnx, export_torchscript

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("export_data")
    paths = {}
    for name, (nq, seed) in {"train": (40, 31), "valid": (12, 32), "test": (15, 33)}.items():
        ds = make_ds(nq, seed)
        # raw features of mixed scale, so that the normalisation inside the graph matters
        paths[name] = d / f"{name}.txt"
        save_svmlight(ds.with_features((ds.features * np.array([1, 10, 100, 0.1, 1000, 1])).astype(np.float32)), paths[name])
    return paths


def padded_test_set(path):
    """The whole test file as one padded batch [Q, L, F] + mask, and a map back to the file's rows."""
    ds = load_svmlight(path, cache=False)
    batch = make_batch(ds, np.arange(ds.n_queries))
    return ds, batch.features.numpy(), batch.mask.numpy()


@pytest.mark.slow  # ONNX export through torch.export: about 2 s of tracing per model
@pytest.mark.parametrize("model_args", [
    # an ensemble of two MLPs (the graph averages its members; ltr train's default is three)
    ["--model", "mlp", "--hidden", "12,6", "--normalize", "log1p_standard", "--batch-norm", "--dropout", "0.1", "--ensemble", "2"],
    ["--model", "linear", "--normalize", "standard"],
    ["--model", "mlp", "--hidden", "12,6", "--normalize", "auto", "--ensemble", "1"],  # log, clip and constant mask in the graph
], ids=["mlp", "linear", "mlp-auto"])
def test_exported_files_score_as_ltr_predict(files, tmp_path, model_args, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "--train", str(files["train"]), "--valid", str(files["valid"]), *model_args,
                 "--loss", "lambdarank", "--epochs", "3", "--seed", "1", "--quiet", "--out", str(run_dir)]) == 0
    assert main(["predict", "--model", str(run_dir), "--data", str(files["test"]), "--out", str(tmp_path / "test.run")]) == 0
    ds, x, mask = padded_test_set(files["test"])
    expected = run_scores(read_run(tmp_path / "test.run"), ds)

    assert main(["export", "--model", str(run_dir), "--format", "onnx", "--out", str(tmp_path / "m.onnx")]) == 0
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["features", "mask"]
    assert [str(d) for d in session.get_inputs()[0].shape[:2]] == ["batch", "list_length"]  # dynamic axes
    onnx_scores = session.run(["scores"], {"features": x, "mask": mask})[0]
    np.testing.assert_allclose(onnx_scores[mask], expected, rtol=1e-5, atol=1e-5)
    assert np.all(onnx_scores[~mask] == 0)
    # one query alone, as a server would send it: B = 1 and its own length
    q = 3
    lo, hi = ds.query_offsets[q], ds.query_offsets[q + 1]
    alone = session.run(["scores"], {"features": ds.features[None, lo:hi], "mask": np.ones((1, hi - lo), bool)})[0]
    np.testing.assert_allclose(alone[0], expected[lo:hi], rtol=1e-5, atol=1e-5)
    meta = {p.key: p.value for p in onnx.load(str(tmp_path / "m.onnx")).metadata_props}
    assert meta["ltr.n_features"] == "6" and '"normalizer"' in meta["ltr.model"]

    assert main(["export", "--model", str(run_dir), "--format", "torchscript", "--out", str(tmp_path / "m.pt")]) == 0
    scripted = torch.jit.load(str(tmp_path / "m.pt"))
    with torch.no_grad():
        ts_scores = scripted(torch.from_numpy(x), torch.from_numpy(mask)).numpy()
    np.testing.assert_allclose(ts_scores[mask], expected, rtol=1e-5, atol=1e-5)


class ListContextScorer(nn.Module):
    """A list-aware scorer: each item's score is shifted by the masked mean of its list's features."""

    def __init__(self, n_features):
        super().__init__()
        self.n_features = n_features
        self.item = nn.Linear(n_features, 1)
        self.context = nn.Linear(n_features, 1)

    def forward(self, x, mask=None):
        m = torch.ones(x.shape[:-1], dtype=torch.bool) if mask is None else mask
        w = m.unsqueeze(-1).to(x.dtype)
        mean = (x * w).sum(-2, keepdim=True) / w.sum(-2, keepdim=True).clamp(min=1.0)
        return (self.item(x) + self.context(x - mean)).squeeze(-1)


class FlatOnly(nn.Module):
    """A pointwise scorer that takes rows [N, F] only (no mask argument)."""

    def __init__(self, n_features):
        super().__init__()
        self.n_features = n_features
        self.net = nn.Sequential(nn.Linear(n_features, 4), nn.Tanh(), nn.Linear(4, 1))

    def forward(self, x):
        assert x.dim() == 2
        return self.net(x).squeeze(-1)


@pytest.mark.parametrize("cls", [ListContextScorer, FlatOnly])
def test_any_scorer_module_exports(cls, tmp_path):
    torch.manual_seed(0)
    model = cls(5).eval()
    x = torch.randn(3, 9, 5)
    mask = torch.arange(9)[None, :] < torch.tensor([[9], [4], [1]])
    with torch.no_grad():
        if cls is ListContextScorer:
            expected = model(x, mask=mask)
            # the list matters: the same items in a shorter list score differently
            assert not torch.allclose(model(x[1:2, :4], mask=mask[1:2, :4]), model(x[1:2, :5], mask=torch.ones(1, 5, dtype=torch.bool))[:, :4])
        else:
            expected = model(x.reshape(-1, 5)).reshape(3, 9)
    export_onnx(model, tmp_path / "c.onnx")
    got = ort.InferenceSession(str(tmp_path / "c.onnx")).run(["scores"], {"features": x.numpy(), "mask": mask.numpy()})[0]
    np.testing.assert_allclose(got[mask.numpy()], expected[mask].numpy(), rtol=1e-5, atol=1e-6)
    export_torchscript(model, tmp_path / "c.pt")
    with torch.no_grad():
        ts = torch.jit.load(str(tmp_path / "c.pt"))(x, mask)
    np.testing.assert_allclose(ts[mask].numpy(), expected[mask].numpy(), rtol=1e-5, atol=1e-6)


def test_export_refuses_lightgbm_and_missing_folders(tmp_path, capsys):
    (tmp_path / "gbdt").mkdir()
    (tmp_path / "gbdt" / "model.json").write_text('{"type": "lightgbm", "file": "model.txt", "n_features": 3}')
    assert main(["export", "--model", str(tmp_path / "gbdt"), "--format", "onnx", "--out", str(tmp_path / "x.onnx")]) == 2
    assert "LightGBM model" in capsys.readouterr().err
    assert main(["export", "--model", str(tmp_path / "nope"), "--format", "onnx", "--out", str(tmp_path / "x.onnx")]) == 2
    assert not (tmp_path / "x.onnx").exists()


def test_export_never_writes_over_its_input(tmp_path, files, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "--train", str(files["train"]), "--valid", str(files["valid"]), "--model", "linear",
                 "--epochs", "1", "--quiet", "--out", str(run_dir)]) == 0
    weights = (run_dir / "model.pt").read_bytes()
    assert main(["export", "--model", str(run_dir), "--format", "torchscript", "--out", str(run_dir / "model.pt")]) == 2
    assert "--out" in capsys.readouterr().err and (run_dir / "model.pt").read_bytes() == weights
