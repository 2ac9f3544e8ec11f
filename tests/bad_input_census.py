"""Census of the bad-input battery against any checkout: how each case of tests/test_bad_inputs.py ends.

Not a test (pytest does not collect it): it runs every case of ``CASES`` through ``ltr.cli.main`` of
whatever ``ltr`` is first on ``sys.path`` and counts the endings: ``ok`` (exit 2, one line naming the
place, inputs intact), ``traceback`` (an exception escaped), ``hang`` (no end within HANG_S seconds:
a FIFO opened, a huge allocation, or training that should have been refused), ``exit0`` (accepted),
``message`` (exit 2 without naming the place), ``changed`` (an input or earlier output was altered;
the inputs are then rebuilt). Issue 13 measured the code before and after with it::

    PYTHONPATH=/path/to/other/checkout HANG_S=5 python tests/bad_input_census.py

The cases are those of the three rounds (:mod:`test_bad_inputs`, ``_round2``, ``_round3``).
Arguments, when given, keep only the cases whose id contains one of them (``python
tests/bad_input_census.py convert- tune-``); ``--new`` keeps the cases added after issue 13 (``NEW_CASES``),
``--round3`` those of issue 48.
"""

from __future__ import annotations

import collections
import contextlib
import io
import os
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_bad_inputs as T  # noqa: E402
import test_bad_inputs_round2 as T2  # noqa: E402
import test_bad_inputs_round3 as T3  # noqa: E402

ALL_CASES = [*T.CASES, *T2.CASES, *T3.CASES]


def fresh_world() -> dict:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return T.build_world(Path(tempfile.mkdtemp(prefix="world")))


def select(words: list[str]) -> list:
    if words == ["--new"]:
        return list(T.NEW_CASES)
    if words == ["--round3"]:
        return list(T3.CASES)
    return [c for c in ALL_CASES if not words or any(w in c.id for w in words)]


def main() -> None:
    world = fresh_world()
    counts: collections.Counter = collections.Counter()
    notes = {}

    def alarm(signum, frame):
        raise T.Hung("hang")

    signal.signal(signal.SIGALRM, alarm)
    cases = select(sys.argv[1:])
    for case in cases:
        tmp = Path(tempfile.mkdtemp(prefix="case"))
        os.chdir(tmp)
        values = {**world, **(case.setup(tmp, world) if case.setup else {}), "tmp": str(tmp)}
        argv = [a.format(**values) for a in case.argv]
        before = T.snapshot(world["root"])
        err = io.StringIO()
        kind = None
        signal.alarm(int(os.environ.get("HANG_S", "8")))
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = T._quiet_main(argv)
        except T.Hung:
            kind = "hang"
        except BaseException as exc:  # noqa: BLE001 - counting them is the point
            kind, notes[case.id] = "traceback", f"{type(exc).__name__}: {str(exc)[:150]}"
        finally:
            signal.alarm(0)
        if kind is None:
            kind = "exit0" if code == 0 else f"exit{code}" if code != 2 else "ok"
            if kind == "ok":
                try:
                    T.assert_refused(code, err.getvalue(), case.expect)
                except AssertionError:
                    kind = "message"
                    notes[case.id] = (err.getvalue().strip().splitlines() or ["(no stderr)"])[-1][:200]
        if T.snapshot(world["root"]) != before:
            counts["changed"] += 1
            notes[case.id] = notes.get(case.id, kind) + " [an input or earlier output changed]"
            world = fresh_world()
        counts[kind] += 1
        if kind != "ok":
            notes.setdefault(case.id, kind)
    print(dict(counts), "of", len(cases))
    for case_id, note in notes.items():
        print(f"{case_id}: {note}")


if __name__ == "__main__":
    main()
