"""Every example in README.md and docs/ runs, or says why not.

Each fenced ```python and ```bash / ```sh block of README.md and docs/**/*.md is run, in page order,
in a fresh temporary folder per page: Python blocks with ``exec`` in one namespace per page (``__name__`` is "__main__", as in a script), shell
blocks with ``bash -e`` with the installed ``ltr`` (the one beside this interpreter) first on PATH, reached
through a warm fork server that imports torch and LightGBM once (tests/warm_ltr.py; LTR_WARM_LTR=0 for
the plain console script).
The pages make their own small data (``ltr synth --queries 60 ...`` or ``make_synthetic_splits``), so
an example that drifts from the code (a renamed option, a changed signature, a removed name) fails
here. A block that cannot run in a test is marked by an HTML comment on the line before it,
``<!-- not run: REASON -->``, and the reason may not be empty. A block of any language after
``<!-- file: NAME -->`` is written to NAME in the page's folder (a TOML configuration that a later
command reads), so it is checked by the command that reads it. A shell block after
``<!-- run in the repository root -->`` runs in the checkout (a script of experiments/ that only
prints).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import socket
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNNABLE = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<ticks>```+)\s*(?P<lang>[\w+-]*)")
NOT_RUN = re.compile(r"^<!--\s*not run:(?P<reason>.*?)-->$")
FILE = re.compile(r"^<!--\s*file:\s*(?P<name>[\w./-]+)\s*-->$")
IN_ROOT = re.compile(r"^<!--\s*run in the repository root\s*-->$")


@dataclass
class Block:
    lang: str        # the fence's language, lower case ("" when none)
    code: str
    line: int        # 1-based line of the opening fence
    marker: str      # the line before the fence when it is an HTML comment, else ""


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def fenced_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a markdown text, with the HTML comment before each (if any)."""
    lines, blocks, i = text.splitlines(), [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, ticks = i, match["ticks"]
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        body, i = [], i + 1
        while i < len(lines) and not lines[i].strip().startswith(ticks):
            body.append(lines[i][len(match["indent"]):])
            i += 1
        i += 1
        marker = before if before.startswith("<!--") else ""
        blocks.append(Block(match["lang"].lower(), "\n".join(body) + "\n", start + 1, marker))
    return blocks


def plan(blocks: list[Block]) -> list[tuple[str, Block]]:
    """What to do with each block: "python", "bash", "bash-root", "file", "skip" (marked) or "show" (not code).

    Raises ValueError for a not-run marker without a reason, or one before a block that would not run anyway.
    """
    steps = []
    for block in blocks:
        not_run, file = NOT_RUN.match(block.marker), FILE.match(block.marker)
        if file:
            steps.append(("file", block))
        elif IN_ROOT.match(block.marker) and RUNNABLE.get(block.lang) == "bash":
            steps.append(("bash-root", block))
        elif not_run:
            if not not_run["reason"].strip():
                raise ValueError(f"line {block.line}: a not-run marker needs a reason")
            if block.lang not in RUNNABLE:
                raise ValueError(f"line {block.line}: a not-run marker before a ```{block.lang} block, which never runs")
            steps.append(("skip", block))
        else:
            steps.append((RUNNABLE.get(block.lang, "show"), block))
    return steps


def _environment(warm_bin: str | None = None) -> dict:
    """The shell blocks' environment; ``warm_bin`` (a folder holding the warm ``ltr`` client) first on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in (warm_bin, bin_dir, os.environ.get("PATH", "")) if p)
    env = {**os.environ, "PATH": path, "MPLBACKEND": "Agg",
           "OMP_WAIT_POLICY": "PASSIVE", "LTR_THREADS": "1", "LTR_REPO": str(ROOT)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


@contextlib.contextmanager
def warm_ltr(folder: Path):
    """The environment for shell blocks whose ``ltr`` is the fork server of tests/warm_ltr.py.

    The server imports torch, LightGBM and pandas once; each ``ltr`` command of an example is then a
    fork of it that runs ``ltr.cli.main`` in the example's folder, environment and standard streams
    (a command whose environment differs runs the installed ``ltr``). LTR_WARM_LTR=0: no server.
    """
    if os.environ.get("LTR_WARM_LTR", "1") == "0" or not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
        yield _environment()  # no fork server (asked, or no fork / Unix sockets here): the installed ltr
        return
    import warm_ltr as warm  # tests/warm_ltr.py (tests/ is on sys.path, as for loss_checks)

    (folder / "bin").mkdir()
    address, client = str(folder / "ltr.sock"), folder / "bin" / "ltr"
    client.write_text(warm.client_script(address, str(Path(sys.executable).parent / "ltr")), encoding="utf-8")
    client.chmod(0o755)
    env = _environment(str(folder / "bin"))
    server = subprocess.Popen([sys.executable, str(Path(__file__).parent / "warm_ltr.py"), address], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    try:
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError(f"tests/warm_ltr.py did not start (exit status {server.wait(60)})")
        yield env
    finally:
        server.terminate()  # it waits for its last commands and exits
        try:
            server.wait(120)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(60)


@pytest.fixture(scope="session")  # one server per pytest-xdist worker that runs the group, kept to the end
def shell_environment(tmp_path_factory):
    with warm_ltr(tmp_path_factory.mktemp("warm_ltr")) as env:
        yield env


def _run_python(code: str, namespace: dict, where: str) -> None:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(compile(code, where, "exec"), namespace)
    except BaseException:  # a SystemExit of an example fails the test too
        pytest.fail(f"{where} failed:\n{code}\n--- output ---\n{out.getvalue()[-3000:]}\n{traceback.format_exc()[-4000:]}")


def _run_bash(code: str, folder: Path, where: str, env: dict | None = None) -> None:
    out = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=folder, env=env or _environment(),
                         capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if out.returncode:
        pytest.fail(f"{where} exited {out.returncode}:\n{code}\n--- stdout ---\n{out.stdout[-3000:]}\n"
                    f"--- stderr ---\n{out.stderr[-3000:]}")


def run_page(page: Path, folder: Path, env: dict | None = None) -> int:
    """Run every runnable block of ``page`` in ``folder`` (shell blocks in ``env``); the number of blocks run."""
    steps = plan(fenced_blocks(page.read_text(encoding="utf-8")))
    namespace = {"__name__": "__main__"}   # as a script: its __main__ guard runs
    ran, cwd = 0, os.getcwd()
    os.chdir(folder)
    try:
        for kind, block in steps:
            where = f"{page.relative_to(ROOT)}:{block.line}"
            if kind == "file":
                target = folder / FILE.match(block.marker)["name"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.code, encoding="utf-8")
            elif kind == "python":
                _run_python(block.code, namespace, where)
            elif kind in ("bash", "bash-root"):
                _run_bash(block.code, ROOT if kind == "bash-root" else folder, where, env)
            ran += kind in ("python", "bash", "bash-root")
    finally:
        os.chdir(cwd)
    return ran


PAGES = [p for p in doc_pages()
         if any(k in ("python", "bash", "bash-root") for k, _ in plan(fenced_blocks(p.read_text("utf-8"))))]


def test_every_block_is_run_or_says_why():
    """Every page parses: markers have reasons, and each python / shell block is run or marked."""
    counts = {"python": 0, "bash": 0, "bash-root": 0, "skip": 0}
    for page in doc_pages():
        for kind, _ in plan(fenced_blocks(page.read_text(encoding="utf-8"))):
            if kind in counts:
                counts[kind] += 1
    assert counts["python"] >= 20 and counts["bash"] >= 20, counts
    assert counts["skip"] < counts["python"] + counts["bash"], counts


def test_markers_are_read():
    text = ("Intro\n\n```bash\nltr --help\n```\n\n<!-- not run: needs the MQ2008 folder -->\n```python\nx = 1\n```\n"
            "\n<!-- file: cfg/run.toml -->\n```toml\n[train]\nepochs = 1\n```\n\n```text\nout\n```\n"
            "<!-- run in the repository root -->\n```sh\npython experiments/seed_tables.py\n```\n")
    steps = [(kind, b.lang, b.line, b.code) for kind, b in plan(fenced_blocks(text))]
    assert steps == [("bash", "bash", 3, "ltr --help\n"), ("skip", "python", 8, "x = 1\n"),
                     ("file", "toml", 13, "[train]\nepochs = 1\n"), ("show", "text", 18, "out\n"),
                     ("bash-root", "sh", 22, "python experiments/seed_tables.py\n")]
    with pytest.raises(ValueError, match="needs a reason"):
        plan(fenced_blocks("<!-- not run: -->\n```bash\nls\n```\n"))
    with pytest.raises(ValueError, match="never runs"):
        plan(fenced_blocks("<!-- not run: why -->\n```toml\na = 1\n```\n"))


#: the pages a new user copies from first: what they write must be left out of git by .gitignore
FIRST_HOUR = ("README.md", "docs/getting-started.md")


def not_ignored(folder: Path) -> list[str]:
    """The entries of ``folder`` that the checkout's .gitignore would not ignore at its root
    (``git check-ignore --no-index``; a folder stands for a file inside it)."""
    names = sorted(p.name + ("/x" if p.is_dir() else "") for p in folder.iterdir())
    done = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input="\n".join(names),
                          capture_output=True, text=True, timeout=60)
    if done.returncode not in (0, 1):
        pytest.skip(f"git check-ignore cannot run here: {done.stderr.strip()}")
    ignored = set(done.stdout.split())
    return [n for n in names if n not in ignored]


@pytest.mark.slow
@pytest.mark.xdist_group("docs_examples")  # one worker, one warm server (its imports: 6 s of CPU each)
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_examples_run(page, tmp_path, shell_environment):
    assert run_page(page, tmp_path, shell_environment) > 0
    if str(page.relative_to(ROOT)) in FIRST_HOUR:  # the quick starts write under a folder git ignores
        assert not_ignored(tmp_path) == [], page


def test_first_hour_pages_say_to_activate_the_environment_before_the_first_ltr_command():
    """A clean shell has no `ltr` on PATH: the page says so before its first shell block calling it."""
    for name in FIRST_HOUR:
        text = (ROOT / name).read_text(encoding="utf-8")
        first = min(b.line for k, b in plan(fenced_blocks(text)) if k == "bash" and re.search(r"^ltr ", b.code, re.M))
        before = "\n".join(text.splitlines()[:first])
        assert "source .venv/bin/activate" in before and "command not found" in before, name


def test_not_ignored_sees_what_git_would_add(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "test.run").write_text("x")
    assert not_ignored(tmp_path) == ["test.run"]


@pytest.mark.xdist_group("docs_examples")
def test_the_warm_ltr_behaves_as_the_installed_one(shell_environment, tmp_path):
    """The fork server gives the same output, exit statuses, folder and pipes as the console script."""
    if shell_environment["PATH"] == _environment()["PATH"]:  # no warm client folder first on PATH
        pytest.skip("no fork server: the examples run the installed ltr")
    script = ("ltr --version\nltr synth --out data --queries 8 --mean-length 5 --seed 3 --quiet\n"
              "printf 'q1 0 d1 1\\nq1 0 d2 0\\n' > qrels.txt\n"
              "printf 'q1 Q0 d2 1 2.0 t\\nq1 Q0 d1 2 1.0 t\\n' | ltr eval --qrels qrels.txt --run - --metrics ndcg@2,mrr\n"
              "ltr train --bogus || echo \"status $?\"\n"
              "LTR_THREADS=zero ltr --version || echo \"status $?\"\n"   # another environment: the installed ltr
              "ls data\n")
    outputs = []
    for name, env in (("warm", shell_environment), ("plain", _environment())):
        (tmp_path / name).mkdir()
        out = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=tmp_path / name, env=env,
                             capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stderr
        outputs.append((out.stdout, out.stderr))
    assert outputs[0] == outputs[1]
    stdout, stderr = outputs[0]
    assert "status 2" in stdout and stdout.rstrip().endswith("test.txt\ntrain.txt\nvalid.txt")
    assert "0.63093" in stdout  # NDCG@2 of the relevant document at rank 2: 1 / log2(3)
    assert "ltr train: error: the following arguments are required" in stderr and "LTR_THREADS='zero'" in stderr
