# SPDX-License-Identifier: GPL-2.0
"""Tests of the Python binding (helper/python/kvcache/) against a real
kvcached in memfd mode and the real libkvcache (see conftest.py).

Run: python3 -m pytest -q tests/python (after make lib helper).
"""

from __future__ import annotations

import array
import ctypes
import errno
import hashlib
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import kvcache
from conftest import (BLOCK_BYTES, BLOCK_SIZE, IDENTITY, IS_ROOT, KVCACHECTL,
                      POOL_SIZE, PYDIR, REPO, TPB, Daemon, make_client,
                      open_ns)

HEADER = REPO / "helper" / "libkvcache" / "include" / "libkvcache.h"
VECTORS = REPO / "tests" / "unit" / "key_vectors.txt"
NOBODY = 65534
CONN_ERRNOS = {errno.ECONNRESET, errno.ENOTCONN, errno.ECONNREFUSED,
               errno.ENOENT, errno.EPIPE}


# ---- helpers ----------------------------------------------------------------


def tokens(chain: int, nblocks: int, tpb: int = TPB) -> list[int]:
    """The tokens of a chain; chains with different numbers share no key."""
    return [(chain * 100003 + i) & 0xFFFFFFFF for i in range(nblocks * tpb)]


def blocks(n: int, bb: int = BLOCK_BYTES) -> list[bytes]:
    """n blocks of random bytes: nothing but a real copy gives them back."""
    return [os.urandom(bb) for _ in range(n)]


def py_seed(model: str, weights_revision: str, tokenizer: str,
            kv_layout: str, kv_dtype: str, tokens_per_block: int,
            lora: str = "", salt: bytes = b"", tp_rank: int = 0,
            tp_size: int = 1, pp_rank: int = 0, pp_size: int = 1) -> bytes:
    """The namespace seed of Documentation/userspace-api/keys.md, in hashlib."""
    def field(tag: int, b: bytes) -> bytes:
        return bytes([tag]) + struct.pack("<I", len(b)) + b

    def u32(v: int) -> bytes:
        return struct.pack("<I", v)

    return hashlib.sha256(
        b"kvcache-ns-v1\0"
        + field(1, model.encode()) + field(2, weights_revision.encode())
        + field(3, tokenizer.encode()) + field(4, kv_layout.encode())
        + field(5, kv_dtype.encode()) + field(6, u32(tokens_per_block))
        + field(7, u32(tp_rank)) + field(8, u32(tp_size))
        + field(9, u32(pp_rank)) + field(10, u32(pp_size))
        + field(11, lora.encode()) + field(12, salt)).digest()


def py_keys(seed: bytes, toks: list[int], tpb: int) -> list[bytes]:
    """The block keys of Documentation/userspace-api/keys.md, in hashlib."""
    out, prev = [], seed
    for i in range(len(toks) // tpb):
        prev = hashlib.sha256(
            b"kvcache-block-v1\0" + prev + struct.pack("<I", tpb)
            + struct.pack(f"<{tpb}I", *toks[i * tpb:(i + 1) * tpb])).digest()
        out.append(prev)
    return out


def read_vectors() -> list[dict[str, str]]:
    cases, cur = [], None
    for line in VECTORS.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"\[case (.+)\]$", line)
        if m:
            cur = {"name": m.group(1)}
            cases.append(cur)
            continue
        k, _, v = line.partition("=")
        assert cur is not None
        cur[k] = v
    return cases


def vector_identity(c: dict[str, str]) -> dict:
    return dict(model=c["model"], weights_revision=c["weights_revision"],
                tokenizer=c["tokenizer"], kv_layout=c["kv_layout"],
                kv_dtype=c["kv_dtype"], lora=c["lora"],
                salt=bytes.fromhex(c["salt_hex"]),
                tokens_per_block=int(c["tokens_per_block"]),
                tp_rank=int(c["tp_rank"]), tp_size=int(c["tp_size"]),
                pp_rank=int(c["pp_rank"]), pp_size=int(c["pp_size"]))


def vector_tokens(spec: str) -> list[int]:
    n, mul, add = (int(x) for x in spec.split(":"))
    return [(i * mul + add) % (1 << 32) for i in range(n)]


def wait_for(cond, timeout: float = 10.0, step: float = 0.05):
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


def poll_all(client: kvcache.Client, n: int,
             timeout: float = 20.0) -> list[kvcache.Completion]:
    out: list[kvcache.Completion] = []
    end = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < end:
        out += client.poll(max=64, timeout_ms=200)
    assert len(out) == n, f"{len(out)} of {n} completions within {timeout} s"
    return out


def run_python(code: str, *args: str, timeout: float = 30.0
               ) -> subprocess.CompletedProcess[str]:
    """Run code in a fresh interpreter that imports the binding."""
    env = dict(os.environ, PYTHONPATH=str(PYDIR),
               KVCACHE_LIB=kvcache.library_path() or "",
               PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-c", code, *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


# ---- the module against the header ------------------------------------------


def test_constants_match_header() -> None:
    text = HEADER.read_text()
    defs = dict(re.findall(r"^#define\s+(KVCACHE_\w+)\s+(.+?)\s*(?:/\*.*)?$",
                           text, flags=re.M))

    def val(name: str) -> int:
        v = defs[name]
        m = re.fullmatch(r"\(1u << (\d+)\)", v)
        return 1 << int(m.group(1)) if m else int(v.rstrip("u"), 0)

    assert kvcache.KEY_SIZE == val("KVCACHE_LIB_KEY_SIZE") == 32
    assert kvcache.LIB_VERSION == val("KVCACHE_LIB_VERSION")
    assert kvcache.TIER_DRAM == val("KVCACHE_TIER_DRAM")
    assert kvcache.TIER_G3 == val("KVCACHE_TIER_G3")
    assert kvcache.TIER_G4 == val("KVCACHE_TIER_G4")
    assert kvcache.TIERS_ALL == val("KVCACHE_TIERS_ALL")
    assert kvcache.MODE_KERNEL == val("KVCACHE_MODE_KERNEL")
    assert kvcache.MODE_MEMFD == val("KVCACHE_MODE_MEMFD")
    assert f'"{kvcache.DEFAULT_SOCKET}"' == defs["KVCACHE_DEFAULT_SOCKET"]


def test_every_header_function_declared() -> None:
    """Every function of the header has a prototype here, with as many
    arguments, and the library exports it."""
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(), flags=re.S)
    decls = re.findall(r"\b(kvcache_\w+)\s*\(([^;{]*?)\)\s*;", text)
    assert len(decls) >= 20
    header = {}
    for name, params in decls:
        params = " ".join(params.split())
        header[name] = 0 if params in ("", "void") else params.count(",") + 1
    assert set(header) == set(kvcache._PROTOTYPES)
    lib = kvcache.load_library()
    for name, nargs in header.items():
        assert len(kvcache._PROTOTYPES[name][1]) == nargs, name
        assert getattr(lib, name).argtypes is not None, name


def test_structures_match_header() -> None:
    """The ctypes structures have the header's fields, in its order."""
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(), flags=re.S)
    pairs = {"kvcache_options": kvcache._Options,
             "kvcache_client_info": kvcache._Info,
             "kvcache_identity": kvcache._Identity,
             "kvcache_block": kvcache._Block,
             "kvcache_completion": kvcache._Completion}
    for cname, pytype in pairs.items():
        m = re.search(r"struct\s+" + cname + r"\s*\{(.*?)\};", text, re.S)
        assert m, f"struct {cname} not in the header"
        names = []
        for decl in m.group(1).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            first, *rest = decl.split(",")
            names.append(first.split()[-1].lstrip("*"))
            names += [r.strip().lstrip("*") for r in rest]
        assert [f[0] for f in pytype._fields_] == names, cname


def test_library_search_order(tmp_path: Path) -> None:
    """$KVCACHE_LIB when set, and only it; else the tree's build/lib."""
    tree = REPO / "build" / "lib" / "libkvcache.so"
    code = ("import kvcache\n"
            "try:\n"
            "    kvcache.load_library()\n"
            "    print('LOADED', kvcache.library_path())\n"
            "except OSError as e:\n"
            "    print('ERR', e)\n")
    base = dict(os.environ, PYTHONPATH=str(PYDIR))
    base.pop("KVCACHE_LIB", None)
    r = subprocess.run([sys.executable, "-c", code], env=base,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    if tree.exists():
        assert r.stdout.split() == ["LOADED", str(tree)]
    bogus = tmp_path / "libkvcache.so"
    bogus.write_bytes(b"not an ELF")
    r = subprocess.run([sys.executable, "-c", code],
                       env=dict(base, KVCACHE_LIB=str(bogus)),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ERR") and str(bogus) in r.stdout, r.stdout


def test_error_class() -> None:
    e = kvcache._error_class(errno.ENOENT)(errno.ENOENT, "x")
    assert isinstance(e, kvcache.KvcacheError)
    assert isinstance(e, FileNotFoundError) and e.errno == errno.ENOENT
    e = kvcache._error_class(errno.EACCES)(errno.EACCES, "x")
    assert isinstance(e, PermissionError)
    e = kvcache._error_class(errno.EPROTO)(errno.EPROTO, "x")
    assert type(e) is kvcache.KvcacheError and e.errno == errno.EPROTO
    assert "kvcached" in kvcache.strerror(-errno.ECONNREFUSED)


# ---- client -----------------------------------------------------------------


def test_info_and_stat(client: kvcache.Client) -> None:
    info = client.info
    assert info.mode == kvcache.MODE_MEMFD
    assert info.block_size == BLOCK_SIZE
    assert info.nr_blocks == POOL_SIZE // BLOCK_SIZE
    assert info.max_batch > 0
    assert client.stat("pool_blocks") == info.nr_blocks
    assert 0 < client.stat("pool_free") <= info.nr_blocks
    with pytest.raises(kvcache.KvcacheError) as ei:
        client.stat("no_such_counter")
    assert ei.value.errno > 0
    assert client.pending() == 0
    assert client.event_fd() >= 0


def test_client_options(daemon: Daemon) -> None:
    with kvcache.Client(socket=Path(daemon.sock), connections=1, workers=1,
                        timeout_ms=5000) as c:
        assert c.info.mode == kvcache.MODE_MEMFD
    assert c.closed
    c.close()                                   # idempotent
    with pytest.raises(ValueError):
        c.info
    # $KVCACHE_SOCKET is the library's default.
    env_sock = os.environ.get("KVCACHE_SOCKET")
    os.environ["KVCACHE_SOCKET"] = daemon.sock
    try:
        r = run_python("import kvcache\n"
                       "with kvcache.Client() as c:\n"
                       "    print(c.info.nr_blocks)\n")
    finally:
        if env_sock is None:
            del os.environ["KVCACHE_SOCKET"]
        else:
            os.environ["KVCACHE_SOCKET"] = env_sock
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(POOL_SIZE // BLOCK_SIZE)]


# ---- keys -------------------------------------------------------------------


def test_keys_match_c_vectors(client: kvcache.Client, daemon: Daemon) -> None:
    cases = read_vectors()
    assert len(cases) >= 8
    nsid = daemon.new_ns()
    for c in cases:
        ident = vector_identity(c)
        # The vectors' seed checks the hashlib model of keys.md.
        assert py_seed(**ident).hex() == c["seed"], c["name"]
        toks = vector_tokens(c["tokens"])
        want = [k for k in c["keys"].split(",") if k]
        # The vectors have no namespace salt: the opt-out's keys.
        with client.namespace(nsid, **ident, block_bytes=BLOCK_BYTES,
                              ns_salt=False) as ns:
            got = ns.keys(toks)
            assert [k.hex() for k in got] == want, c["name"]
            assert ns.keys(array.array("I", toks)) == got, c["name"]
            assert py_keys(py_seed(**ident), toks,
                           ident["tokens_per_block"]) == got, c["name"]


def test_keys_deterministic_and_identity_bound(
        client: kvcache.Client, daemon: Daemon) -> None:
    base = dict(IDENTITY, lora="", salt=b"", tp_rank=0, tp_size=1,
                pp_rank=0, pp_size=1)
    toks = tokens(7, 3)
    nsid, other = daemon.new_ns(), daemon.new_ns()
    with open_ns(client, nsid) as a, open_ns(client, nsid) as b, \
            open_ns(client, other) as c:
        ka = a.keys(toks)
        assert len(ka) == 3 and all(len(k) == 32 for k in ka)
        assert b.keys(toks) == ka
        # Another namespace has another salt (keys.md).
        assert not set(c.keys(toks)) & set(ka)
        assert len(set(ka)) == 3
        # A prefix's keys are the first keys of any longer sequence; a
        # trailing partial block has none.
        assert a.keys(toks[:2 * TPB]) == ka[:2]
        assert a.keys(toks[:2 * TPB + 5]) == ka[:2]
        assert a.keys(toks[:TPB - 1]) == []
        assert a.keys([]) == []
        # One token changed changes its block's key and every later one.
        t2 = list(toks)
        t2[TPB + 3] ^= 1
        k2 = a.keys(t2)
        assert k2[0] == ka[0] and k2[1] != ka[1] and k2[2] != ka[2]
        assert a.keys(tokens(8, 3))[0] != ka[0]
    changes = dict(model="other/model", weights_revision="r2",
                   tokenizer="tok-2", kv_layout="paged-hnd",
                   kv_dtype="fp8_e4m3", lora="adapter@1",
                   salt=b"\x00tenant", tokens_per_block=TPB * 2,
                   tp_rank=1, tp_size=2, pp_rank=1, pp_size=4)
    seen = {ka[0]: "base"}
    for field, v in changes.items():
        ident = dict(base, **{field: v})
        if field == "tp_rank":
            ident["tp_size"] = 2
        if field == "pp_rank":
            ident["pp_size"] = 2
        with client.namespace(nsid, **ident, block_bytes=BLOCK_BYTES,
                              ns_salt=False) as n:
            k = n.keys(tokens(7, 3, TPB * 2))[0] if field == \
                "tokens_per_block" else n.keys(toks)[0]
            assert k == py_keys(py_seed(**ident), tokens(7, 3, TPB * 2)
                                if field == "tokens_per_block" else toks,
                                ident["tokens_per_block"])[0], field
        assert k not in seen, f"{field} changed nothing (same as " \
                              f"{seen.get(k)})"
        seen[k] = field


# ---- store, load, lookup ----------------------------------------------------


def test_store_then_load_identical(ns: kvcache.Namespace,
                                   client: kvcache.Client) -> None:
    keys = ns.keys(tokens(1, 6))
    data = blocks(6)
    assert ns.lookup(keys) == []
    assert ns.load(keys) == []
    stores = client.stat("stores")
    assert ns.store(keys, data) == 6
    assert client.stat("stores") > stores
    assert ns.lookup(keys) == [kvcache.TIER_DRAM] * 6
    got = ns.load(keys)
    assert len(got) == 6
    for i in range(6):
        assert got[i] == data[i], f"block {i} differs"
    # Storing what is cached counts as stored, and changes nothing.
    assert ns.store(keys[:3], data[:3]) == 3
    assert ns.load(keys) == data
    # Keys as one buffer of n * 32 bytes.
    assert ns.load(b"".join(keys)) == data


def test_store_contiguous_and_chained(ns: kvcache.Namespace) -> None:
    keys = ns.keys(tokens(2, 5))
    data = blocks(5)
    buf = bytearray(b"".join(data))
    # The first three as one buffer, the rest under its parent.
    assert ns.store(keys[:3], memoryview(buf)[:3 * BLOCK_BYTES]) == 3
    assert ns.lookup(keys) == [kvcache.TIER_DRAM] * 3
    assert ns.store(keys[3:], memoryview(buf)[3 * BLOCK_BYTES:],
                    parent=keys[2]) == 2
    assert ns.load(keys) == data
    # A strided source: block i at i * stride.
    keys2 = ns.keys(tokens(3, 3))
    stride = BLOCK_BYTES + 512
    src = bytearray(os.urandom(3 * stride))
    assert ns.store(keys2, src, stride=stride) == 3
    got = ns.load(keys2)
    for i in range(3):
        assert got[i] == bytes(src[i * stride:i * stride + BLOCK_BYTES])
    # array.array and a read-only memoryview are buffers too.
    keys3 = ns.keys(tokens(4, 2))
    arr = array.array("B", os.urandom(2 * BLOCK_BYTES))
    assert ns.store(keys3, memoryview(arr).toreadonly()) == 2
    assert b"".join(ns.load(keys3)) == arr.tobytes()


def test_full_pool_block(client: kvcache.Client, daemon: Daemon) -> None:
    """block_bytes may be the pool's whole block."""
    with open_ns(client, daemon.new_ns(), block_bytes=BLOCK_SIZE) as n:
        assert n.block_bytes == BLOCK_SIZE and n.tokens_per_block == TPB
        keys = n.keys(tokens(5, 3))
        data = blocks(3, BLOCK_SIZE)
        assert n.store(keys, data) == 3
        assert n.load(keys) == data


def test_lookup_prefix_semantics(ns: kvcache.Namespace,
                                 daemon: Daemon) -> None:
    keys = ns.keys(tokens(10, 5))
    data = blocks(5)
    other = ns.keys(tokens(11, 2))
    missing = hashlib.sha256(b"never stored").digest()
    assert ns.store(keys, data) == 5
    dram = kvcache.TIER_DRAM
    assert ns.lookup(keys) == [dram] * 5
    # The prefix stops at the first key that is missing, even though the
    # keys after it are cached.
    assert ns.lookup(keys[:3] + [missing] + keys[4:]) == [dram] * 3
    assert ns.lookup([missing] + keys) == []
    assert ns.lookup(keys[:2] + other) == [dram] * 2
    assert ns.lookup(other) == []
    assert ns.lookup(keys[:3]) == [dram] * 3
    # A key out of its chain's order is not a prefix.
    assert len(ns.lookup([keys[1], keys[0]])) <= 1
    # load stops at the same place and leaves the rest untouched.
    buf = bytearray(b"\xee" * (5 * BLOCK_BYTES))
    assert ns.load_into(keys[:3] + [missing] + keys[4:], buf) == 3
    assert bytes(buf[:3 * BLOCK_BYTES]) == b"".join(data[:3])
    assert buf[3 * BLOCK_BYTES:] == b"\xee" * (2 * BLOCK_BYTES)
    assert ns.load([missing]) == []
    # A chain cannot grow from a block nobody stored.
    orphan = ns.keys(tokens(12, 1))
    try:
        stored = ns.store(orphan, blocks(1), parent=missing)
    except kvcache.KvcacheError as e:
        stored = -e.errno
    assert stored <= 0
    assert ns.lookup(orphan) == []
    if IS_ROOT:
        # The admin evicts the tail: the chain is a prefix again.
        daemon.ctl("evict", str(ns.ns_id), keys[4].hex())
        assert ns.lookup(keys) == [dram] * 4
        assert ns.load(keys) == data[:4]


def test_load_into_bytearray_and_strided_memoryview(
        ns: kvcache.Namespace) -> None:
    keys = ns.keys(tokens(20, 4))
    data = blocks(4)
    assert ns.store(keys, data) == 4
    # A bytearray, exactly n * block_bytes.
    ba = bytearray(4 * BLOCK_BYTES)
    assert ns.load_into(keys, ba) == 4
    assert bytes(ba) == b"".join(data)
    # A memoryview into a larger buffer, at an offset, with a stride; the
    # gaps between blocks are untouched.
    stride = BLOCK_BYTES + 1000
    big = bytearray(b"\x5a" * (100 + 4 * stride))
    mv = memoryview(big)[100:]
    assert ns.load_into(keys, mv, stride=stride) == 4
    assert big[:100] == b"\x5a" * 100
    for i in range(4):
        off = 100 + i * stride
        assert big[off:off + BLOCK_BYTES] == data[i], f"block {i}"
        assert big[off + BLOCK_BYTES:off + stride] == \
            b"\x5a" * (stride - BLOCK_BYTES), f"gap {i}"
    # Only what fits the last block is needed, not a full stride.
    exact = bytearray(3 * stride + BLOCK_BYTES)
    assert ns.load_into(keys, exact, stride=stride) == 4
    assert exact[3 * stride:] == data[3]
    # A memoryview of another format (uint32 items) counts bytes.
    words = array.array("I", bytes(4 * BLOCK_BYTES))
    assert ns.load_into(keys, memoryview(words)) == 4
    assert words.tobytes() == b"".join(data)
    # A buffer export pins the bytearray while the library writes to it.
    assert ns.load_into(keys[:1], ba) == 1
    ba.append(0)                    # and is released afterwards


def test_load_map_views_and_release(ns: kvcache.Namespace,
                                    client: kvcache.Client) -> None:
    keys = ns.keys(tokens(30, 3))
    data = blocks(3)
    assert ns.store(keys, data) == 3
    missing = hashlib.sha256(b"missing").digest()
    with ns.load_map(keys + [missing]) as views:
        assert len(views) == 3
        for i, v in enumerate(views):
            assert isinstance(v, memoryview) and v.readonly
            assert v.nbytes == BLOCK_BYTES
            assert v == data[i], f"block {i}"
            with pytest.raises(TypeError):
                v[0] = 1
        kept = views[0]
    assert views.released
    with pytest.raises(ValueError):
        kept[0]                      # released with the blocks: no crash
    with pytest.raises(ValueError):
        views[0]
    views.release()                  # idempotent
    with ns.load_map([missing]) as none:
        assert len(none) == 0
    # A slice alive at release keeps its block pinned: BufferError, and a
    # later release() once the slice is gone.
    m = ns.load_map(keys)
    part = m[1][:64]
    assert part == data[1][:64]
    with pytest.raises(BufferError):
        m.release()
    assert not m.released
    assert part == data[1][:64]       # still mapped, still right
    del part
    m.release()
    assert m.released
    # Dropped without release: a later load_map releases it.
    ns.load_map(keys)
    with ns.load_map(keys) as again:
        assert [bytes(v) for v in again] == data
    # After the client closed, views are unusable, not dangerous.
    c2 = make_client_like(client)
    with open_ns(c2, ns.ns_id) as n2:
        m2 = n2.load_map(keys)
        v2 = m2[2]
        assert v2 == data[2]
    c2.close()
    with pytest.raises(ValueError):
        v2[0]


@pytest.mark.skipif(not IS_ROOT, reason="kvcachectl flush needs root")
def test_mapped_blocks_are_pinned(ns: kvcache.Namespace,
                                  daemon: Daemon) -> None:
    """A flush of the pool skips blocks load_map() holds; once released
    they go."""
    keys = ns.keys(tokens(35, 3))
    data = blocks(3)
    assert ns.store(keys, data) == 3
    with ns.load_map(keys[:2]) as views:
        daemon.ctl("flush", str(ns.ns_id), "pool")
        assert [bytes(v) for v in views] == data[:2]
        # The mapped blocks (and so their prefix) stayed; the third went.
        assert ns.lookup(keys) == [kvcache.TIER_DRAM] * 2
        assert ns.load(keys) == data[:2]
    daemon.ctl("flush", str(ns.ns_id), "pool")
    assert ns.lookup(keys) == []


def test_namespaces_are_separate(client: kvcache.Client,
                                 daemon: Daemon) -> None:
    """The same identity in two namespaces opted out of their salts: the
    same keys, still separate blocks."""
    with open_ns(client, daemon.new_ns(), ns_salt=False) as a, \
            open_ns(client, daemon.new_ns(), ns_salt=False) as b:
        keys = a.keys(tokens(36, 2))
        assert b.keys(tokens(36, 2)) == keys
        da, db = blocks(2), blocks(2)
        assert a.store(keys, da) == 2
        assert b.lookup(keys) == []
        assert b.store(keys, db) == 2
        assert a.load(keys) == da
        assert b.load(keys) == db


def test_namespace_salt_by_default(client: kvcache.Client,
                                   daemon: Daemon) -> None:
    """Two namespaces, one identity: different keys by default (each has
    its own salt), the hashlib keys of keys.md with ns_salt=False; the
    same namespace gives the same keys to another client."""
    a_id, b_id = daemon.new_ns(), daemon.new_ns()
    toks = tokens(38, 3)
    plain = py_keys(py_seed(**IDENTITY), toks, TPB)
    with open_ns(client, a_id) as a, open_ns(client, b_id) as b, \
            open_ns(client, a_id, ns_salt=False) as a0, \
            open_ns(client, b_id, ns_salt=False) as b0:
        ka, kb = a.keys(toks), b.keys(toks)
        assert len(ka) == len(kb) == 3
        assert not set(ka) & set(kb)
        assert not set(ka) & set(plain)
        assert a0.keys(toks) == b0.keys(toks) == plain
        assert a0.identity["ns_salt"] is False
        data = blocks(3)
        assert a.store(ka, data) == 3
        # Salted and unsalted keys of one namespace are different blocks.
        assert a0.lookup(plain) == []
        with make_client(daemon) as c2, open_ns(c2, a_id) as a2:
            assert a2.keys(toks) == ka
            assert a2.load(ka) == data
    with pytest.raises(TypeError):
        open_ns(client, a_id, ns_salt=1)


def test_namespace_salt_survives_restart(make_daemon) -> None:
    """The salt is kept in the daemon's state: the same keys after a
    restart."""
    d = make_daemon()
    nsid = d.new_ns()
    toks = tokens(39, 2)
    with make_client(d) as c, open_ns(c, nsid) as n:
        before = n.keys(toks)
    d.restart()
    with make_client(d) as c, open_ns(c, nsid) as n:
        assert n.keys(toks) == before


def test_close_keeps_what_views_still_read(ns: kvcache.Namespace,
                                           daemon: Daemon) -> None:
    """A slice of a mapped block alive when its client closes: the client
    stays open underneath (ResourceWarning) rather than unmap it."""
    keys = ns.keys(tokens(37, 1))
    data = blocks(1)
    assert ns.store(keys, data) == 1
    c = make_client(daemon)
    n = open_ns(c, ns.ns_id)
    m = n.load_map(keys)
    part = m[0][100:200]
    with pytest.warns(ResourceWarning):
        c.close()
    assert c.closed
    assert part == data[0][100:200]      # still mapped: no crash
    with pytest.raises(ValueError):
        n.lookup(keys)
    del part, m


def make_client_like(client: kvcache.Client) -> kvcache.Client:
    return kvcache.Client(socket=client.socket)


def test_async_store_load_poll(ns: kvcache.Namespace,
                               client: kvcache.Client) -> None:
    n_chains = 6
    chains = [ns.keys(tokens(40 + i, 3)) for i in range(n_chains)]
    datas = [blocks(3) for _ in range(n_chains)]
    assert client.poll(timeout_ms=0) == []
    for i in range(n_chains):
        # The buffer is a temporary: the binding must keep it alive.
        ns.store_async(chains[i], bytearray(b"".join(datas[i])),
                       tag=("store", i))
    done = poll_all(client, n_chains)
    assert sorted(c.tag for c in done) == [("store", i)
                                           for i in range(n_chains)]
    assert all(c.result == 3 and c.error() is None for c in done), done
    assert client.pending() == 0
    bufs = [bytearray(3 * BLOCK_BYTES) for _ in range(n_chains)]
    for i in range(n_chains):
        ns.load_async(chains[i], bufs[i], tag=i)
    # Until its completion is collected, a buffer stays exported: it
    # cannot be resized (freed) under the library.
    with pytest.raises(BufferError):
        bufs[0].append(0)
    # The event fd is readable while completions wait.
    r, _, _ = select.select([client.event_fd()], [], [], 10)
    assert r, "event fd never readable"
    done = poll_all(client, n_chains)
    assert {c.tag: c.result for c in done} == {i: 3 for i in range(n_chains)}
    for i in range(n_chains):
        assert bytes(bufs[i]) == b"".join(datas[i]), f"chain {i}"
        bufs[i].append(0)           # the export is released
    # A list of blocks, a parent, and a miss that loads nothing.
    more = ns.keys(tokens(40, 4))
    extra = blocks(1)
    ns.store_async(more[3:], extra, tag="tail", parent=more[2])
    ns.load_async([hashlib.sha256(b"x").digest()], bytearray(BLOCK_BYTES),
                  tag="miss")
    done = {c.tag: c.result for c in poll_all(client, 2)}
    assert done == {"tail": 1, "miss": 0}
    assert ns.load(more) == datas[0] + extra
    assert client.poll(max=4, timeout_ms=50) == []
    assert client.pending() == 0


def test_close_namespace_with_async_pending(client: kvcache.Client,
                                            daemon: Daemon) -> None:
    n = open_ns(client, daemon.new_ns())
    keys = n.keys(tokens(50, 2))
    data = blocks(2)
    n.store_async(keys, data, tag=1)
    n.close()                         # deferred until the completion
    assert n.closed
    with pytest.raises(ValueError):
        n.lookup(keys)
    assert [(c.tag, c.result) for c in poll_all(client, 1)] == [(1, 2)]
    with open_ns(client, n.ns_id) as again:
        assert again.load(keys) == data


# ---- sharing ----------------------------------------------------------------


CHILD_LOAD = r"""
import json, sys, kvcache
args = json.loads(sys.argv[1])
with kvcache.Client(socket=args["sock"]) as c:
    with c.namespace(args["ns"], **args["identity"],
                     block_bytes=args["bb"]) as ns:
        keys = ns.keys(args["tokens"])
        got = ns.load(keys)
        print(json.dumps({"keys": [k.hex() for k in keys],
                          "blocks": [b.hex() for b in got],
                          "lookup": ns.lookup(keys)}))
"""


def test_reuse_across_processes(ns: kvcache.Namespace,
                                daemon: Daemon) -> None:
    toks = tokens(60, 4)
    keys = ns.keys(toks)
    data = blocks(4)
    assert ns.store(keys, data) == 4
    args = dict(sock=daemon.sock, ns=ns.ns_id, identity=IDENTITY,
                bb=BLOCK_BYTES, tokens=toks)
    r = run_python(CHILD_LOAD, json.dumps(args))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["keys"] == [k.hex() for k in keys]
    assert out["lookup"] == [kvcache.TIER_DRAM] * 4
    assert [bytes.fromhex(b) for b in out["blocks"]] == data


def test_reuse_across_restart_from_g3(make_daemon) -> None:
    d = make_daemon(g3=True)
    toks = tokens(70, 4)
    data = blocks(4)
    nsid = d.new_ns()
    with make_client(d) as c, open_ns(c, nsid) as n:
        keys = n.keys(toks)
        assert n.store(keys, data) == 4
        # Written through to g3.
        on_g3 = wait_for(lambda: n.lookup(keys) ==
                         [kvcache.TIER_DRAM | kvcache.TIER_G3] * 4)
        assert on_g3, n.lookup(keys)
        if IS_ROOT:
            # Only g3 holds them now: the load must come from disk.
            d.ctl("flush", str(nsid), "pool")
            # Counted before the LOOKUP: it already starts the reads
            # (prefetch), and they may be done before the LOAD.
            reads = c.stat("g3_reads")
            assert n.lookup(keys) == [kvcache.TIER_G3] * 4
            assert n.load(keys) == data
            assert c.stat("g3_reads") > reads
    d.restart()
    with make_client(d) as c, open_ns(c, nsid) as n:
        masks = wait_for(lambda: n.lookup(keys), timeout=10)
        assert len(masks) == 4 and all(m & kvcache.TIER_G3 for m in masks), \
            masks
        assert n.load(keys) == data
        buf = bytearray(4 * BLOCK_BYTES)
        assert n.load_into(keys, buf) == 4
        assert bytes(buf) == b"".join(data)


# ---- errors -----------------------------------------------------------------


def test_no_daemon(tmp_path: Path) -> None:
    with pytest.raises(kvcache.KvcacheError) as ei:
        kvcache.Client(socket=tmp_path / "none.sock")
    assert ei.value.errno == errno.ENOENT
    assert isinstance(ei.value, FileNotFoundError)
    # A socket file nobody listens on.
    path = str(tmp_path / "dead.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(path)
    s.close()
    with pytest.raises(kvcache.KvcacheError) as ei:
        kvcache.Client(socket=path)
    assert ei.value.errno == errno.ECONNREFUSED
    assert isinstance(ei.value, ConnectionRefusedError)
    assert "kvcache_open" in str(ei.value)


def test_daemon_killed_then_restarted(make_daemon) -> None:
    d = make_daemon()
    nsid = d.new_ns()
    toks = tokens(80, 3)
    data = blocks(3)
    with make_client(d, timeout_ms=5000) as c, open_ns(c, nsid) as n:
        keys = n.keys(toks)
        assert n.store(keys, data) == 3
        d.kill()
        with pytest.raises(kvcache.KvcacheError) as ei:
            n.lookup(keys)
        assert ei.value.errno in (errno.ECONNRESET, errno.ENOTCONN), \
            ei.value
        # Still down: still a clear error, no hang, no crash.
        with pytest.raises(kvcache.KvcacheError) as ei:
            n.load(keys)
        assert ei.value.errno in CONN_ERRNOS, ei.value
        with pytest.raises(kvcache.KvcacheError) as ei:
            c.stat("stores")
        assert ei.value.errno in CONN_ERRNOS, ei.value
        d.start()
        # memfd mode: the pool died with the daemon.
        assert n.lookup(keys) == []
        assert n.store(keys, data) == 3
        assert n.load(keys) == data
        assert c.info.nr_blocks == POOL_SIZE // BLOCK_SIZE


CHILD_NOBODY = r"""
import json, os, sys, kvcache
args = json.loads(sys.argv[1])
kvcache.load_library()
os.setgroups([])
os.setgid(args["uid"])
os.setuid(args["uid"])
out = {}
bb = args["bb"]
try:
    c = kvcache.Client(socket=args["sock"])
except PermissionError as e:
    # memfd mode: no pool for a peer that may not read and write every
    # namespace (the HELLO is refused).
    print(json.dumps({"client": ["EPERM" if e.errno == 1 else "EACCES",
                                 isinstance(e, kvcache.KvcacheError)]}))
    sys.exit(0)
with c:
    for ns_id in args["ns"]:
        res = {}
        # Its salt only goes to readers; without it, the daemon's own
        # checks are what the calls below meet.
        try:
            c.namespace(ns_id, **args["identity"], block_bytes=bb).close()
            res["open"] = ["ok", True]
        except PermissionError as e:
            res["open"] = ["EPERM" if e.errno == 1 else "EACCES",
                           isinstance(e, kvcache.KvcacheError)]
        salted = res["open"][0] == "ok"
        with c.namespace(ns_id, **args["identity"], block_bytes=bb,
                         ns_salt=salted) as ns:
            keys = ns.keys(args["tokens"])
            for op, call in (("lookup", lambda: ns.lookup(keys)),
                             ("load", lambda: ns.load(keys)),
                             ("store", lambda: ns.store(
                                 keys, [b"x" * bb] * len(keys)))):
                try:
                    r = call()
                    res[op] = ["ok", len(r) if isinstance(r, list) else r]
                except PermissionError as e:
                    res[op] = ["EPERM" if e.errno == 1 else "EACCES",
                               isinstance(e, kvcache.KvcacheError)]
                except OSError as e:
                    res[op] = ["errno", e.errno]
            out[str(ns_id)] = res
print(json.dumps(out))
"""


@pytest.mark.skipif(not IS_ROOT, reason="needs root to run a client as nobody")
def test_namespace_not_permitted(client: kvcache.Client,
                                 daemon: Daemon) -> None:
    closed = daemon.new_ns(uid=0, gid=0, mode=0o700)
    readable = daemon.new_ns(uid=0, gid=0, mode=0o744)
    toks = tokens(90, 2)
    data = blocks(2)
    for nsid in (closed, readable):
        with open_ns(client, nsid) as n:
            assert n.store(n.keys(toks), data) == 2
    args = dict(sock=daemon.sock, ns=[closed, readable], identity=IDENTITY,
                bb=BLOCK_BYTES, tokens=toks, uid=NOBODY)
    r = run_python(CHILD_NOBODY, json.dumps(args))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # memfd mode (these daemons) passes the whole pool with HELLO, so only
    # to a peer that may read and write every namespace: nobody gets
    # EACCES from Client() already. Kernel mode checks each call (below).
    if client.info.mode == kvcache.MODE_MEMFD:
        assert out == {"client": ["EACCES", True]}, out
        with open_ns(client, readable) as n:
            assert n.load(n.keys(toks)) == data
        return
    assert out[str(closed)] == {"open": ["EACCES", True],
                                "lookup": ["EACCES", True],
                                "load": ["EACCES", True],
                                "store": ["EACCES", True]}, out
    assert out[str(readable)] == {"open": ["ok", True],
                                  "lookup": ["ok", 2], "load": ["ok", 2],
                                  "store": ["EACCES", True]}, out
    # Nothing the refused store sent was indexed.
    with open_ns(client, readable) as n:
        assert n.load(n.keys(toks)) == data


def test_bad_arguments(ns: kvcache.Namespace, client: kvcache.Client,
                       daemon: Daemon) -> None:
    keys = ns.keys(tokens(100, 2))
    good = blocks(2)
    assert ns.store(keys, good) == 2
    bad_calls = [
        # keys
        (TypeError, lambda: ns.lookup("not keys")),
        (TypeError, lambda: ns.lookup(42)),
        (TypeError, lambda: ns.lookup(None)),
        (TypeError, lambda: ns.lookup([keys[0], "x" * 32])),
        (TypeError, lambda: ns.lookup([1, 2, 3])),
        (ValueError, lambda: ns.lookup([keys[0][:31]])),
        (ValueError, lambda: ns.lookup([keys[0] + b"\0"])),
        (ValueError, lambda: ns.lookup(b"\0" * 33)),
        (ValueError, lambda: ns.load(b"\0" * 31)),
        (ValueError, lambda: ns.lookup([memoryview(b"\0" * 64)[::2]])),
        # tokens
        (ValueError, lambda: ns.keys([-1] * TPB)),
        (ValueError, lambda: ns.keys([1 << 32] * TPB)),
        (TypeError, lambda: ns.keys([1.5] * TPB)),
        (TypeError, lambda: ns.keys("abc")),
        (TypeError, lambda: ns.keys(b"\0" * 64)),
        (TypeError, lambda: ns.keys(array.array("H", [1] * TPB))),
        (TypeError, lambda: ns.keys(None)),
        # buffers
        (TypeError, lambda: ns.load_into(keys, b"\0" * (2 * BLOCK_BYTES))),
        (TypeError, lambda: ns.load_into(keys, bytearray(2 * BLOCK_BYTES)
                                         .__class__)),
        (TypeError, lambda: ns.load_into(keys, [0] * (2 * BLOCK_BYTES))),
        (ValueError, lambda: ns.load_into(keys, bytearray(2 * BLOCK_BYTES
                                                          - 1))),
        (ValueError, lambda: ns.load_into(keys, bytearray(10 * BLOCK_BYTES),
                                          stride=BLOCK_BYTES - 1)),
        (ValueError, lambda: ns.load_into(keys, bytearray(BLOCK_BYTES),
                                          stride=-1)),
        (TypeError, lambda: ns.load_into(keys, bytearray(2 * BLOCK_BYTES),
                                         stride="1")),
        (ValueError, lambda: ns.load_into(
            keys, memoryview(bytearray(4 * BLOCK_BYTES))[::2])),
        (ValueError, lambda: ns.store(keys, b"\0" * (2 * BLOCK_BYTES - 1))),
        (ValueError, lambda: ns.store(keys, good[:1])),
        (ValueError, lambda: ns.store(keys, [good[0], good[1][:-1]])),
        (TypeError, lambda: ns.store(keys, [good[0], "text"])),
        (TypeError, lambda: ns.store(keys, "text")),
        (TypeError, lambda: ns.store(keys, 12)),
        (ValueError, lambda: ns.store(keys, good, stride=BLOCK_BYTES)),
        (ValueError, lambda: ns.store(keys, good, parent=b"short")),
        (TypeError, lambda: ns.store(keys, good, parent="x" * 32)),
        (ValueError, lambda: ns.load_async(keys, bytearray(10))),
        (TypeError, lambda: ns.load_async(keys, b"\0" * 3 * BLOCK_BYTES)),
        (ValueError, lambda: ns.store_async(keys, [good[0]])),
        (ValueError, lambda: ns.load_region(keys, region=-1)),
        # client and namespace arguments
        (ValueError, lambda: client.poll(max=-1)),
        (ValueError, lambda: client.poll(timeout_ms=-2)),
        (TypeError, lambda: client.poll(timeout_ms=None)),
        (TypeError, lambda: client.stat(5)),
        (ValueError, lambda: client.stat("")),
        (ValueError, lambda: client.stat("a\0b")),
        (ValueError, lambda: client.region_register(1 << 32, 0, 1)),
        (ValueError, lambda: client.region_unregister(-1)),
        (ValueError, lambda: kvcache.Client(socket=daemon.sock,
                                            connections=65)),
        (ValueError, lambda: kvcache.Client(socket=daemon.sock, workers=-1)),
        (TypeError, lambda: kvcache.Client(socket=5)),
        (ValueError, lambda: kvcache.Client(socket="a\0b")),
        (ValueError, lambda: open_ns(client, -1)),
        (ValueError, lambda: open_ns(client, 1 << 32)),
        (TypeError, lambda: open_ns(client, "1")),
        (TypeError, lambda: open_ns(client, 1, model=None)),
        (TypeError, lambda: open_ns(client, 1, model=b"bytes")),
        (ValueError, lambda: open_ns(client, 1, model="a\0b")),
        (TypeError, lambda: open_ns(client, 1, salt="text")),
        (ValueError, lambda: open_ns(client, 1, tokens_per_block=0)),
        (ValueError, lambda: open_ns(client, 1, tp_rank=1, tp_size=1)),
        (ValueError, lambda: open_ns(client, 1, pp_size=0)),
        (ValueError, lambda: open_ns(client, 1, block_bytes=0)),
        (ValueError, lambda: open_ns(client, 1, block_bytes=BLOCK_SIZE + 1)),
        (TypeError, lambda: open_ns(client, 1, block_bytes=4096.0)),
        (TypeError, lambda: open_ns(client, 1, block_bytes=True)),
    ]
    for i, (exc, call) in enumerate(bad_calls):
        with pytest.raises(exc):
            call()
            pytest.fail(f"bad call {i} did not raise")
    # Values only the library knows are wrong: KvcacheError(EINVAL).
    with pytest.raises(kvcache.KvcacheError) as ei:
        open_ns(client, 0)
    assert ei.value.errno == errno.EINVAL
    # None of it broke anything.
    assert ns.load(keys) == good
    assert client.pending() == 0


def test_memfd_has_no_regions(ns: kvcache.Namespace,
                              client: kvcache.Client) -> None:
    keys = ns.keys(tokens(110, 1))
    with pytest.raises(kvcache.KvcacheError) as ei:
        ns.load_region(keys, region=1)
    assert ei.value.errno == errno.EOPNOTSUPP
    with pytest.raises(kvcache.KvcacheError) as ei:
        client.region_register(0, 0, 1 << 20)
    assert ei.value.errno in (errno.EOPNOTSUPP, errno.ENODEV, errno.ENOENT)


def test_closed_objects(daemon: Daemon) -> None:
    c = make_client(daemon)
    n = open_ns(c, daemon.new_ns())
    keys = n.keys(tokens(120, 1))
    n.close()
    n.close()
    for call in (lambda: n.lookup(keys), lambda: n.keys(tokens(1, 1)),
                 lambda: n.load(keys), lambda: n.store(keys, blocks(1)),
                 lambda: n.load_map(keys)):
        with pytest.raises(ValueError):
            call()
    n2 = open_ns(c, n.ns_id)
    c.close()
    assert n2.closed                  # the client closed it
    for call in (lambda: n2.lookup(keys), lambda: c.poll(timeout_ms=0),
                 lambda: c.stat("stores"), lambda: c.pending(),
                 lambda: open_ns(c, n.ns_id)):
        with pytest.raises(ValueError):
            call()


# ---- threads ----------------------------------------------------------------


def test_thread_pool(ns: kvcache.Namespace, client: kvcache.Client) -> None:
    shared_keys = ns.keys(tokens(200, 4))
    shared = blocks(4)
    assert ns.store(shared_keys, shared) == 4
    errors: list[str] = []
    lock = threading.Lock()

    def work(t: int) -> int:
        done = 0
        for it in range(12):
            keys = ns.keys(tokens(1000 + t * 100 + it, 3))
            data = blocks(3)
            if it % 3 == 0:
                stored = ns.store(keys, data)
            elif it % 3 == 1:
                stored = ns.store(keys, b"".join(data))
            else:
                stored = ns.store(keys[:1], data[:1])
                stored += ns.store(keys[1:], data[1:], parent=keys[0])
            if stored != 3:
                with lock:
                    errors.append(f"thread {t} it {it}: stored {stored}")
                continue
            got = ns.load(keys)
            buf = bytearray(3 * BLOCK_BYTES)
            n = ns.load_into(keys, buf)
            if got != data or n != 3 or bytes(buf) != b"".join(data):
                with lock:
                    errors.append(f"thread {t} it {it}: wrong bytes")
            with ns.load_map(shared_keys) as views:
                if [bytes(v) for v in views] != shared:
                    with lock:
                        errors.append(f"thread {t} it {it}: shared differs")
            if ns.lookup(shared_keys) != [kvcache.TIER_DRAM] * 4:
                with lock:
                    errors.append(f"thread {t} it {it}: lookup")
            done += 1
        return done

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(work, range(8)))
    assert not errors, errors[:10]
    assert results == [12] * 8
    assert ns.load(shared_keys) == shared


def test_thread_pool_async_and_close(daemon: Daemon) -> None:
    """Threads queue asynchronous calls while another polls; close()
    waits for all of it."""
    c = make_client(daemon, workers=4)
    n = open_ns(c, daemon.new_ns())
    chains = [n.keys(tokens(3000 + i, 2)) for i in range(32)]
    datas = [blocks(2) for _ in range(32)]
    results: dict = {}

    def poller() -> None:
        while len(results) < 32:
            for comp in c.poll(max=8, timeout_ms=100):
                results[comp.tag] = comp.result

    th = threading.Thread(target=poller)
    th.start()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda i: n.store_async(chains[i], datas[i], tag=i),
                      range(32)))
    th.join(30)
    assert not th.is_alive()
    assert results == {i: 2 for i in range(32)}
    bufs = [bytearray(2 * BLOCK_BYTES) for _ in range(32)]
    for i in range(32):
        n.load_async(chains[i], bufs[i], tag=i)
    c.close()                     # waits for the loads, then frees
    for i in range(32):
        assert bytes(bufs[i]) == b"".join(datas[i]), f"chain {i}"


# ---- the library under stress -----------------------------------------------


def test_batches_beyond_max_batch(make_daemon) -> None:
    """Chains longer than the daemon takes in one message."""
    d = make_daemon(pool_size=256 << 20)
    with make_client(d) as c, open_ns(c, d.new_ns()) as n:
        mb = c.info.max_batch
        count = 2 * mb + 7
        keys = n.keys(tokens(300, count))
        data = bytearray(os.urandom(count * BLOCK_BYTES))
        assert n.store(keys, data) == count
        out = bytearray(count * BLOCK_BYTES)
        assert n.load_into(keys, out) == count
        assert out == data
        missing = hashlib.sha256(b"gap").digest()
        cut = mb + 3                  # a gap in the second message
        assert n.load_into(keys[:cut] + [missing] + keys[cut + 1:],
                           out) == cut
        with n.load_map(keys) as views:
            assert len(views) == count
            assert all(views[i] == data[i * BLOCK_BYTES:(i + 1) * BLOCK_BYTES]
                       for i in (0, mb - 1, mb, count - 1))


def test_lookup_beyond_max_batch(make_daemon) -> None:
    """kvcache_lookup() of a chain longer than max_batch keys: the whole
    cached prefix, as kvcache_load() finds it."""
    d = make_daemon(pool_size=256 << 20)
    with make_client(d) as c, open_ns(c, d.new_ns()) as n:
        mb = c.info.max_batch
        count = 2 * mb + 7
        keys = n.keys(tokens(310, count))
        assert n.store(keys, os.urandom(count * BLOCK_BYTES)) == count
        assert n.lookup(keys[:mb]) == [kvcache.TIER_DRAM] * mb
        assert n.lookup(keys) == [kvcache.TIER_DRAM] * count
        missing = hashlib.sha256(b"gap").digest()
        cut = mb + 3                  # a gap in the second message
        assert len(n.lookup(keys[:cut] + [missing] + keys[cut + 1:])) == cut


def test_reply_after_timeout_is_not_taken_for_the_next(
        make_daemon, monkeypatch) -> None:
    """A daemon that stops answering: the call times out; the late reply
    must not be taken as the answer to a later call. (The lookups must
    reach the daemon: without the fast index, which would answer them
    from the pool with the daemon stopped.)"""
    monkeypatch.setenv("KVCACHE_FAST_PATH", "0")
    d = make_daemon()
    with make_client(d, connections=1, timeout_ms=300) as c, \
            open_ns(c, d.new_ns()) as n:
        a = n.keys(tokens(400, 2))
        b = n.keys(tokens(401, 3))
        assert n.store(a, blocks(2)) == 2
        assert n.store(b, blocks(3)) == 3
        os.kill(d.proc.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            with pytest.raises(kvcache.KvcacheError) as ei:
                n.lookup(a)           # answered late: 2 matches
            assert ei.value.errno == errno.ETIMEDOUT, ei.value
            assert time.monotonic() - t0 < 5
        finally:
            os.kill(d.proc.pid, signal.SIGCONT)
        time.sleep(0.2)               # the late reply is on its way
        for _ in range(3):
            try:
                got = n.lookup(b)
            except kvcache.KvcacheError as e:
                assert e.errno in CONN_ERRNOS | {errno.ETIMEDOUT}, e
                continue
            assert len(got) == 3, got
            break
        else:
            pytest.fail("no call succeeded after the daemon came back")
        assert len(n.lookup(a)) == 2


def call_twice(use: Callable[[int], int]) -> list[str]:
    """What one caller sees trying use() twice at most: its result, or the
    errno name of each failure, in order."""
    out = []
    for _attempt in range(2):
        try:
            out.append(str(use(0)))
            break
        except kvcache.KvcacheError as e:
            out.append(errno.errorcode.get(e.errno, str(e.errno)))
    return out


def test_restart_with_many_connections(make_daemon) -> None:
    """A restart nobody saw, with every connection of the client open: as
    libkvcache.h promises, a call caught by it fails with ECONNRESET and
    the next call works; concurrent callers need one retry at most."""
    d = make_daemon()
    nsid = d.new_ns()
    with make_client(d, connections=4) as c, open_ns(c, nsid) as n:
        keys = n.keys(tokens(500, 2))
        data = blocks(2)

        def use(_: int) -> int:
            return len(n.lookup(keys))

        def restart() -> None:
            with ThreadPoolExecutor(8) as pool:   # every connection opened
                assert list(pool.map(use, range(64))) == [0] * 64
            d.kill()
            d.start()

        restart()
        seq = call_twice(use)
        assert seq in (["0"], ["ECONNRESET", "0"]), \
            f"one caller after a restart: {seq}"
        restart()
        with ThreadPoolExecutor(8) as pool:
            par = list(pool.map(lambda _: call_twice(use), range(32)))
        assert all(r[-1] == "0" for r in par), \
            f"concurrent callers after a restart: {par}"
        assert n.store(keys, data) == 2
        assert n.load(keys) == data


SYS_PIDFD_GETFD = 438     # the same number on every architecture


class Lingering:
    """A killed daemon's sockets kept open, as its io_uring keeps them until
    a kernel worker tears the ring down after the process is reaped: the
    daemon's descriptors, taken with pidfd_getfd(2) while it lives. A
    request that reaches one is never answered; a watcher then closes that
    socket (what the teardown does in the end) and leaves the others open,
    so every connection a client tries meets a dead daemon that looks
    alive."""

    def __init__(self, pid: int) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fds: list[int] = []
        self.requests = 0       # requests that reached a lingering socket
        self.lock = threading.Lock()
        self.done = threading.Event()
        pidfd = os.pidfd_open(pid)
        try:
            for name in os.listdir(f"/proc/{pid}/fd"):
                try:
                    what = os.readlink(f"/proc/{pid}/fd/{name}")
                except OSError:
                    continue
                if not what.startswith("socket:"):
                    continue
                fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
                if fd < 0:
                    err = ctypes.get_errno()
                    self.close()
                    if err in (errno.EPERM, errno.ENOSYS):
                        pytest.skip(f"pidfd_getfd: {os.strerror(err)}")
                    raise OSError(err, "pidfd_getfd")
                self.fds.append(fd)
        finally:
            os.close(pidfd)
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def watch(self) -> "Lingering":
        self.thread.start()
        return self

    def _watch(self) -> None:
        while not self.done.is_set():
            p = select.poll()
            with self.lock:
                for fd in self.fds:
                    p.register(fd, select.POLLIN)
            for fd, _ev in p.poll(20):
                with self.lock:
                    if fd not in self.fds:
                        continue
                    # A request waiting (not the client's hang-up)?
                    with socket.fromfd(fd, socket.AF_UNIX,
                                       socket.SOCK_SEQPACKET) as s:
                        try:
                            if s.recv(1, socket.MSG_PEEK |
                                      socket.MSG_DONTWAIT):
                                self.requests += 1
                        except OSError:
                            pass
                    self.fds.remove(fd)
                    os.close(fd)

    def close(self) -> None:
        self.done.set()
        if getattr(self, "thread", None) and self.thread.is_alive():
            self.thread.join()
        with self.lock:
            for fd in self.fds:
                os.close(fd)
            self.fds = []


def test_restart_while_old_connections_linger(make_daemon) -> None:
    """The daemon restarts while the old one's connections stay open and
    silent (io_uring tears them down after the process is gone): a call
    that meets one fails once with ECONNRESET, and the next call, or a
    concurrent caller's retry, does not meet another one."""
    d = make_daemon()
    nsid = d.new_ns()
    with make_client(d, connections=4) as c, open_ns(c, nsid) as n:
        keys = n.keys(tokens(510, 2))
        data = blocks(2)

        def use(_: int) -> int:
            return len(n.lookup(keys))

        def daemon_sockets() -> int:
            fds = Path(f"/proc/{d.proc.pid}/fd")
            return sum(1 for f in fds.iterdir()
                       if os.readlink(f).startswith("socket:"))

        def restart() -> Lingering:
            for _ in range(100):    # until every connection is open
                with ThreadPoolExecutor(8) as pool:
                    assert list(pool.map(use, range(64))) == [0] * 64
                if daemon_sockets() == 1 + 4:
                    break
            held = Lingering(d.proc.pid)
            d.kill()
            d.start()
            return held.watch()

        held = restart()
        try:
            assert len(held.fds) == 1 + 4, "the listener and 4 connections"
            seq = call_twice(use)
            assert seq == ["ECONNRESET", "0"], \
                f"one caller after a restart, old connections lingering: {seq}"
            assert [use(0) for _ in range(8)] == [0] * 8
            assert held.requests == 1
        finally:
            held.close()
        held = restart()
        try:
            with ThreadPoolExecutor(8) as pool:
                par = list(pool.map(lambda _: call_twice(use), range(32)))
            assert all(r[-1] == "0" and len(r) <= 2 for r in par), \
                f"concurrent callers after a restart: {par}"
            assert 1 <= held.requests <= 4
        finally:
            held.close()
        assert n.store(keys, data) == 2
        assert n.load(keys) == data


def test_mapped_blocks_outlive_the_daemon(make_daemon) -> None:
    d = make_daemon()
    nsid = d.new_ns()
    with make_client(d) as c, open_ns(c, nsid) as n:
        keys = n.keys(tokens(600, 3))
        data = blocks(3)
        assert n.store(keys, data) == 3
        m = n.load_map(keys)
        assert [bytes(v) for v in m] == data
        d.kill()
        assert [bytes(v) for v in m] == data   # still readable
        m.release()
        d.start()
        assert n.lookup(keys) == []
        assert n.store(keys, data) == 3
        with n.load_map(keys) as views:
            assert [bytes(v) for v in views] == data


def test_async_calls_when_the_daemon_dies(make_daemon) -> None:
    d = make_daemon()
    with make_client(d, timeout_ms=2000) as c, open_ns(c, d.new_ns()) as n:
        keys = n.keys(tokens(700, 2))
        assert n.store(keys, blocks(2)) == 2
        d.kill()
        bufs = [bytearray(2 * BLOCK_BYTES) for _ in range(4)]
        for i in range(4):
            n.load_async(keys, bufs[i], tag=i)
        done = poll_all(c, 4, timeout=15)
        assert sorted(x.tag for x in done) == [0, 1, 2, 3]
        for x in done:
            assert x.result < 0 and -x.result in CONN_ERRNOS, x
            assert isinstance(x.error(), kvcache.KvcacheError)
        assert c.pending() == 0


def test_pool_pressure_keeps_bytes_right(make_daemon) -> None:
    """More blocks than the pool holds: stores give a prefix count or
    ENOSPC, eviction makes room, and whatever loads is the right bytes."""
    d = make_daemon(pool_size=8 << 20)            # 128 blocks
    with make_client(d) as c, open_ns(c, d.new_ns()) as n:
        chains = []
        for i in range(40):                        # 40 * 8 = 320 blocks
            keys = n.keys(tokens(800 + i, 8))
            data = blocks(8)
            try:
                stored = n.store(keys, data)
            except kvcache.KvcacheError as e:
                assert e.errno in (errno.ENOSPC, errno.EAGAIN), e
                stored = 0
            assert 0 <= stored <= 8
            chains.append((keys, data, stored))
        assert sum(s for _, _, s in chains) > 128  # eviction made room
        assert any(s == 8 for _, _, s in chains[-5:])
        assert c.stat("evictions") > 0
        for keys, data, stored in chains:
            got = n.load(keys)
            assert len(got) <= stored
            assert got == data[:len(got)]


def test_kvcachectl_options(daemon: Daemon) -> None:
    """kvcachectl takes the options kvcachectl(8) names, short and long:
    --help and -h print the usage on stdout and exit 0, --socket reaches
    the daemon as -S does, and an unknown option is a usage error (2,
    the usage on stderr)."""
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(KVCACHECTL), *args], capture_output=True,
                              text=True, timeout=30)

    for opt in ("--help", "-h"):
        r = run(opt)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("usage: kvcachectl")
    short = run("-S", daemon.sock, "status")
    long = run("--socket", daemon.sock, "status")
    assert short.returncode == 0 and long.returncode == 0, long.stderr
    assert "mode" in long.stdout
    r = run("--no-such-option", "status")
    assert r.returncode == 2
    assert "usage: kvcachectl" in r.stderr
