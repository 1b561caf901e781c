# SPDX-License-Identifier: GPL-2.0
"""lmcache_bench: kvcache against LMCache's storage engine, side by side.

The peer is LMCache (PyPI, 0.5.6) as its engine stores and retrieves KV
chunks: its StorageManager with the LocalCPUBackend (the CPU-memory tier
every LMCache deployment has in front of disk or Redis). Its memory
objects come from the backend's allocator; a store allocates one, copies
the block in (the engine's from_gpu) and batched_put()s it; a load get()s
it, copies it out (to_gpu) and drops the reference. On this machine
LMCache runs with its CPU device (no CUDA), so no GPU copy is involved on
either side. kvcache is the real kvcached (memfd mode, DRAM tier only)
through the project's Python binding (the kvcache package,
helper/python/kvcache/, over libkvcache), so both sides pay the same
interpreter overhead per call.

The workload is peer_bench.c's: per block size (256 KiB x 256 blocks,
2 MiB x 128), store every block with one call per block, load every
block with one call per block into a host buffer, then the same with 64
blocks per call (kvcache: one store/load of 64 keys; LMCache:
batched_allocate + batched_put, batched_get). Keys: kvcache's 32-byte
chain keys; LMCache's CacheEngineKey takes an integer chunk hash, the
first 8 bytes of the same key. Every load is compared with what was
stored, outside the clock: a wrong byte ends the bench with status 1.
torch copies run on one thread (torch.set_num_threads(1)), as the
library's memcpy does.

Each call is timed alone (CLOCK_MONOTONIC); a phase's throughput is its
payload over the sum of its calls' times (MB/s, 10^6 bytes/s); p50/p99
are over the single-block calls. Runs: one untimed warm-up, then RUNS
runs with fresh keys, the two systems taking turns (order alternating).
Between runs both are emptied (kvcachectl flush as root, clear()).

Output on stdout: '#' comments, then CSV "metric,run,kvcache,peer,ratio",
metrics lmcache_OP_SIZE_UNIT; ratio is kvcache/peer for MB/s and
peer/kvcache for latency: above 1 always means kvcache did better. On
stderr at the end: min / median / max of each metric over the runs.

Usage (from the repository root, with a Python that has lmcache and
torch, e.g. a venv made by `pip install lmcache==0.5.6`):
    PYTHON tests/bench/lmcache_bench.py [RUNS] [KVCACHED]
RUNS 5, KVCACHED build/helper/kvcached (libkvcache from build/lib).

Setting it up: make bench does it (scripts/bench: `python3 -m venv
~/.cache/kvcache/lmcache-venv` and its `pip install lmcache==0.5.6`,
Python 3.11), which pulls
torch 2.15.0+cu132 and the CUDA 13 wheels (cupy, nvidia-*; 6.2 GB
installed) although nothing here uses a GPU: without one, LMCache picks
its StubCPUDevice ("torch_device_type=cpu") and the LocalCPUBackend
works on plain host memory.
"""

import atexit
import ctypes
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# LMCache logs every backend it creates at INFO: keep stderr readable.
os.environ.setdefault("LMCACHE_LOG_LEVEL", "WARNING")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from lmcache.utils import CacheEngineKey  # noqa: E402
from lmcache.v1.config import LMCacheEngineConfig  # noqa: E402
from lmcache.v1.event_manager import EventManager  # noqa: E402
from lmcache.v1.memory_management import MemoryFormat  # noqa: E402
from lmcache.v1.metadata import LMCacheMetadata  # noqa: E402
from lmcache.v1.storage_backend.storage_manager import (  # noqa: E402
    StorageManager,
)

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "helper", "python"))
import kvcache  # noqa: E402

SIZES = [("64K", 64 << 10, 1024), ("256K", 256 << 10, 256),
         ("2M", 2 << 20, 128)]
BATCH = 64
TOKENS = 16
NS_ID = 7
OPS = ["store", "load", "store_batch64", "load_batch64"]
PR_SET_PDEATHSIG = 1

children = []
tmpdir = None


def cleanup():
    global tmpdir
    for p in children:
        if p.poll() is None:
            p.terminate()
    for p in children:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
    children.clear()
    if tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)
        tmpdir = None


def die(msg):
    print(f"lmcache_bench: {msg}", file=sys.stderr)
    sys.exit(1)


def _die_with_parent():
    # The daemon must not outlive us, even if we are killed outright.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def pct_us(sorted_ns, q):
    """Nearest rank: the smallest value at or above fraction q of them."""
    r = int(q * len(sorted_ns) + 0.999999)
    return sorted_ns[max(r, 1) - 1] / 1e3


class KvcacheSide:
    """One kvcached per block size, its pool block the payload rounded
    up to a power of two; the namespace seeded in its state directory."""

    def __init__(self, binary, ctl, name, size, nblocks, runs, flush):
        bs = 4096
        while bs < size:
            bs <<= 1
        need = 2 * nblocks * bs
        pool = need * (2 if flush else 2 * (runs + 1))
        conf = os.path.join(tmpdir, f"kvcached-{name}.conf")
        state = os.path.join(tmpdir, f"state-{name}")
        self.sock = os.path.join(tmpdir, f"kvcached-{name}.sock")
        self.ctl = ctl
        self.flush = flush
        with open(conf, "w") as f:
            f.write("[daemon]\nmetrics = off\nlog_level = warn\n"
                    f"[pool]\nmemfd_size = {pool}\nblock_size = {bs}\n"
                    "hugetlb = no\nmlock = yes\n[eviction]\npool_admit = 1\n")
        os.mkdir(state, 0o700)
        with open(os.path.join(state, "namespaces"), "w") as f:
            f.write(f"{NS_ID} {os.geteuid()} {os.getegid()} 700\n")
        children.append(subprocess.Popen(
            [binary, "--config", conf, "--mode", "memfd", "--socket",
             self.sock, "--state-dir", state],
            stdout=sys.stderr, preexec_fn=_die_with_parent))
        for _ in range(200):
            try:
                self.client = kvcache.Client(self.sock)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.05)
        else:
            die("cannot connect to kvcached")
        self.ns = self.client.namespace(
            NS_ID, model="peer-bench", weights_revision="1", tokenizer="ids",
            kv_layout="blocks", kv_dtype="u8", tokens_per_block=TOKENS,
            block_bytes=size)

    def store(self, keys, src, parent):
        n = len(keys)
        got = self.ns.store(keys, src, parent=parent)
        if got != n:
            die(f"kvcache store: {got} of {n} blocks stored")

    def load(self, keys, dst):
        got = self.ns.load_into(keys, dst)
        if got != len(keys):
            die(f"kvcache load: {got} of {len(keys)} blocks found")

    def reset(self):
        if self.flush:
            subprocess.run([self.ctl, "-S", self.sock, "flush", "all"],
                           check=True, stdout=subprocess.DEVNULL)


class LmcacheSide:
    """LMCache's StorageManager with only the LocalCPUBackend."""

    def __init__(self, size, nblocks):
        # A KV_2LTD chunk of 256 tokens, one layer, in bytes.
        self.shape = torch.Size([2, 1, 256, size // 512])
        meta = LMCacheMetadata(
            model_name="peer-bench", world_size=1, local_world_size=1,
            worker_id=0, local_worker_id=0, kv_dtype=torch.uint8,
            kv_shape=(1, 2, 256, 1, size // 512), role="worker")
        # Both phases' blocks twice over, in GB as LMCache counts them.
        cfg = LMCacheEngineConfig.from_defaults(
            chunk_size=256, local_cpu=True, save_unfull_chunk=False,
            max_local_cpu_size=max(0.5, 2 * (2 * nblocks * size) / 1e9))
        self.sm = StorageManager(cfg, meta, EventManager())

    def key(self, k):
        return CacheEngineKey("peer-bench", 1, 0,
                              int.from_bytes(k[:8], "little"), torch.uint8)

    def store(self, keys, src_t, parent):
        n = len(keys)
        if n == 1:
            objs = [self.sm.allocate(self.shape, torch.uint8,
                                     fmt=MemoryFormat.KV_2LTD)]
        else:
            objs = self.sm.batched_allocate(self.shape, torch.uint8, n,
                                            fmt=MemoryFormat.KV_2LTD)
        if not objs or any(o is None for o in objs):
            die("lmcache: allocation failed")
        b = src_t.numel() // n
        for i, o in enumerate(objs):
            o.tensor.view(-1).copy_(src_t[i * b:(i + 1) * b])
        self.sm.batched_put([self.key(k) for k in keys], objs)

    def load(self, keys, dst_t):
        n = len(keys)
        if n == 1:
            objs = [self.sm.get(self.key(keys[0]))]
        else:
            objs = self.sm.batched_get([self.key(k) for k in keys])
        if any(o is None for o in objs):
            die("lmcache: a stored block is missing")
        b = dst_t.numel() // n
        for i, o in enumerate(objs):
            dst_t[i * b:(i + 1) * b].copy_(o.tensor.view(-1))
            o.ref_count_down()

    def reset(self):
        self.sm.clear()


def make_keys(ns, s, r, v, n):
    rng = np.random.default_rng((r << 16) | (s << 8) | v)
    toks = rng.integers(0, 1 << 32, n * TOKENS, dtype=np.uint64)
    keys = ns.keys(toks.astype(np.uint32))
    if len(keys) != n:
        die("kvcache keys")
    return keys


def run_phases(side, is_kvc, s, r, src_np, src_t, dst_np, dst_t, kvc_ns):
    name, size, n = SIZES[s]
    out = {}
    for v, per in ((0, 1), (1, BATCH)):
        keys = make_keys(kvc_ns, s, r, v, n)
        lat = []
        for i in range(0, n, per):
            parent = keys[i - 1] if i else None
            src = src_np[i * size:(i + per) * size] if is_kvc else \
                src_t[i * size:(i + per) * size]
            t0 = now_ns()
            side.store(keys[i:i + per], src, parent)
            lat.append(now_ns() - t0)
        out[OPS[2 * v]] = summarize(lat, n * size)
        lat = []
        for i in range(0, n, per):
            dst_np[:per * size] = 0xa5  # stale bytes must not pass
            t0 = now_ns()
            if is_kvc:
                side.load(keys[i:i + per], dst_np[:per * size])
            else:
                side.load(keys[i:i + per], dst_t[:per * size])
            lat.append(now_ns() - t0)
            if not np.array_equal(dst_np[:per * size],
                                  src_np[i * size:(i + per) * size]):
                die(f"{'kvcache' if is_kvc else 'lmcache'} returned wrong "
                    f"bytes for {name} blocks {i}..{i + per - 1}")
        out[OPS[2 * v + 1]] = summarize(lat, n * size)
    side.reset()
    return out


def summarize(lat, nbytes):
    total = sum(lat)
    lat.sort()
    return (nbytes / total * 1e3, pct_us(lat, 0.50), pct_us(lat, 0.99))


def main():
    global tmpdir
    args = sys.argv[1:]
    if len(args) > 2:
        print("usage: lmcache_bench.py [RUNS] [KVCACHED]", file=sys.stderr)
        return 2
    runs = int(args[0]) if args else 5
    binary = args[1] if len(args) > 1 else "build/helper/kvcached"
    ctl = os.path.join(os.path.dirname(binary), "kvcachectl")
    flush = os.geteuid() == 0 and os.access(ctl, os.X_OK)
    if runs < 1:
        die("RUNS must be at least 1")
    torch.set_num_threads(1)

    tmpdir = tempfile.mkdtemp(prefix="kvcache-lmcbench.", dir="/var/tmp")
    atexit.register(cleanup)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + 15))

    kvc, lmc, src = [], [], []
    for s, (name, size, n) in enumerate(SIZES):
        kvc.append(KvcacheSide(binary, ctl, name, size, n, runs, flush))
        lmc.append(LmcacheSide(size, n))
        # Each block its own bytes: a block returned for another key fails.
        src_np = np.random.default_rng(1000 + s).integers(
            0, 256, n * size, dtype=np.uint8)
        src.append((src_np, torch.from_numpy(src_np)))
    dst_np = np.empty(BATCH * max(sz for _, sz, _ in SIZES), dtype=np.uint8)
    dst_t = torch.from_numpy(dst_np)

    import lmcache
    print(f"# lmcache_bench: kvcache (kvcached {binary}, memfd mode, DRAM "
          "tier only, Python binding) against LMCache "
          f"{getattr(lmcache, '__version__', '?')} StorageManager + "
          f"LocalCPUBackend (torch {torch.__version__}, CPU device)")
    for name, size, n in SIZES:
        print(f"# {name}: {n} blocks of {size} bytes; single calls and "
              f"{BATCH}-block calls")
    print(f"# {runs} runs after one untimed warm-up, systems alternating; "
          f"kvcache pool {'flushed' if flush else 'not flushed'} between "
          "runs\n# mbps: payload 10^6 bytes/s over the calls' summed time; "
          "p50/p99_us: single-block calls\n# ratio: kvcache/peer for mbps, "
          "peer/kvcache for latency: > 1 means kvcache is better")
    print("metric,run,kvcache,peer,ratio", flush=True)

    rows = {}
    for r in range(runs + 1):
        res = {}
        for s in range(len(SIZES)):
            order = [True, False] if (r + s) % 2 == 0 else [False, True]
            for is_kvc in order:
                side = kvc[s] if is_kvc else lmc[s]
                res[(s, is_kvc)] = run_phases(
                    side, is_kvc, s, r, src[s][0], src[s][1], dst_np, dst_t,
                    kvc[s].ns)
        if not r:
            continue
        for s, (name, _, _) in enumerate(SIZES):
            for op in OPS:
                k, p = res[(s, True)][op], res[(s, False)][op]
                vals = [("mbps", k[0], p[0], False)]
                if "batch" not in op:
                    vals += [("p50_us", k[1], p[1], True),
                             ("p99_us", k[2], p[2], True)]
                for unit, kv, peer, latency in vals:
                    metric = f"lmcache_{op}_{name}_{unit}"
                    ratio = peer / kv if latency else kv / peer
                    print(f"{metric},{r},{kv:.1f},{peer:.1f},{ratio:.3f}")
                    rows.setdefault(metric, []).append((kv, peer, ratio))
        sys.stdout.flush()

    print(f"\n{'min / median / max':30} {'kvcache':22} {'peer':22} "
          "ratio (>1: kvcache better)", file=sys.stderr)
    for metric, vals in rows.items():
        cols = []
        for j in range(3):
            v = sorted(x[j] for x in vals)
            cols.append((v[0], statistics.median(v), v[-1]))
        print(f"{metric:30} "
              f"{cols[0][0]:.0f}/{cols[0][1]:.0f}/{cols[0][2]:.0f}  "
              f"{cols[1][0]:.0f}/{cols[1][1]:.0f}/{cols[1][2]:.0f}  "
              f"{cols[2][0]:.3f} / {cols[2][1]:.3f} / {cols[2][2]:.3f}",
              file=sys.stderr)

    for s in range(len(SIZES)):
        lmc[s].sm.close()
        kvc[s].client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
