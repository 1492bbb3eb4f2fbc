"""Lexical features on other processes: the pool that lets a GPU scoring chunk spread its CPU work over the host's
cores (issue 31), while its own thread runs the encoder.

Why not ``multiprocessing`` or joblib's loky: a Celery prefork child is a daemonic process, and both refuse to
start children there ("daemonic processes are not allowed to have children"; checked). Each lexical process is a
fresh interpreter (``python -c LEXICAL_PROCESS_CODE``) fed pickled chunks of pairs on its stdin and answering on its
stdout: nothing of the scoring process is inherited (not torch's or CUDA's state), it imports
``scoring.similarity.features`` alone, and it exits when its stdin closes, which happens when the scoring process
closes the pool, exits or is killed.

``cpu_workers_on(n)`` (a context variable, like ``embeddings.encoding_on``) says how many processes the code inside
the block may use; ``features.pair_features`` reads it, so a regressor's ``predict`` needs no argument for it. This
module does not import ``scoring.similarity.features``: the child's code names the function it serves.
"""

from __future__ import annotations

import atexit
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]  # the repository: scoring/similarity/ is two below it
LEXICAL_CHUNK = 256  # pairs per message to a lexical process: ~30 ms of work against ~0.1 ms of pipe
# what a lexical process runs: a fresh interpreter that imports scoring.similarity.features and this module only (no
# torch, no encoder, no CUDA), this project first on its path whatever the caller's; it serves ``features.lexical_rows``
LEXICAL_PROCESS_CODE = (
    f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
    "from scoring.similarity.features import lexical_rows; "
    "from scoring.similarity.lexical_processes import lexical_process_main; "
    "lexical_process_main(lexical_rows)"
)
_CPU_WORKERS: ContextVar[int] = ContextVar("scoring_cpu_workers", default=1)


class LexicalProcessError(RuntimeError):
    """A lexical process died or answered nonsense; the call fails, and the next one starts fresh processes."""


@contextmanager
def cpu_workers_on(n: int) -> Iterator[int]:
    """Inside the block, ``pair_features`` (and so a regressor's ``predict``) computes the lexical rows on ``n``
    processes: 1, this one, as always; more, ``LexicalProcesses``. A context variable, like the encoder's
    placement (``embeddings.encoding_on``): the job that knows the number sets it, the code in between needs
    no argument for it."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"cpu workers must be a whole number >= 1, not {n!r}")
    token = _CPU_WORKERS.set(n)
    try:
        yield n
    finally:
        _CPU_WORKERS.reset(token)


def current_cpu_workers() -> int:
    """The processes that compute lexical rows here: the innermost ``cpu_workers_on`` block's, else 1."""
    return _CPU_WORKERS.get()


def _write_message(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


def _read_message(stream: IO[bytes]) -> Any:
    """The next message, or None at the end of the stream (the other side has gone)."""
    head = stream.read(8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "little")
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


def lexical_process_main(rows_of: Callable[[list], list[list[float]]]) -> None:
    """The loop of one lexical process: read a chunk of pairs on stdin, answer ``("rows", rows_of(chunk))`` (or
    ``("error", exception)``) on stdout, until stdin closes -- which it does when the scoring process closes the
    pool, exits or is killed, so no lexical process outlives it."""
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # whatever a library prints goes to stderr, not the answers
    requests = sys.stdin.buffer
    while (chunk := _read_message(requests)) is not None:
        try:
            answer: tuple[str, Any] = ("rows", rows_of(chunk))
        except Exception as exc:  # noqa: BLE001 - raised in the scoring process, as the sequential path would
            answer = ("error", exc)
        try:
            _write_message(answers, answer)
        except (pickle.PicklingError, TypeError, AttributeError):
            _write_message(answers, ("error", RuntimeError(f"{type(answer[1]).__name__}: {answer[1]}")))


class LexicalProcesses:
    """``n`` processes computing lexical rows for this one, started once and reused for every batch.

    Each is ``python -c LEXICAL_PROCESS_CODE``, a fresh interpreter: nothing of this process is inherited (not
    torch's or CUDA's state, which forking after CUDA would break, nor a Celery prefork child's daemonic flag,
    which makes ``multiprocessing`` refuse to start children there), and it imports this module alone. It is fed
    pickled chunks of pairs on its stdin, one chunk at a time, and answers on its stdout; a thread of this process
    per lexical process waits for the answers, so the calling thread is free to run the encoder meanwhile."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"lexical processes must be at least 1, not {n}")
        # pure Python work: no BLAS or OpenMP thread pools in them
        one_thread = dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
        env = {**os.environ, **one_thread}
        self.n = n
        self.broken: str | None = None
        self._procs = [
            subprocess.Popen(
                [sys.executable, "-c", LEXICAL_PROCESS_CODE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=ROOT,
                env=env,
            )
            for _ in range(n)
        ]
        self._idle: queue.SimpleQueue[subprocess.Popen] = queue.SimpleQueue()
        for proc in self._procs:
            self._idle.put(proc)
        self._threads = ThreadPoolExecutor(n, thread_name_prefix="lexical")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def submit(self, pairs: Sequence[tuple[str, str, float | None, Any]]) -> list[Future]:
        """Start computing the rows of ``pairs`` (chunks of at most ``LEXICAL_CHUNK``, spread over the processes);
        ``collect`` the returned futures for them, in order."""
        size = max(1, min(LEXICAL_CHUNK, -(-len(pairs) // self.n)))
        return [self._threads.submit(self._call, list(pairs[i : i + size])) for i in range(0, len(pairs), size)]

    def _call(self, chunk: list) -> list[list[float]]:
        proc = self._idle.get()
        try:
            if self.broken:
                raise LexicalProcessError(self.broken)
            try:
                _write_message(proc.stdin, chunk)
                answer = _read_message(proc.stdout)
            except (OSError, ValueError, pickle.UnpicklingError):
                answer = None
            if not (isinstance(answer, tuple) and len(answer) == 2):
                self.broken = f"a lexical process (pid {proc.pid}) exited or broke its answer (code {proc.poll()})"
                raise LexicalProcessError(self.broken)
        finally:
            self._idle.put(proc)  # even a dead one: the next call on it finds ``broken`` and raises
        kind, value = answer
        if kind == "error":
            raise value
        return value

    def close(self, timeout: float = 10) -> None:
        """Close their stdin (each then exits), wait for them (``timeout`` s, then kill), stop the threads."""
        for proc in self._procs:
            try:
                proc.stdin.close()
            except OSError:
                pass
        for proc in self._procs:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        self._threads.shutdown(wait=False, cancel_futures=True)


def collect(futures: Sequence[Future]) -> list[list[float]]:
    """The rows of ``LexicalProcesses.submit``'s futures, in the order of its pairs."""
    return [row for future in futures for row in future.result()]


_POOL: LexicalProcesses | None = None
_POOL_LOCK = threading.Lock()


def lexical_processes(n: int) -> LexicalProcesses:
    """This process's ``n`` lexical processes: started on first use and kept for every later batch; a pool of
    another size, or one that broke, is closed and replaced."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None and (_POOL.n != n or _POOL.broken):
            _POOL.close()
            _POOL = None
        if _POOL is None:
            _POOL = LexicalProcesses(n)
        return _POOL


@atexit.register
def close_lexical_processes() -> None:
    """Stop this process's lexical processes, if it started any (at exit, and wherever they are not needed)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None:
            _POOL.close()
            _POOL = None
