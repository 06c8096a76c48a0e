"""Shares of a batched oracle call computed in worker processes.

A bound local-step gradient (``Federation.row_gradient``) that is split into
*shares* of clients can hand all shares but the first to worker processes.
Each call gathers a worker's rows of the points X into a buffer shared with the
worker, sends it a 9-byte message, computes the first share in the calling
thread, waits for the worker's reply and scatters the worker's result rows from
a second shared buffer.  Unlike threads of one process, the worker never waits
for the interpreter lock of the caller (two threads running a softmax step's
dozen short numpy calls each burn about 1.3x the CPU of one: see
``benchmarks/logistic_rounds.py``).

Every share is computed by the function the caller would run itself, built in
the worker from the same arrays (``factory(*args)``, pickled once when the share
is registered), on the same point values, so its rows are the same bits as
without workers.

Workers are fresh interpreters (``python -c``: no thread or lock of the caller
is inherited, and the caller's main script is not run again), one per share
slot, started once per process and reused by every later registration; they
import fltheory, which pins their BLAS to one thread, and exit when the caller
closes its end of their socket (at exit, or when it dies).  A share's data are
pickled to its worker once, when the share is registered; the points and results
of every call go through two shared buffers: anonymous files (in ``/dev/shm``
when it exists) unlinked when made, whose descriptors the worker receives over
the socket and maps, so nothing is left behind whoever is killed.

Between the steps of a round both sides poll their socket for a short while
before blocking (``_SPIN_SECONDS``): a process blocked on an idle virtual CPU is
woken 50-150 us late, which is a third of a Synthetic(1,1) share.

A forked child of the caller does not inherit the workers (their sockets belong
to the parent): a :class:`RemoteShare` called in another process than the one
that registered it computes its rows locally with the same function.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import mmap
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from multiprocessing import reduction
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from ..errors import InvalidProblemError, WorkerProcessError

__all__ = ["PerRow", "RemoteShare", "SharedRowGradient", "rows_of", "shutdown_workers"]

#: ``fn(X, out)``: writes the share's rows of the result for the points X into ``out``.
ShareFn = Callable[[np.ndarray, np.ndarray], None]

#: Seconds a process polls its socket before it blocks in the kernel (see the module docstring).
_SPIN_SECONDS = 0.002
_CALL = b"c"         # + 8-byte job number: run the job on the shared points
_OK = b"k"
_ERROR = b"e"        # + pickled exception


def _shared_dir() -> str | None:
    """/dev/shm when it is a writable directory (memory, not disk), else the default temporary directory."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _buffer_file(shape: tuple[int, int]) -> Any:
    """An anonymous file (unlinked at once: nothing to clean up, whoever dies) sized for ``shape``."""
    f = tempfile.TemporaryFile(prefix="fltheory-share-", dir=_shared_dir())
    f.truncate(max(1, 8 * shape[0] * shape[1]))
    return f


def _mapped(fd: int, shape: tuple[int, int]) -> np.ndarray:
    """A float64 array of ``shape`` over a shared mapping of the file ``fd`` (the mapping
    outlives the descriptor, which the caller may close)."""
    if shape[0] * shape[1] == 0:
        return np.zeros(shape)
    view = mmap.mmap(fd, 8 * shape[0] * shape[1])
    return np.frombuffer(view, dtype=np.float64).reshape(shape)


def _send_fds(conn: Connection, fds: list[int]) -> None:
    with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        reduction.sendfds(sock, fds)


def _recv_fds(conn: Connection, n: int) -> list[int]:
    with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        return list(reduction.recvfds(sock, n))


def _await(conn: Connection) -> None:
    """Poll ``conn`` for up to _SPIN_SECONDS (returns as soon as a message is there)."""
    end = time.perf_counter() + _SPIN_SECONDS
    while not conn.poll(0) and time.perf_counter() < end:
        pass


def _error_message(exc: BaseException) -> bytes:
    try:
        return _ERROR + pickle.dumps(exc)
    except Exception as unpicklable:                   # reported as text instead
        return _ERROR + pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc} (not picklable: {unpicklable})"))


def _worker_main(conn: Connection) -> None:
    """Loop of a worker process: register, call and drop jobs until told to stop
    (or until the caller's end of the socket closes)."""
    jobs: dict[int, tuple[ShareFn, np.ndarray, np.ndarray]] = {}
    while True:
        try:
            _await(conn)
            msg = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            if msg[:1] == _CALL:
                fn, X, out = jobs[int.from_bytes(msg[1:9], "little")]
                fn(X, out)
                conn.send_bytes(_OK)
                continue
            request = pickle.loads(msg)
            if request[0] == "stop":
                return
            if request[0] == "drop":
                jobs.pop(request[1], None)
                continue
            if request[0] == "map":                                           # fn on the share's rows
                _, job, fn, args = request
                share, X, out = jobs[job]
                parts = _blockwise(share, fn, X, args)
                done = all(r is None for _, r in parts)
                conn.send_bytes(_OK if done else _OK + pickle.dumps(parts))
                continue
            _, job, factory, args, shape = request                          # "register": two fds follow
            fds = _recv_fds(conn, 2)
            try:
                buffers = _mapped(fds[0], shape), _mapped(fds[1], shape)
            finally:
                for fd in fds:
                    os.close(fd)
            jobs[job] = (factory(*args), *buffers)
        except BaseException as exc:                   # sent back to the caller, who raises it
            conn.send_bytes(_error_message(exc))
            continue
        conn.send_bytes(_OK)


class _RowGrad:
    """``grad(Y, out=None) -> G`` on a share's own rows, from its function ``fn(Y, out)``."""

    def __init__(self, fn: ShareFn) -> None:
        self.fn = fn

    def __call__(self, Y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            out = np.empty(Y.shape)
        self.fn(Y, out)
        return out


#: ``fn(grad, Y, *args) -> value or None``: work on the rows Y (in place) of one share, with ``grad``
#: its gradient; the value (picklable) is handed back to the caller.
RowsFn = Callable[..., Any]


class PerRow:
    """An argument of ``map_rows`` with one entry per point (leading axis): each share
    receives its own rows of it; every other argument is passed to every share unchanged."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


class _Repeated:
    """One row repeated ``n`` times, as sent to a worker (rebuilt there as a read-only broadcast)."""

    __slots__ = ("n", "row")

    def __init__(self, row: np.ndarray, n: int) -> None:
        self.row, self.n = row, n

    def __reduce__(self) -> tuple[Any, ...]:
        return _repeat, (self.row, self.n)


def _repeat(row: np.ndarray, n: int) -> np.ndarray:
    return np.broadcast_to(row, (n, *row.shape))


def _rows(array: np.ndarray, rows: np.ndarray | slice, remote: bool) -> Any:
    """``array[rows]``; a broadcast of one row (leading stride 0, e.g. an optimizer's constant
    start) stays a read-only broadcast (``remote``: sent as its row alone)."""
    if array.ndim and array.strides[0] == 0 and array.shape[0] > 0:
        n = len(range(*rows.indices(array.shape[0]))) if isinstance(rows, slice) else len(rows)
        return _Repeated(array[0], n) if remote else _repeat(array[0], n)
    return array[rows]


def rows_of(args: tuple[Any, ...], rows: np.ndarray | slice, remote: bool = False,
            marked: bool = False) -> tuple[Any, ...]:
    """``args`` for the share of ``rows``: every :class:`PerRow` argument restricted to those
    rows (``remote``: in the form sent to a worker; ``marked``: still marked :class:`PerRow`,
    for a later cut into blocks), anything else unchanged."""
    return tuple((PerRow(_rows(np.asarray(a.array), rows, remote)) if marked
                  else _rows(np.asarray(a.array), rows, remote)) if isinstance(a, PerRow) else a for a in args)


def _blockwise(share: ShareFn, fn: RowsFn, Y: np.ndarray, args: tuple[Any, ...]) -> list[tuple[slice, Any]]:
    """``fn`` on a share's rows Y (in place) cut into the share's cache blocks, each block doing
    all its work before the next: a share function with ``block_rows`` and ``block(a, b)``
    (e.g. quadratic clients: 8 MB of Hessians) gives blocks, any other one block.  Rows are
    independent, so every row sees the same operations in any cut.  Returns (rows of the
    block, what ``fn`` returned) per block."""
    m = Y.shape[0]
    per, block = getattr(share, "block_rows", None), getattr(share, "block", None)
    if not per or block is None or per >= m:
        return [(slice(0, m), fn(_RowGrad(share), Y, *rows_of(args, slice(0, m))))]
    parts = []
    for a in range(0, m, per):
        rows = slice(a, min(m, a + per))
        parts.append((rows, fn(_RowGrad(block(rows.start, rows.stop)), Y[rows], *rows_of(args, rows))))
    return parts


_CHILD = ("import sys, json, os; sys.path[:0] = json.loads(os.environ.pop('FLTHEORY_SHARE_PATH')); "
          "from fltheory.problems._process_shares import _child_entry; _child_entry({fd})")
_PACKAGE_ENV = "FLTHEORY_SHARE_PACKAGE"


def _package_file() -> str:
    import fltheory
    return os.path.realpath(fltheory.__file__)


def _child_entry(fd: int) -> None:
    """Entry point of a worker process started by :class:`_Worker` (``fd``: its end of the
    socket pair).  The worker ignores SIGINT (an interrupt is the caller's to handle; the
    caller stops the worker when needed) and refuses to serve (exit code 3) when it
    imported another fltheory than its caller."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    expected = os.environ.pop(_PACKAGE_ENV, None)
    if expected is not None and _package_file() != expected:
        print(f"fltheory share worker: imported {_package_file()}, the caller uses {expected}", file=sys.stderr)
        sys.exit(3)
    _worker_main(Connection(fd))


def _search_path() -> list[str]:
    """The caller's import path for a worker: the directory of the fltheory it imported first,
    then every entry of ``sys.path`` made absolute (``''`` is the current directory now)."""
    first = os.path.dirname(os.path.dirname(_package_file()))
    return [first] + [os.path.abspath(p or os.curdir) for p in sys.path if isinstance(p, str)]


class _Worker:
    """One worker process and the caller's end of its socket (used under ``self.lock``).

    Started as ``python -c`` with this interpreter, the caller's import path and in a
    session of its own (a terminal's Ctrl-C reaches only the caller), not through
    ``multiprocessing``, whose ``spawn`` re-runs the caller's main script and refuses
    children of daemonic processes such as Dask's workers.  Any interruption between a
    message and its complete reply (Ctrl-C in the caller, a signal, an error while
    sending) leaves the socket out of step: the worker is then killed and forgotten
    (``broken``), and the shares that used it register again on a new one."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        env = dict(os.environ, FLTHEORY_SHARE_PATH=json.dumps(_search_path()))
        env[_PACKAGE_ENV] = _package_file()
        try:
            fd = theirs.fileno()
            self.process = subprocess.Popen([sys.executable, "-c", _CHILD.format(fd=fd)], pass_fds=(fd,),
                                            stdin=subprocess.DEVNULL, env=env, close_fds=True,
                                            start_new_session=True)
        except OSError as exc:
            ours.close()
            raise WorkerProcessError(f"cannot start a share worker process with {sys.executable!r}: {exc}") from exc
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.lock = threading.Lock()
        self.next_job = 0
        self.pending: list[int] = []            # jobs to drop, left by finalisers that found the lock taken
        self.closed = False

    def send_drops(self, jobs: list[int]) -> None:
        """Tell the worker to forget ``jobs`` (no reply; with ``self.lock`` held)."""
        for job in jobs:
            try:
                self.send(pickle.dumps(("drop", job)), drops=False)
            except WorkerProcessError:              # gone: nothing left to forget
                return

    def _gone(self, exc: BaseException) -> WorkerProcessError:
        return WorkerProcessError(f"the share worker process {self.process.pid} is gone "
                                  f"(exit code {self.process.poll()}): {type(exc).__name__} {exc}")

    def broken(self) -> None:
        """Kill and forget this worker: its socket may hold half a message."""
        self.closed = True
        with _WORKERS_LOCK:
            for slot, w in list(_WORKERS.items()):
                if w is self:
                    del _WORKERS[slot]
        try:
            self.process.kill()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.conn.close()

    @contextlib.contextmanager
    def _exchange(self, *failures: type[BaseException]) -> Iterator[None]:
        """Around one side of an exchange on the socket: anything raised inside leaves the
        socket out of step, so the worker is killed (:meth:`broken`); ``failures`` (the
        socket's own errors) are raised as :class:`WorkerProcessError`, anything else
        (an interrupt) as it is."""
        try:
            yield
        except failures as exc:
            self.broken()
            raise self._gone(exc) from exc
        except BaseException:
            self.broken()
            raise

    def send(self, msg: bytes, fds: list[int] | None = None, drops: bool = True) -> None:
        """Send ``msg`` (and the file descriptors ``fds``) with ``self.lock`` held, after any
        drops the finalisers left."""
        while drops and self.pending:
            self.send_drops([self.pending.pop()])       # pop is atomic: a finaliser may append meanwhile
        with self._exchange(OSError, ValueError):
            self.conn.send_bytes(msg)
            if fds:
                _send_fds(self.conn, fds)

    def reply(self) -> Any:
        """Wait for the worker's answer to the last message: raise the error it reports, or
        return the value it sent (None if none)."""
        with self._exchange(EOFError, OSError):
            _await(self.conn)
            msg = self.conn.recv_bytes()
        if msg[:1] != _OK:
            raise pickle.loads(msg[1:])
        return pickle.loads(msg[1:]) if len(msg) > 1 else None

    def alive(self) -> bool:
        return not self.closed and self.process.poll() is None

    def stop(self) -> None:
        with self.lock:
            if not self.closed:
                try:
                    self.conn.send_bytes(pickle.dumps(("stop",)))
                except (OSError, ValueError):
                    pass
            self.closed = True
            self.conn.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


_WORKERS: dict[int, _Worker] = {}
_WORKERS_LOCK = threading.Lock()


def _forget_workers() -> None:
    """In a forked child: the parent's workers are not ours to use (nor to stop)."""
    _WORKERS.clear()


os.register_at_fork(after_in_child=_forget_workers)


def _worker(slot: int) -> _Worker:
    """The process-wide worker of share slot ``slot`` (started on first use, again if it died)."""
    with _WORKERS_LOCK:
        w = _WORKERS.get(slot)
        if w is None or not w.alive():
            w = _WORKERS[slot] = _Worker()
        return w


@atexit.register
def shutdown_workers() -> None:
    """Stop every worker process of this process (they are started again when next needed)."""
    with _WORKERS_LOCK:
        workers = list(_WORKERS.values())
        _WORKERS.clear()
    for w in workers:
        w.stop()


def _drop(worker_ref: Any, job: int, pid: int) -> None:
    """Finaliser of a RemoteShare: the worker forgets the job (if both still exist).

    A finaliser can run inside any allocation, including one made while this thread holds
    the worker's lock (garbage collection during a call): then the drop is left in
    ``pending`` for the next message instead of waiting for the lock (a deadlock)."""
    w = worker_ref()
    if w is None or os.getpid() != pid or not w.alive():
        return
    if not w.lock.acquire(blocking=False):
        w.pending.append(job)
        return
    try:
        w.send_drops([job])
    finally:
        w.lock.release()


class RemoteShare:
    """One share of an oracle call, computed in the worker process of ``slot``.

    ``rows``: the positions, in the caller's points (``n_points`` rows of ``dim``), of the
    rows the share computes; ``factory(*args)`` must return the share's function
    ``fn(Xs, outs)`` on those rows alone, in that order (``Xs = X[rows]``, result rows
    into ``outs``).  It is pickled to the worker once, here, and built there (and here
    only in a forked child).  Calling the share runs the caller's own work ``own()`` in
    this thread while the worker computes."""

    def __init__(self, slot: int, factory: Callable[..., ShareFn], args: tuple[Any, ...],
                 rows: np.ndarray, n_points: int, dim: int) -> None:
        self.slot, self.factory, self.args = slot, factory, args
        self.rows = np.asarray(rows, dtype=np.int64)
        self.n_points = n_points
        if self.rows.size and (self.rows.min() < 0 or self.rows.max() >= n_points):
            raise InvalidProblemError(f"share rows must lie in [0, {n_points}), got {self.rows.min()} .. "
                                      f"{self.rows.max()}")
        self.shape = (self.rows.shape[0], dim)
        self.pid = os.getpid()
        self._local: ShareFn | None = None
        self._lock = threading.Lock()
        self._register()

    def _register(self) -> None:
        """Send the share (``factory`` and ``args``) and its two shared buffers to the current
        worker of its slot (started if needed)."""
        w = _worker(self.slot)
        files = [_buffer_file(self.shape) for _ in range(2)]
        try:
            X, out = (_mapped(f.fileno(), self.shape) for f in files)
            with w.lock:
                job = w.next_job
                w.next_job += 1
                w.send(pickle.dumps(("register", job, self.factory, self.args, self.shape)),
                       fds=[f.fileno() for f in files])
                w.reply()
        finally:
            for f in files:
                f.close()                    # the mappings stay
        self._worker, self.job, self.X, self.out = w, job, X, out
        self._call = _CALL + job.to_bytes(8, "little")
        weakref.finalize(self, _drop, weakref.ref(w), job, self.pid)

    def _live(self) -> _Worker:
        """The share's worker, registered again on a new one if it died or was stopped."""
        if not self._worker.alive():
            self._register()
        return self._worker

    def local(self) -> ShareFn:
        """The share's function in this process (a forked child, or a caller whose workers are
        slower than its own core at the moment, computes the share's rows itself)."""
        if self._local is None:
            self._local = self.factory(*self.args)
        return self._local

    def check(self, X: np.ndarray) -> None:
        """InvalidProblemError unless X holds the caller's points (n_points, dim): the gathers
        clip positions (they would silently repeat the last row)."""
        if X.ndim != 2 or X.shape[0] < self.n_points or X.shape[1] != self.shape[1]:
            raise InvalidProblemError(f"the bound gradient needs points of shape (>= {self.n_points}, "
                                      f"{self.shape[1]}), got shape {X.shape}")

    def compute_here(self, X: np.ndarray, out: np.ndarray) -> None:
        """The share's rows of the result, computed in this process (the same function)."""
        self.check(X)
        outs = np.empty(self.shape)
        self.local()(X[self.rows], outs)
        out[self.rows] = outs

    def map_here(self, fn: RowsFn, Y: np.ndarray, args: tuple[Any, ...]) -> list[tuple[np.ndarray, Any]]:
        """:meth:`map` computed in this process (the same function, block by block)."""
        Ys = Y[self.rows]
        parts = _blockwise(self.local(), fn, Ys, rows_of(args, self.rows, marked=True))
        Y[self.rows] = Ys
        return [(self.rows[rows], result) for rows, result in parts]

    def __call__(self, X: np.ndarray, out: np.ndarray, own: Callable[[], None]) -> None:
        """The share's rows of the result at the points X (n_points, dim) written into
        ``out``, while ``own()`` (the caller's share) runs in this thread."""
        self.check(X)
        if os.getpid() != self.pid:                 # a forked child: no worker of ours
            self.compute_here(X, out)
            own()
            return
        with self._lock:
            w = self._live()
            with w.lock:
                np.take(X, self.rows, axis=0, out=self.X, mode="clip")   # rows checked above
                w.send(self._call)
                try:
                    own()
                finally:
                    w.reply()                       # never leave while the worker still writes
                out[self.rows] = self.out

    def map(self, fn: RowsFn, Y: np.ndarray, args: tuple[Any, ...], own: Callable[[], None]
            ) -> list[tuple[np.ndarray, Any]]:
        """``fn(grad, Y[rows], *args[rows])`` on the share's rows of Y (in place, in the
        worker, block by block: :func:`_blockwise`; ``grad`` is a block's gradient), while
        ``own()`` runs here; returns (the block's rows in Y, what ``fn`` returned) per block."""
        if os.getpid() != self.pid:                 # a forked child: no worker of ours
            done = self.map_here(fn, Y, args)
            own()
            return done
        with self._lock:
            w = self._live()
            with w.lock:
                np.take(Y, self.rows, axis=0, out=self.X, mode="clip")   # rows checked by the caller
                w.send(pickle.dumps(("map", self.job, fn, rows_of(args, self.rows, remote=True, marked=True))))
                try:
                    own()
                finally:
                    parts = w.reply() or [(slice(0, self.rows.shape[0]), None)]
                Y[self.rows] = self.X
        return [(self.rows[rows], result) for rows, result in parts]


#: A call through the workers that took longer than this times the caller's own share times
#: the number of shares sends the next calls to this process (``SharedRowGradient._judge``).
_SLOWER = 1.1
_SLOW_IN_A_ROW = 3
_BACKOFF_START = 8
_BACKOFF_MAX = 4096


class SharedRowGradient:
    """A bound gradient over shares of clients: the first share in the calling thread,
    the others in worker processes (:class:`RemoteShare`).

    ``grad(X, out=None) -> G`` (the hook ``Federation.row_gradient``), and
    ``map_rows(fn, Y, args)``: ``fn(grad_s, Y_s, *args_s)`` on every share's rows Y_s of Y
    at once (in place), ``grad_s`` being the share's gradient on its own rows and
    ``args_s`` the args with every :class:`PerRow` restricted to those rows (:func:`rows_of`).
    Per-row work (e.g. all the local steps of a round) then costs one message per share
    instead of one per step.
    ``own``: the first share's function on the caller's points; ``own_local``: a factory
    and its arguments for the same share on its own rows ``own_rows`` (built on first use).
    ``whole``: when given, a function of all rows that single calls use instead of the
    workers (where one message per call costs more than the share it saves)."""

    def __init__(self, own: ShareFn, own_local: tuple[Callable[..., ShareFn], tuple[Any, ...]],
                 own_rows: np.ndarray, remote: list[RemoteShare], n_points: int,
                 whole: ShareFn | None = None) -> None:
        self.own, self.own_local, self.own_rows = own, own_local, np.asarray(own_rows, dtype=np.int64)
        self.remote, self.n_points, self.whole = remote, n_points, whole
        self._local: ShareFn | None = None
        self.here = 0                   # calls left to compute every share in this process
        self._backoff = _BACKOFF_START
        self._slow = 0                  # slow calls through the workers in a row

    def _workers_now(self) -> bool:
        """Whether this call goes to the workers (see :meth:`_judge`)."""
        if self.here > 0:
            self.here -= 1
            return False
        return True

    def _judge(self, own: float, total: float) -> None:
        """After a call through the workers.  A call is slow when it took longer than the
        caller's own share times the number of shares (the time to compute them all here),
        e.g. because another process holds the workers' core.  Three slow calls in a row send
        the next ``here`` calls to this process, a number that doubles every time this happens
        again (8 .. 4096); a call that paid starts again at 8.  A single slow call is normal
        (a worker that slept, e.g. during the calls made here, wakes late and cold), so the
        count of slow calls starts afresh after every stay here.  Which process computes a
        share never changes a bit."""
        if total > _SLOWER * own * (1 + len(self.remote)):
            self._slow += 1
            if self._slow >= _SLOW_IN_A_ROW:
                self.here, self._backoff = self._backoff, min(2 * self._backoff, _BACKOFF_MAX)
                self._slow = 0
        else:
            self._slow, self._backoff = 0, _BACKOFF_START

    def __call__(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        X = np.ascontiguousarray(X)
        if out is None:
            out = np.empty(X.shape)
        if self.whole is not None:
            self.whole(X, out)
            return out
        if not self._workers_now():
            for r in self.remote:
                r.compute_here(X, out)
            self.own(X, out)
            return out
        spent = [0.0]

        def own() -> None:
            start = time.perf_counter()
            self.own(X, out)
            spent[0] = time.perf_counter() - start

        def chain(j: int) -> None:
            if j == len(self.remote):
                own()
            else:
                self.remote[j](X, out, lambda: chain(j + 1))
        start = time.perf_counter()
        chain(0)
        self._judge(spent[0], time.perf_counter() - start)
        return out

    def map_rows(self, fn: RowsFn, Y: np.ndarray, args: tuple[Any, ...]) -> list[tuple[np.ndarray, Any]]:
        """``fn(grad_b, Y_b, *args_b)`` on the rows of every share at once (each share block by
        block, :func:`_blockwise`), Y updated in place; returns (rows of Y, what ``fn`` returned)
        per block, the caller's share first."""
        if Y.ndim != 2 or Y.shape[0] != self.n_points or not Y.flags.c_contiguous:
            raise InvalidProblemError(f"map_rows needs C-contiguous points of shape ({self.n_points}, d), "
                                      f"got shape {Y.shape}")
        if self._local is None:
            factory, fargs = self.own_local
            self._local = factory(*fargs)
        local, rows = self._local, self.own_rows
        results: list[list[tuple[np.ndarray, Any]]] = [[] for _ in range(1 + len(self.remote))]
        spent = [0.0]

        def own() -> None:
            start = time.perf_counter()
            Ys = Y[rows]
            results[0] = [(rows[b], r) for b, r in _blockwise(local, fn, Ys, rows_of(args, rows, marked=True))]
            Y[rows] = Ys
            spent[0] = time.perf_counter() - start

        if not self._workers_now():
            own()
            for j, r in enumerate(self.remote):
                results[j + 1] = r.map_here(fn, Y, args)
            return [part for share in results for part in share]

        def chain(j: int) -> None:
            if j == len(self.remote):
                own()
            else:
                results[j + 1] = self.remote[j].map(fn, Y, args, lambda: chain(j + 1))
        start = time.perf_counter()
        chain(0)
        self._judge(spent[0], time.perf_counter() - start)
        return [part for share in results for part in share]
