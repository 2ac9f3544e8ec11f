"""The declared floors are true: constraints-floors.txt (what `make test-floors` installs and runs the
suite on) holds pyproject.toml's lowest versions, and the code uses nothing newer that a scan can see."""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for part in ("ltr", "metrics", "losses") for p in (ROOT / part).rglob("*.py")]


def declared() -> dict[str, str]:
    """{distribution: floor} of pyproject's runtime dependencies (all written NAME>=FLOOR)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    out = {}
    for dep in deps:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", dep.replace(" ", ""))
        assert m, f"a runtime dependency without a floor: {dep!r}"
        out[m.group(1).lower()] = m.group(2)
    return out


def pinned() -> dict[str, str]:
    lines = (ROOT / "constraints-floors.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if line.strip() and not line.startswith("#"))


def version(text: str) -> tuple:
    return tuple(int(x) for x in text.split("."))


def test_constraints_floors_pin_every_declared_floor():
    floors, pins = declared(), pinned()
    torch = floors.pop("torch")  # installed by the Makefile from PyTorch's index: its default is the floor
    assert re.search(rf"^FLOOR_TORCH\s+\?=\s*{re.escape(torch)}(\.0)?$", (ROOT / "Makefile").read_text(), re.M)
    assert set(pins) == set(floors)
    for name, floor in floors.items():
        # equal to the floor (pandas: the test extra's floor, 2.0, is the higher one)
        assert version(pins[name])[:len(version(floor))] == version(floor) or (name == "pandas" and pins[name] == "2.0.0"), name


def test_code_needs_nothing_newer_than_the_floors():
    python = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    floors = declared()
    text = {p: p.read_text() for p in SOURCES}
    uses = lambda pattern: [str(p.relative_to(ROOT)) for p, t in text.items() if re.search(pattern, t, re.M)]  # noqa: E731
    if uses(r"^\s*import tomllib"):  # the standard library's TOML reader came in 3.11
        assert version(python.removeprefix(">="))[:2] >= (3, 11), uses(r"^\s*import tomllib")
    if version(floors["numpy"])[0] < 2:  # numpy 2's string functions; np.char has them on 1.x too
        assert uses(r"\bnp\.strings\.") == []
    if version(floors["torch"]) < (2, 6):  # torch.onnx.export's torch.export path (dynamo=, dynamic_shapes=)
        assert uses(r"dynamo=True") == []


def test_bca_interval_with_the_scipy_bootstrap_before_rng(monkeypatch):
    """scipy < 1.15 (the floor is 1.10) names bootstrap's generator random_state=: the interval is the same."""
    import numpy as np
    import scipy.stats

    from metrics.stats import bootstrap_ci

    x = np.random.default_rng(0).normal(size=40)
    want = bootstrap_ci(x, method="BCa", seed=3, n_resamples=300)
    real = scipy.stats.bootstrap

    seed_arg = "rng" if "rng" in inspect.signature(real).parameters else "random_state"

    def bootstrap_1_14(data, statistic, *, n_resamples=9999, batch=None, method="BCa", confidence_level=0.95,
                       random_state=None):
        return real(data, statistic, n_resamples=n_resamples, batch=batch, method=method,
                    confidence_level=confidence_level, **{seed_arg: random_state})

    monkeypatch.setattr(scipy.stats, "bootstrap", bootstrap_1_14)
    assert bootstrap_ci(x, method="BCa", seed=3, n_resamples=300) == want and want.low < want.mean < want.high
