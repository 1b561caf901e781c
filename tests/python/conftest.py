# SPDX-License-Identifier: GPL-2.0
"""pytest fixtures of the Python binding's tests: a real kvcached.

Each Daemon is a kvcached (build/helper/kvcached, or $KVC_KVCACHED) in memfd
mode with a small configuration of its own in a temporary directory, as
tests/selftests/kvcd_fixture.h starts it. Namespaces are created with
`kvcachectl ns-create` when the tests run as root; otherwise (only uid 0
may create namespaces) the state directory's `namespaces` file is seeded
with ids of our own before the daemon starts. Daemons are killed and their
directories removed even when a test fails (and with PR_SET_PDEATHSIG even
when pytest itself dies); a failing test shows the daemon's log.

The library is build/lib/libkvcache.so (make lib), or $KVCACHE_LIB.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
PYDIR = REPO / "helper" / "python"
if str(PYDIR) not in sys.path:
    sys.path.insert(0, str(PYDIR))

import kvcache  # noqa: E402

KVCACHED = Path(os.environ.get("KVC_KVCACHED")
                or REPO / "build" / "helper" / "kvcached")
KVCACHECTL = Path(os.environ.get("KVC_KVCACHECTL")
                  or REPO / "build" / "helper" / "kvcachectl")
IS_ROOT = os.geteuid() == 0

BLOCK_SIZE = 64 << 10           # the pool's block size
POOL_SIZE = 64 << 20            # 1024 blocks
BLOCK_BYTES = 4096              # what the test namespaces store per block
TPB = 16                        # tokens per block
SEEDED_NS = 64                  # ids seeded when not root

IDENTITY = dict(model="kvcache-py-test/model", weights_revision="r1",
                tokenizer="tok-1", kv_layout="paged-nhd", kv_dtype="bf16",
                tokens_per_block=TPB)

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the daemon's child before exec: never outlive pytest."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def socket_accepts(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Daemon:
    """One kvcached of a test, in memfd mode, in a directory of its own."""

    def __init__(self, g3: bool = False, pool_size: int = POOL_SIZE,
                 extra_conf: str = "") -> None:
        # Short: a socket path must fit in sun_path (108 bytes).
        self.dir = Path(tempfile.mkdtemp(prefix="kvpy-", dir="/tmp"))
        # Reachable by another uid (the permission tests run as nobody).
        os.chmod(self.dir, 0o755)
        self.sock = str(self.dir / "kvcached.sock")
        self.state = self.dir / "state"
        self.conf = self.dir / "kvcached.conf"
        self.logfile = self.dir / "kvcached.log"
        self.g3 = self.dir / "g3" if g3 else None
        self.proc: subprocess.Popen[bytes] | None = None
        self._next_ns = 1
        conf = (
            "# tests/python\n"
            "[daemon]\n"
            "socket_mode = 0666\n"
            "metrics = off\n"
            "log_level = info\n"
            "[pool]\n"
            f"memfd_size = {pool_size >> 20}M\n"
            f"block_size = {BLOCK_SIZE >> 10}K\n"
            "hugetlb = no\n"
            "mlock = no\n"
            "[eviction]\n"
            "policy = lru\n"
            "interval = 100ms\n"
            "pool_admit = 1\n"
            "g3_admit = 1\n"
            "g4_admit = 1\n")
        if self.g3 is not None:
            self.g3.mkdir()
            conf += ("[g3]\n"
                     f"directory = {self.g3}\n"
                     "capacity = 64M\n"
                     "write = through\n"
                     "fsync = never\n")
        self.conf.write_text(conf + extra_conf)
        if not IS_ROOT:
            self._seed_namespaces()

    def _seed_namespaces(self) -> None:
        """Not root: the namespaces this daemon will have, all ours."""
        self.state.mkdir(mode=0o700, exist_ok=True)
        with open(self.state / "namespaces", "w") as f:
            for ns in range(1, SEEDED_NS + 1):
                f.write(f"{ns} {os.geteuid()} {os.getegid()} 700\n")

    # -- life ------------------------------------------------------------

    def start(self, timeout: float = 20.0) -> "Daemon":
        assert self.proc is None or self.proc.poll() is not None
        # A daemon killed a moment ago may still have its listening socket
        # (its io_uring is torn down after the process is reaped): remove
        # the file, so that only the new daemon's socket can accept below.
        try:
            os.unlink(self.sock)
        except FileNotFoundError:
            pass
        log = open(self.logfile, "ab")
        try:
            self.proc = subprocess.Popen(
                [str(KVCACHED), "--mode", "memfd", "--socket", self.sock,
                 "--state-dir", str(self.state), "--config", str(self.conf)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent, close_fds=True)
        finally:
            log.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if socket_accepts(self.sock):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"kvcached exited ({self.proc.returncode}) "
                                   f"before listening:\n{self.log()}")
            time.sleep(0.01)
        raise RuntimeError(f"kvcached did not accept on {self.sock} within "
                           f"{timeout} s:\n{self.log()}")

    def stop(self) -> int | None:
        """SIGTERM, and wait (10 s, then SIGKILL)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.terminate()
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        """SIGKILL: the daemon dies mid-session."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> "Daemon":
        self.stop()
        return self.start()

    def cleanup(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")
        except OSError:
            return "(no log)"

    # -- administration --------------------------------------------------

    def ctl(self, *args: str, check: bool = True) -> str:
        """Run kvcachectl against this daemon; its stdout."""
        r = subprocess.run([str(KVCACHECTL), "-S", self.sock, *args],
                           capture_output=True, text=True, timeout=30)
        if check and r.returncode:
            raise AssertionError(f"kvcachectl {' '.join(args)}: "
                                 f"{r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def new_ns(self, uid: int = 0, gid: int = 0, mode: int = 0o700) -> int:
        """A namespace no test used before: created through the daemon as
        root (owned by uid:gid with mode), one of the seeded ones (ours,
        0700) otherwise."""
        ns = self._next_ns
        self._next_ns += 1
        if IS_ROOT:
            self.ctl("ns-create", str(ns), str(uid), str(gid), f"{mode:o}")
        elif ns > SEEDED_NS:
            pytest.skip("out of seeded namespaces")
        return ns


def make_client(d: Daemon, **kw) -> kvcache.Client:
    return kvcache.Client(socket=d.sock, **kw)


def open_ns(client: kvcache.Client, ns: int, block_bytes: int = BLOCK_BYTES,
            **identity) -> kvcache.Namespace:
    return client.namespace(ns, **{**IDENTITY, **identity},
                            block_bytes=block_bytes)


# ---- fixtures ---------------------------------------------------------------


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):  # noqa: ANN001
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def _failed(request: pytest.FixtureRequest) -> bool:
    rep = getattr(request.node, "rep_call", None)
    return rep is not None and rep.failed


@pytest.fixture(scope="session", autouse=True)
def _binaries() -> None:
    missing = [str(p) for p in (KVCACHED, KVCACHECTL)
               if not os.access(p, os.X_OK)]
    if missing:
        pytest.exit(f"missing {', '.join(missing)}: run 'make helper'",
                    returncode=1)
    try:
        kvcache.load_library()
    except OSError as e:
        pytest.exit(f"{e}", returncode=1)


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One kvcached for a whole test module."""
    d = Daemon()
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


@pytest.fixture
def make_daemon(request: pytest.FixtureRequest) -> Iterator:
    """A factory of daemons of the test's own (started), cleaned up after
    it; their logs are shown when it fails."""
    made: list[Daemon] = []

    def make(**kw) -> Daemon:
        d = Daemon(**kw)
        made.append(d)
        return d.start()

    try:
        yield make
    finally:
        for d in made:
            if _failed(request):
                sys.stderr.write(f"\n---- kvcached log ({d.dir}) ----\n"
                                 f"{d.log()}\n")
            d.cleanup()


@pytest.fixture
def client(daemon: Daemon,
           request: pytest.FixtureRequest) -> Iterator[kvcache.Client]:
    c = make_client(daemon)
    try:
        yield c
    finally:
        c.close()
        if _failed(request):
            sys.stderr.write(f"\n---- kvcached log ({daemon.dir}) ----\n"
                             f"{daemon.log()[-8000:]}\n")


@pytest.fixture
def ns(client: kvcache.Client, daemon: Daemon) -> Iterator[kvcache.Namespace]:
    """A namespace of the test's own, empty, with the standard identity."""
    n = open_ns(client, daemon.new_ns())
    try:
        yield n
    finally:
        n.close()
