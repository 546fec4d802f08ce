"""Byte automata of regexes, built by outlines-core in a helper process under a memory and a
time limit, so a regex whose automaton explodes is a GrammarError instead of a dead server.

outlines-core determinizes a regex into a DFA before it indexes tokens, and some short regexes
have exponentially many DFA states: `(a|b)*a(a|b){40}`, or a pattern like `^.*[a-z0-9]+.*$` cut
to a maxLength (`.{0,42}[a-z0-9]{1,42}.{0,42}`: after a run of letters, the last part may have
started at any subset of positions). Building one takes minutes of CPU and then aborts the whole
process in a failed allocation, which no Python code can catch. Every regex radixgen indexes is
therefore first built here, over single bytes (a fraction of the token index's cost), in a child
process: its answer bounds the token index (`index.size_budget.check_index_size`), and the byte
automaton itself serves the uniqueItems counts (`unique.values`).

    probe = AutomatonProbe()
    start, finals, moves = probe.automaton(r'"[a-z]{2}"')    # moves: {state: {byte: next}}
    entries = probe.weighted_moves(regex, extra_tokens, weights)

The child (`python -m radixgen.grammar.automata.probe`) serves requests one at a time over its
stdin/stdout (length-prefixed pickles); it is started on first use and again after it dies or
times out, and says when it is ready, so its start-up is not counted against a regex's time.

Time limit: a regex gets `PROBE_BASE_SECONDS` plus `PROBE_SECONDS_PER_CHAR` per character, at
most `seconds` (20 s). Automata that explode do so from short text (`(a|b)*a(a|b){40}` is 17
characters), while the regex of a large schema is long; so a short bomb is refused in under two
seconds, and a large schema keeps several times what it needs: the slowest regex of the schema
corpus (tests/grammar/schemas.py), 6,466 characters, takes 2.7 s of its 14.4 s.

The child dies with its parent, even while it is busy inside outlines-core (which holds the
GIL): on Linux through `PR_SET_PDEATHSIG`, which fires when the *thread* that forked the child
ends, so children are forked from one long-lived spawner thread; elsewhere a watch thread in the
child exits once its parent is gone (when outlines-core next lets it run).
"""

from __future__ import annotations

import atexit
import os
import pickle
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future

PROBE_MEMORY = (
    4 << 30
)  # bytes of address space the child may map (outlines-core's failed allocations abort)
PROBE_SECONDS = (
    20.0  # at most, per regex; the largest schemas the index budget admits take a few seconds
)
PROBE_BASE_SECONDS = (
    1.5  # per regex, plus PROBE_SECONDS_PER_CHAR per character (see the module doc)
)
PROBE_SECONDS_PER_CHAR = 0.002
_START_SECONDS = 30.0  # for the child to import outlines-core and say it is ready
_HEADER = 8
_READY = b"ready"


class AutomatonProbe:
    """A helper process that builds byte automata; one request at a time (a lock)."""

    def __init__(self, memory: int = PROBE_MEMORY, seconds: float = PROBE_SECONDS) -> None:
        self.memory, self.seconds = memory, seconds
        self._lock = threading.Lock()
        self._child: subprocess.Popen | None = None
        atexit.register(self.close)

    def seconds_for(self, regex: str) -> float:
        """The time a regex's automaton may take to build."""
        return min(self.seconds, PROBE_BASE_SECONDS + PROBE_SECONDS_PER_CHAR * len(regex))

    def automaton(self, regex: str) -> tuple:
        """(start state, final states, {state: {byte: next state}}) of `regex` (Rust syntax,
        matched whole) over single bytes. Raises GrammarError for an invalid regex or one whose
        automaton does not fit the probe's limits."""
        return self._ask((regex, (), None))

    def weighted_moves(self, regex: str, extra_tokens: tuple, weights: list) -> int:
        """Sum over the byte automaton's states of `weights[b]` for each byte b a state allows;
        `extra_tokens` are multi-byte tokens the regex spells (ids 256 on, never weighed)."""
        return self._ask((regex, tuple(extra_tokens), list(weights)))

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _ask(self, request: tuple):
        from radixgen.grammar.matcher import (  # (not at the top: the child must not import torch)
            GrammarError,
            RegexTooLarge,
        )

        seconds = self.seconds_for(request[0])
        with self._lock:
            try:
                child = self._child if self._child and self._child.poll() is None else self._start()
                _write(child.stdin, pickle.dumps(request))
                status, value = pickle.loads(_read(child.stdout, time.monotonic() + seconds))
            except BaseException as exc:
                self._stop()  # (a request interrupted midway would leave its reply in the pipe)
                if not isinstance(exc, (OSError, EOFError, TimeoutError)):
                    raise
                raise RegexTooLarge(
                    "constraint too large to compile: its automaton "
                    + (
                        "took more than %.1f s to build" % seconds
                        if isinstance(exc, TimeoutError)
                        else "needed more than %.1f GiB to build" % (self.memory / (1 << 30))
                    )
                    + " (regexes with ambiguous repeats, like `(a|b)*a(a|b){40}` or a pattern "
                    "`^.*[a-z]+.*$` under a maxLength, have exponentially many states)"
                ) from None
        if status == "error":
            raise GrammarError(f"cannot compile regex: {value}")
        return value

    def _start(self) -> subprocess.Popen:
        self._stop()
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
        }
        self._child = _spawn(
            [sys.executable, "-m", __name__, str(self.memory), str(os.getpid())], env
        )
        if _read(self._child.stdout, time.monotonic() + _START_SECONDS) != _READY:
            raise EOFError
        return self._child

    def _stop(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child.wait()
            for pipe in (self._child.stdin, self._child.stdout):
                pipe.close()
            self._child = None


_default: AutomatonProbe | None = None
_default_lock = threading.Lock()


def default_probe() -> AutomatonProbe:
    global _default
    with _default_lock:
        if _default is None:
            _default = AutomatonProbe()
        return _default


_spawns: "queue.SimpleQueue[tuple[list, dict, Future]]" = queue.SimpleQueue()
_spawner: threading.Thread | None = None


def _spawn(args: list, env: dict) -> subprocess.Popen:
    """Popen(args) with pipes, forked from the spawner thread, which lives as long as the
    process (a child's PR_SET_PDEATHSIG fires when the thread that forked it ends)."""
    global _spawner
    with _default_lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(
                target=_spawn_forever, name="automaton-probe-spawner", daemon=True
            )
            _spawner.start()
    done: Future = Future()
    _spawns.put((args, env, done))
    return done.result()


def _spawn_forever() -> None:
    while True:
        args, env, done = _spawns.get()
        try:
            done.set_result(
                subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            )
        except BaseException as exc:  # (reaches the caller waiting on `done`)
            done.set_exception(exc)


def _write(pipe, data: bytes) -> None:
    pipe.write(len(data).to_bytes(_HEADER, "little") + data)
    pipe.flush()


def _read(pipe, deadline: float) -> bytes:
    """A length-prefixed message from `pipe`, or TimeoutError at `deadline`, EOFError when the
    writer is gone."""

    def exactly(n: int) -> bytes:
        chunks, got = (
            [],
            0,
        )  # (joined once: adding each pipe-sized chunk to the rest copies it all again)
        while got < n:
            if not select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise TimeoutError
            chunk = os.read(pipe.fileno(), n - got)
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    return exactly(int.from_bytes(exactly(_HEADER), "little"))


# ------------------------------------------------------------------ the child


def _build(regex: str, extra_tokens: tuple, weights: list | None):
    from outlines_core import Index, Vocabulary

    tokens = {bytes([b]): [b] for b in range(256)}
    tokens.update({token: [256 + i] for i, token in enumerate(extra_tokens)})
    index = Index(regex, Vocabulary(256 + len(extra_tokens), tokens))
    moves = {
        state: {b: nxt for b, nxt in out.items() if b < 256}
        for state, out in index.get_transitions().items()
    }
    if weights is not None:
        return sum(weights[b] for out in moves.values() for b in out)
    return index.get_initial_state(), frozenset(index.get_final_states()), moves


def _die_with_parent(parent: int) -> None:
    """Exit when the process that started this one is gone (see the module doc)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the watch below still holds
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _serve(memory: int, parent: int) -> None:
    _die_with_parent(parent)
    import outlines_core  # noqa: F401  (before `ready`: its import is start-up, not a regex's time)

    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (ImportError, ValueError, OSError):
        pass  # no address-space limit here (macOS): the time limit still holds
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    _write(stdout, _READY)
    while True:
        header = stdin.read(_HEADER)
        if len(header) < _HEADER:
            return
        request = pickle.loads(stdin.read(int.from_bytes(header, "little")))
        try:
            reply = ("ok", _build(*request))
        except (ValueError, RuntimeError) as exc:
            reply = ("error", str(exc))
        _write(stdout, pickle.dumps(reply))


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
