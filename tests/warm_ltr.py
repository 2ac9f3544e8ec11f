"""A warm ``ltr`` command for the documentation examples (tests/test_docs_examples.py).

Most of the CPU time of a small ``ltr train`` / ``ltr predict`` / ``ltr gbdt`` is the start-up of a new
interpreter (importing torch and its compiler stack, LightGBM with scikit-learn and SciPy, pandas:
2-6 s per command on the test machine), and the example pages run about a hundred such commands.
This module is both halves of a fork server that pays those imports once:

* the server (``python tests/warm_ltr.py SOCKET``): applies ``ltr.base.threads.configure_threads`` (as
  ``ltr.cli.main`` does before any heavy import), imports the heavy libraries, prints ``ready`` and
  then, per request, forks a child that runs ``ltr.cli.main(argv)`` exactly as the ``ltr`` console
  script does: in the caller's folder, with the caller's environment, standard input, output and
  error (passed as file descriptors), ``sys.exit`` codes and uncaught tracebacks as in a fresh
  process, ``atexit`` handlers run;
* the client (:func:`client_script`, installed as ``ltr`` first on the examples' PATH): sends its
  arguments, folder, environment and descriptors 0-2, waits, exits with the child's status.

A request whose environment differs from the server's (an example that exports a variable, or
``LTR_THREADS=2 ltr ...``) is not forked: the client runs the installed ``ltr`` instead, so thread
settings read at import time are never stale. The only difference left from a fresh process is that
the libraries above are already imported, as they are for the in-process command-line tests.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import signal
import socket
import sys

# environment variables that differ between the server and a client started from bash
IGNORED_ENV = ("PWD", "OLDPWD", "SHLVL", "_")
PRELOAD = ("torch", "torch._dynamo", "torch.utils.tensorboard", "lightgbm", "pandas", "pyarrow.parquet",
           "matplotlib.figure", "ltr.cli", "ltr.train.trainer", "ltr.models.folder", "ltr.gbdt.lightgbm",
           "onnx", "onnxruntime", "torch.onnx", "torch.export", "ltr.commands.clicks", "ltr.clicks", "metrics",
           "sklearn.datasets", "optuna", "optuna.storages._rdb.storage", "tabulate")


def _comparable(env: dict) -> dict:
    return {k: v for k, v in env.items() if k not in IGNORED_ENV}


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client closed the connection")
        data += chunk
    return data


def _child(conn: socket.socket, request: dict, fds: list[int]) -> int:
    """Run one command in this forked process as the ``ltr`` console script would; its exit status."""
    import atexit
    import threading
    import traceback
    import weakref

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdin = sys.__stdin__ = open(0, encoding="utf-8", closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace",
                                       closefd=False)
    sys.argv = [request["ltr"], *request["argv"]]
    # The finalizers of what the server imported (torch's operator libraries: ~20 ms of a command's exit)
    # would undo in-process registrations only; a command's output cannot depend on them.
    inherited = list(weakref.finalize._registry)
    from ltr.cli import main

    try:
        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # an uncaught exception: a traceback and status 1, as in a fresh process
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message")
        print(code, file=sys.stderr)
        code = 1
    for finalizer in inherited:
        finalizer.atexit = False
    threading._shutdown()  # the interpreter's own exit steps: join threads, then atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def serve(address: str) -> None:
    """Import the heavy libraries, then fork one child per request on the Unix socket ``address``."""
    base = _comparable(dict(os.environ))
    from ltr.base.collector import configure_collector
    from ltr.base.threads import configure_threads

    configure_threads()
    configure_collector()  # as ltr.cli.main does: before the imports
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional extra that is not installed: its commands import it themselves
            pass
    from onnx_registry import memoise_torchlib_ops  # tests/onnx_registry.py: every `ltr export` child inherits the list

    memoise_torchlib_ops(fill=True)
    # What was imported lives as long as the server: frozen, it is out of every child's collector passes
    # (a full pass walks ~500,000 objects otherwise), and those passes do not write to the shared pages.
    gc.collect()
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(16)
    listener.settimeout(1.0)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    print("ready", flush=True)
    parent = os.getppid()
    while not stop and os.getppid() == parent:  # SIGTERM, or the test process that started it is gone
        _reap(os.WNOHANG)
        try:
            conn, _ = listener.accept()
        except (socket.timeout, InterruptedError):
            continue
        conn.settimeout(None)
        try:
            header, fds, _, _ = socket.recv_fds(conn, 8, 3)
            request = json.loads(_recv_exact(conn, int.from_bytes(header, "big")))
        except (OSError, ValueError, ConnectionError):
            conn.close()
            continue
        if _comparable(request["env"]) != base or len(fds) != 3:
            conn.sendall(b"F")  # the client runs the installed ltr
        elif os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            listener.close()
            code = 1
            try:
                code = _child(conn, request, fds)
            except BaseException:  # the harness itself failed: say so on the command's standard error
                import traceback

                os.write(2, ("tests/warm_ltr.py: " + traceback.format_exc()).encode())
            finally:
                try:
                    conn.sendall(b"R" + int(code & 0xFF).to_bytes(1, "big"))
                finally:
                    os._exit(code & 0xFF)
        for fd in fds:
            os.close(fd)
        conn.close()
    listener.close()
    _reap(0)  # wait for the running commands: their CPU time is counted in this process's children


def _reap(options: int) -> None:
    """Wait for finished children (``os.WNOHANG``) or for all of them (0)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, options)
        except ChildProcessError:
            return
        if pid == 0:
            return


CLIENT = '''#!{python} -S
# ltr through the warm server of tests/warm_ltr.py; the installed ltr when the server cannot take it
import json, os, socket, sys
REAL = {real!r}
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({address!r})
    body = json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ), "ltr": REAL}}).encode()
    socket.send_fds(s, [len(body).to_bytes(8, "big")], [0, 1, 2])
    s.sendall(body)
    answer = b""
    while len(answer) < 2:
        chunk = s.recv(2 - len(answer))
        if not chunk:
            break
        answer += chunk
except OSError:
    answer = b"F"
if answer[:1] == b"R" and len(answer) == 2:
    sys.exit(answer[1])
if answer[:1] == b"F":
    os.execv(REAL, [REAL, *sys.argv[1:]])
print("ltr (tests/warm_ltr.py): the warm server closed the connection without a status", file=sys.stderr)
sys.exit(1)
'''


def client_script(address: str, real_ltr: str) -> str:
    """The text of the ``ltr`` client for the server on ``address``, falling back to ``real_ltr``."""
    return CLIENT.format(python=sys.executable, real=real_ltr, address=address)


if __name__ == "__main__":
    serve(sys.argv[1])
