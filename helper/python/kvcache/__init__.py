# SPDX-License-Identifier: GPL-2.0
"""kvcache: the Python binding of libkvcache, over ctypes.

libkvcache (helper/libkvcache/include/libkvcache.h) is the client library of
kvcached, the KV-cache tier. This module wraps every function of its
header in Python shape, with the standard library only and no build step::

    import kvcache

    with kvcache.Client(socket="/run/kvcache/kvcached.sock") as client:
        with client.namespace(7, model="meta-llama/Llama-3.1-8B-Instruct",
                              weights_revision="0e9e39f2...",
                              tokenizer="llama3@0e9e39f2",
                              kv_layout="paged-nhd", kv_dtype="bf16",
                              tokens_per_block=16,
                              block_bytes=2 << 20) as ns:
            keys = ns.keys(prompt_tokens)
            cached = ns.load(keys)              # the cached prefix, bytes
            ns.store(keys[len(cached):], computed_blocks,
                     parent=keys[len(cached) - 1] if cached else None)

The shared library is found through $KVCACHE_LIB, else
build/lib/libkvcache.so of the source tree this file lies in
(helper/python/kvcache/ -> ../../../build/lib), else the system's
ctypes.util.find_library("kvcache"), else libkvcache.so.1 by the
dynamic loader's search (the libkvcache1 package, or the wheel on a
system that has it). It is loaded on first use, so that
importing this module never fails.

Conventions:

- A negative return of the library raises KvcacheError, a subclass of
  OSError whose errno is set (and of the matching OSError subclass:
  FileNotFoundError for ENOENT, ConnectionRefusedError, PermissionError,
  ...), with kvcache_strerror()'s text.
- Arguments are checked here before anything reaches C: ValueError for a
  bad value (a key that is not 32 bytes, a buffer too small, an integer
  out of range), TypeError for a bad type. A mistake in Python never
  crashes the process.
- Buffers are taken through the buffer protocol without a copy: bytes,
  bytearray, memoryview, array.array, mmap, numpy arrays (C-contiguous).
  Asynchronous calls keep a reference (and a buffer export, so a
  bytearray cannot be resized) to their keys and buffer until their
  completion is collected by Client.poll() or the client is closed.
- Thread safety: a Client and its Namespaces may be used from any number
  of threads; ctypes releases the GIL while the library works. close()
  waits for the calls in progress.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as _errno
import gc
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple, Sequence, Union

__all__ = [
    "KEY_SIZE", "LIB_VERSION", "TIER_DRAM", "TIER_G3", "TIER_G4",
    "TIERS_ALL", "MODE_KERNEL", "MODE_MEMFD", "DEFAULT_SOCKET", "NS_NO_SALT",
    "KvcacheError", "Info", "Completion", "Client", "Namespace",
    "MappedBlocks", "load_library", "library_path", "strerror",
]

# ---- constants of libkvcache.h ---------------------------------------------

LIB_VERSION = 1                 #: KVCACHE_LIB_VERSION
KEY_SIZE = 32                   #: KVCACHE_LIB_KEY_SIZE, bytes of one key
TIER_DRAM = 1 << 0              #: KVCACHE_TIER_DRAM, the pinned pool (G2)
TIER_G3 = 1 << 1                #: KVCACHE_TIER_G3, local NVMe
TIER_G4 = 1 << 2                #: KVCACHE_TIER_G4, the shared filesystem
TIERS_ALL = 0x7                 #: KVCACHE_TIERS_ALL
MODE_KERNEL = 1                 #: KVCACHE_MODE_KERNEL: kvcache.ko's pool
MODE_MEMFD = 2                  #: KVCACHE_MODE_MEMFD: kvcached's memfd pool
DEFAULT_SOCKET = "/run/kvcache/kvcached.sock"   #: KVCACHE_DEFAULT_SOCKET
NS_NO_SALT = 1 << 0             #: KVCACHE_NS_NO_SALT: keys without the ns salt

_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1
_SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1
_INT_MAX = (1 << 31) - 1
# A blocking poll is cut into slices this long, so that close() and
# KeyboardInterrupt are never kept waiting for ever.
_POLL_SLICE_MS = 100

# ---- the C structures -------------------------------------------------------


class _Options(ctypes.Structure):
    _fields_ = [
        ("socket", ctypes.c_char_p),
        ("device", ctypes.c_char_p),
        ("connections", ctypes.c_uint),
        ("workers", ctypes.c_uint),
        ("timeout_ms", ctypes.c_int),
        ("g3_directory", ctypes.c_char_p),
    ]


class _Info(ctypes.Structure):
    _fields_ = [
        ("mode", ctypes.c_uint32),
        ("max_batch", ctypes.c_uint32),
        ("block_size", ctypes.c_uint64),
        ("nr_blocks", ctypes.c_uint64),
    ]


class _Identity(ctypes.Structure):
    _fields_ = [
        ("model", ctypes.c_char_p),
        ("weights_revision", ctypes.c_char_p),
        ("tokenizer", ctypes.c_char_p),
        ("kv_layout", ctypes.c_char_p),
        ("kv_dtype", ctypes.c_char_p),
        ("lora", ctypes.c_char_p),
        ("salt", ctypes.c_void_p),
        ("salt_len", ctypes.c_size_t),
        ("tokens_per_block", ctypes.c_uint32),
        ("tp_rank", ctypes.c_uint32),
        ("tp_size", ctypes.c_uint32),
        ("pp_rank", ctypes.c_uint32),
        ("pp_size", ctypes.c_uint32),
    ]


class _Block(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("index", ctypes.c_uint32),
        ("gen", ctypes.c_uint32),
        ("conn", ctypes.c_uint32),
        ("epoch", ctypes.c_uint32),
        ("map", ctypes.c_void_p),
    ]


class _Completion(ctypes.Structure):
    _fields_ = [
        ("tag", ctypes.c_uint64),
        ("result", ctypes.c_int),
    ]


class _PyBuffer(ctypes.Structure):
    """CPython's Py_buffer (Include/pybuffer.h), for PyObject_GetBuffer."""
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_PyBUF_SIMPLE = 0
_PyBUF_WRITABLE = 0x0001
_PyBUF_READ = 0x100

_py_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_py_get_buffer.argtypes = (ctypes.py_object, ctypes.POINTER(_PyBuffer),
                           ctypes.c_int)
_py_get_buffer.restype = ctypes.c_int
_py_release_buffer = ctypes.pythonapi.PyBuffer_Release
_py_release_buffer.argtypes = (ctypes.POINTER(_PyBuffer),)
_py_release_buffer.restype = None
_py_memoryview_from_memory = ctypes.pythonapi.PyMemoryView_FromMemory
_py_memoryview_from_memory.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t,
                                       ctypes.c_int)
_py_memoryview_from_memory.restype = ctypes.py_object

# ---- the library ------------------------------------------------------------

_c_void_pp = ctypes.POINTER(ctypes.c_void_p)

# name: (restype, argtypes), for every function of libkvcache.h.
_PROTOTYPES: dict[str, tuple[Any, tuple[Any, ...]]] = {
    "kvcache_open": (ctypes.c_int, (ctypes.POINTER(_Options), _c_void_pp)),
    "kvcache_close": (None, (ctypes.c_void_p,)),
    "kvcache_get_info": (ctypes.c_int,
                         (ctypes.c_void_p, ctypes.POINTER(_Info))),
    "kvcache_strerror": (ctypes.c_char_p, (ctypes.c_int,)),
    "kvcache_ns_open": (ctypes.c_int,
                        (ctypes.c_void_p, ctypes.c_uint32,
                         ctypes.POINTER(_Identity), ctypes.c_size_t,
                         _c_void_pp)),
    "kvcache_ns_open_flags": (ctypes.c_int,
                              (ctypes.c_void_p, ctypes.c_uint32,
                               ctypes.POINTER(_Identity), ctypes.c_size_t,
                               ctypes.c_uint32, _c_void_pp)),
    "kvcache_ns_close": (None, (ctypes.c_void_p,)),
    "kvcache_ns_keys": (ctypes.c_size_t,
                        (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                         ctypes.c_void_p, ctypes.c_size_t)),
    "kvcache_ns_tokens_per_block": (ctypes.c_uint32, (ctypes.c_void_p,)),
    "kvcache_ns_block_bytes": (ctypes.c_size_t, (ctypes.c_void_p,)),
    "kvcache_lookup": (ctypes.c_int,
                       (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                        ctypes.POINTER(ctypes.c_uint32))),
    "kvcache_load": (ctypes.c_int,
                     (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                      ctypes.c_void_p, ctypes.c_size_t)),
    "kvcache_load_map": (ctypes.c_int,
                         (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                          ctypes.POINTER(_Block))),
    "kvcache_release": (None,
                        (ctypes.c_void_p, ctypes.POINTER(_Block),
                         ctypes.c_size_t)),
    "kvcache_store": (ctypes.c_int,
                      (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)),
    "kvcache_region_register": (ctypes.c_int,
                                (ctypes.c_void_p, ctypes.c_uint32,
                                 ctypes.c_uint64, ctypes.c_uint64,
                                 ctypes.POINTER(ctypes.c_uint32))),
    "kvcache_region_unregister": (ctypes.c_int,
                                  (ctypes.c_void_p, ctypes.c_uint32)),
    "kvcache_load_region": (ctypes.c_int,
                            (ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_size_t, ctypes.c_uint32,
                             ctypes.c_uint64, ctypes.c_uint64)),
    "kvcache_load_async": (ctypes.c_int,
                           (ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_size_t, ctypes.c_void_p,
                            ctypes.c_size_t, ctypes.c_uint64)),
    "kvcache_store_async": (ctypes.c_int,
                            (ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_uint64)),
    "kvcache_poll": (ctypes.c_int,
                     (ctypes.c_void_p, ctypes.POINTER(_Completion),
                      ctypes.c_uint, ctypes.c_int)),
    "kvcache_event_fd": (ctypes.c_int, (ctypes.c_void_p,)),
    "kvcache_pending": (ctypes.c_uint, (ctypes.c_void_p,)),
    "kvcache_stat": (ctypes.c_int,
                     (ctypes.c_void_p, ctypes.c_char_p,
                      ctypes.POINTER(ctypes.c_uint64))),
}

_lib: ctypes.CDLL | None = None
_lib_path: str | None = None
_lib_lock = threading.Lock()


SONAME = "libkvcache.so.1"   #: the library's soname (its ABI version)


def _candidates() -> list[str]:
    """Where the library is looked for, in order: $KVCACHE_LIB alone when
    it is set (a wrong one is an error, not a reason to load another)."""
    env = os.environ.get("KVCACHE_LIB")
    if env:
        return [env]
    out = []
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.normpath(os.path.join(here, "..", "..", "..",
                                             "build", "lib",
                                             "libkvcache.so")))
    found = ctypes.util.find_library("kvcache")
    if found:
        out.append(found)
    # The installed library by its soname (libkvcache1, make install), for
    # when find_library cannot ask ldconfig (no ldconfig in PATH, a venv
    # on a minimal system): the dynamic loader's own search.
    if SONAME not in out:
        out.append(SONAME)
    return out


def load_library(path: str | os.PathLike[str] | None = None) -> ctypes.CDLL:
    """Load libkvcache (once) and declare the prototypes of its functions.

    path: a file to load instead of the default search ($KVCACHE_LIB if
    set; else the source tree's build/lib/libkvcache.so, then the
    system's). Raises OSError when no library can be loaded, with where it
    looked.
    """
    global _lib, _lib_path
    with _lib_lock:
        if _lib is not None and path is None:
            return _lib
        tries = [os.fspath(path)] if path is not None else _candidates()
        errors = []
        for cand in tries:
            # A bare name (find_library's answer) is for the loader;
            # a path must exist.
            if os.sep in cand and not os.path.exists(cand):
                errors.append(f"{cand}: no such file")
                continue
            try:
                lib = ctypes.CDLL(cand)
            except OSError as e:
                errors.append(f"{cand}: {e}")
                continue
            missing = [name for name in _PROTOTYPES
                       if not hasattr(lib, name)]
            if missing:
                errors.append(f"{cand}: lacks {', '.join(missing)}")
                continue
            for name, (restype, argtypes) in _PROTOTYPES.items():
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
            _lib, _lib_path = lib, cand
            return lib
        raise OSError(_errno.ENOENT,
                      "libkvcache not found (build it with 'make lib' or "
                      "set $KVCACHE_LIB): " + "; ".join(errors))


def library_path() -> str | None:
    """The path of the loaded library (None before the first use)."""
    return _lib_path


def _L() -> ctypes.CDLL:
    return _lib if _lib is not None else load_library()


def strerror(err: int) -> str:
    """kvcache_strerror(): the library's description of a return value."""
    err = _int(err, "err", -_INT_MAX - 1, _INT_MAX)
    s = _L().kvcache_strerror(err)
    return s.decode("utf-8", "replace") if s else os.strerror(abs(err))

# ---- errors -----------------------------------------------------------------


class KvcacheError(OSError):
    """An error returned by libkvcache (a negative errno).

    An instance is also of the OSError subclass of its errno
    (FileNotFoundError for ENOENT, ConnectionRefusedError for
    ECONNREFUSED, PermissionError for EACCES and EPERM, ...), so callers
    may catch either; .errno holds the positive errno value, .strerror
    kvcache_strerror()'s text and .call the library function.
    """

    call: str = ""


_error_classes: dict[type, type] = {}


def _error_class(err: int) -> type:
    """KvcacheError, mixed with the OSError subclass errno err maps to."""
    base = type(OSError(err, ""))
    if base is OSError:
        return KvcacheError
    cls = _error_classes.get(base)
    if cls is None:
        cls = type("Kvcache" + base.__name__, (KvcacheError, base),
                   {"__module__": __name__, "__doc__": KvcacheError.__doc__})
        _error_classes[base] = cls
    return cls


def _raise(ret: int, call: str) -> None:
    """Raise the KvcacheError of the negative return ret of call."""
    err = -ret
    try:
        text = strerror(ret)
    except Exception:  # noqa: BLE001 - never hide the real error
        text = os.strerror(err)
    exc = _error_class(err)(err, f"{call}: {text}")
    exc.call = call
    raise exc


def _check(ret: int, call: str) -> int:
    if ret < 0:
        _raise(ret, call)
    return ret

# ---- argument checks --------------------------------------------------------


def _int(v: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(v, bool):
        raise TypeError(f"{name} must be an int, not bool")
    if not isinstance(v, int):
        try:
            v = v.__index__()
        except AttributeError:
            raise TypeError(f"{name} must be an int, not "
                            f"{type(v).__name__}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], not {v}")
    return v


def _str(v: Any, name: str) -> bytes:
    if not isinstance(v, str):
        raise TypeError(f"{name} must be a str, not {type(v).__name__}")
    b = v.encode("utf-8")
    if b"\0" in b:
        raise ValueError(f"{name} must not contain NUL characters")
    return b


def _path(v: Any, name: str) -> bytes | None:
    if v is None:
        return None
    try:
        b = os.fsencode(v)
    except TypeError:
        raise TypeError(f"{name} must be a path (str, bytes or os.PathLike), "
                        f"not {type(v).__name__}") from None
    if b"\0" in b:
        raise ValueError(f"{name} must not contain NUL characters")
    return b


def _is_buffer(obj: Any) -> bool:
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False


class _Pin:
    """A buffer export of a Python object, held while C uses its memory.

    Nothing is copied: addr is the object's own memory. While the export
    is held the exporter keeps that memory where it is (a bytearray cannot
    be resized, for one).
    """

    __slots__ = ("addr", "nbytes", "_view", "_held", "obj")

    def __init__(self, obj: Any, name: str, writable: bool) -> None:
        try:
            mv = memoryview(obj)
        except TypeError:
            raise TypeError(f"{name} must support the buffer protocol "
                            f"(bytes, bytearray, memoryview, array, numpy "
                            f"array), not {type(obj).__name__}") from None
        with mv:
            if writable and mv.readonly:
                raise TypeError(f"{name} must be writable "
                                f"({type(obj).__name__} is read-only)")
            if not mv.c_contiguous:
                raise ValueError(f"{name} must be C-contiguous")
        self.obj = obj
        self._view = _PyBuffer()
        self._held = False
        flags = _PyBUF_WRITABLE if writable else _PyBUF_SIMPLE
        try:
            _py_get_buffer(obj, ctypes.byref(self._view), flags)
        except BufferError as e:
            raise ValueError(f"{name}: {e}") from None
        self._held = True
        self.addr = self._view.buf or 0
        self.nbytes = self._view.len

    def release(self) -> None:
        if self._held:
            self._held = False
            _py_release_buffer(ctypes.byref(self._view))

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _keys_arg(keys: Any, name: str = "keys") -> bytes:
    """keys (a list of 32-byte keys, or one buffer of n * 32 bytes) as one
    bytes object of n * 32 bytes."""
    if isinstance(keys, (str, int)) or keys is None:
        raise TypeError(f"{name} must be a sequence of {KEY_SIZE}-byte keys "
                        f"or one buffer of n * {KEY_SIZE} bytes, not "
                        f"{type(keys).__name__}")
    if _is_buffer(keys):
        with memoryview(keys) as mv:
            if not mv.c_contiguous:
                raise ValueError(f"{name} must be C-contiguous")
            b = mv.tobytes()
        if len(b) % KEY_SIZE:
            raise ValueError(f"{name}: {len(b)} bytes is not a multiple of "
                             f"the key size {KEY_SIZE}")
        return b
    try:
        items = list(keys)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of {KEY_SIZE}-byte keys, "
                        f"not {type(keys).__name__}") from None
    parts = []
    for i, k in enumerate(items):
        parts.append(_key_arg(k, f"{name}[{i}]"))
    return b"".join(parts)


def _key_arg(k: Any, name: str) -> bytes:
    if isinstance(k, str) or not _is_buffer(k):
        raise TypeError(f"{name} must be a {KEY_SIZE}-byte bytes-like "
                        f"object, not {type(k).__name__}")
    with memoryview(k) as mv:
        if not mv.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous")
        b = mv.tobytes()
    if len(b) != KEY_SIZE:
        raise ValueError(f"{name} must be {KEY_SIZE} bytes, not {len(b)}")
    return b


def _split_keys(b: bytes, n: int) -> list[bytes]:
    return [b[i * KEY_SIZE:(i + 1) * KEY_SIZE] for i in range(n)]

# ---- calls in progress ------------------------------------------------------


class _Guard:
    """Counts the calls in progress on an object so that close() waits for
    them, and refuses calls once it is closing."""

    __slots__ = ("_cond", "_active", "closed", "_what")

    def __init__(self, what: str) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._active = 0
        self.closed = False
        self._what = what

    def __enter__(self) -> "_Guard":
        with self._cond:
            if self.closed:
                raise ValueError(f"operation on a closed {self._what}")
            self._active += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        with self._cond:
            self._active -= 1
            if not self._active:
                self._cond.notify_all()

    def close(self) -> bool:
        """Refuse new calls and wait for those in progress. Returns False
        if it was already closed."""
        with self._cond:
            if self.closed:
                return False
            self.closed = True
            while self._active:
                self._cond.wait()
        return True

# ---- results ----------------------------------------------------------------


@dataclass(frozen=True)
class Info:
    """The pool geometry and mode, as the daemon announced them
    (struct kvcache_client_info)."""
    mode: int           #: MODE_KERNEL or MODE_MEMFD
    max_batch: int      #: keys the daemon takes per message
    block_size: int     #: bytes of one pool block
    nr_blocks: int      #: blocks in the pool


class Completion(NamedTuple):
    """One asynchronous call's completion: the caller's tag and the result
    the synchronous call would have returned (a count, or a negative
    errno: see Completion.error)."""
    tag: Any
    result: int

    def error(self) -> KvcacheError | None:
        """The KvcacheError of a negative result, None otherwise."""
        if self.result >= 0:
            return None
        try:
            _raise(self.result, "async")
        except KvcacheError as e:
            return e
        return None  # pragma: no cover


class _Async:
    """What an asynchronous call needs alive until it completes."""
    __slots__ = ("tag", "ns", "refs")

    def __init__(self, tag: Any, ns: "Namespace", refs: list[Any]) -> None:
        self.tag = tag
        self.ns = ns
        self.refs = refs

    def release(self) -> None:
        for r in self.refs:
            if isinstance(r, _Pin):
                r.release()
        self.refs = []

# ---- mapped blocks ----------------------------------------------------------


class _MapState:
    """The C side of one load_map(): the kvcache_block array and the
    read-only memoryviews over the pool mapping, and whether each may be
    released yet (no view derived from it is alive)."""

    def __init__(self, client: "Client", blocks: ctypes.Array, n: int) -> None:
        self.client = client
        self.blocks = blocks
        self.n = n
        self.views: list[memoryview] = []
        self.mbufs: list[Any] = []
        self.base: list[int] = []
        self.done = [False] * n
        self.orphan = False
        self.lock = threading.Lock()    # one release() at a time
        for i in range(n):
            b = blocks[i]
            ln = int(b.len)
            if not b.data:
                raise KvcacheError(_errno.EPROTO,
                                   "kvcache_load_map returned a NULL block")
            mv = _py_memoryview_from_memory(b.data, ln, _PyBUF_READ)
            refs = gc.get_referents(mv)
            self.views.append(mv)
            # The memoryview's managed buffer: every view made from this
            # one (a slice, memoryview(v)) holds a reference to it.
            self.mbufs.append(refs[0] if len(refs) == 1 else None)
            del mv, refs
        # Measured as busy() measures, with no local reference left.
        self.base = [self._refs(i) for i in range(n)]

    def _refs(self, i: int) -> int:
        mbuf = self.mbufs[i]
        return 0 if mbuf is None else sys.getrefcount(mbuf) - 1

    def busy(self, i: int, strict: bool) -> bool:
        """Block i still has a view alive besides ours: a slice or another
        memoryview made from it (strict), or ours handed out (not strict)."""
        if self._refs(i) > self.base[i]:
            return True
        # views[i] is referenced by the list and getrefcount's argument.
        return not strict and sys.getrefcount(self.views[i]) > 2

    def release(self, strict: bool) -> int:
        """Release every block no view uses any more; returns how many are
        still in use (and stay pinned and mapped)."""
        with self.lock:
            return self._release(strict)

    def _release(self, strict: bool) -> int:
        if self.client._closed_c:
            return 0
        free = []
        for i in range(self.n):
            if self.done[i] or self.busy(i, strict):
                continue
            try:
                self.views[i].release()
            except BufferError:
                continue        # exported (numpy.frombuffer, ...)
            self.done[i] = True
            free.append(i)
        if free:
            arr = (_Block * len(free))()
            for j, i in enumerate(free):
                arr[j] = self.blocks[i]
            self.client._release_blocks(arr, len(free))
        return sum(not d for d in self.done)

    @property
    def finished(self) -> bool:
        return all(self.done)


class MappedBlocks(Sequence[memoryview]):
    """The result of Namespace.load_map(): a sequence of read-only
    memoryviews, one per loaded block, straight over the pool mapping
    (no copy). Use it as a context manager, or call release(): a mapped
    block is pinned and cannot be evicted.

    On release the memoryviews handed out are released too (using one
    afterwards raises ValueError, it never reads unmapped memory). A view
    derived from one (a slice, numpy.frombuffer) that is still alive keeps
    its block pinned: release() then raises BufferError, and the block is
    released by a later release() or by Client.close().
    """

    def __init__(self, state: _MapState) -> None:
        self._state = state

    def __len__(self) -> int:
        return self._state.n

    def __getitem__(self, i: Any) -> Any:
        if self.released:
            raise ValueError("the mapped blocks were released")
        return self._state.views[i]

    def __iter__(self) -> Iterator[memoryview]:
        if self.released:
            raise ValueError("the mapped blocks were released")
        return iter(list(self._state.views))

    @property
    def released(self) -> bool:
        """Whether every block was released."""
        return self._state.finished or self._state.client._closed_c

    def release(self) -> None:
        """Release every block (kvcache_release()); raises BufferError for
        those a derived view still uses (they stay pinned). Does nothing
        once they are released, or once the client is closed."""
        st = self._state
        if st.finished or st.client._closed_c:
            return
        try:
            with st.client._guard:
                busy = st.release(strict=True)
        except ValueError:
            return          # the client is closing: it releases them
        if not busy:
            st.client._forget_map(st)
        else:
            raise BufferError(f"{busy} mapped block(s) still have a view "
                              f"derived from them (a slice, an export); "
                              f"they stay pinned until those are gone and "
                              f"release() is called again")

    def __enter__(self) -> "MappedBlocks":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        try:
            self.release()
        except BufferError:
            self._state.orphan = True   # released once the views are gone
            if exc_type is None:
                raise

    def __del__(self) -> None:
        # No lock here (a collection may run anywhere): the next
        # load_map() or Client.close() releases what views no longer use.
        try:
            self._state.orphan = True
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return (f"<kvcache.MappedBlocks {len(self)} blocks"
                f"{' released' if self.released else ''}>")

# ---- the client -------------------------------------------------------------


class Client:
    """A client of kvcached (kvcache_open()): a few connections to the
    daemon, and /dev/kvcache in kernel mode.

    socket: kvcached's socket (None: $KVCACHE_SOCKET, else
    DEFAULT_SOCKET); device: the device (None: /dev/kvcache); connections
    (1..64, 0: 4) and workers (1..64, 0: 2); timeout_ms: how long one reply
    may take (0: 30000); g3_directory: kvcached's g3 directory, for
    Namespace.load_region().

    Raises KvcacheError: ENOENT or ECONNREFUSED (no daemon), EACCES,
    EPROTONOSUPPORT, EPROTO, EINVAL, ENOMEM.
    """

    def __init__(self, socket: str | os.PathLike[str] | None = None,
                 device: str | os.PathLike[str] | None = None,
                 connections: int = 0, workers: int = 0,
                 timeout_ms: int = 0,
                 g3_directory: str | os.PathLike[str] | None = None) -> None:
        self._c = ctypes.c_void_p()
        self._closed_c = True
        self._guard = _Guard("kvcache.Client")
        self._guard.closed = True
        self._lock = threading.RLock()
        self._pending: dict[int, _Async] = {}
        self._next_tag = 1
        self._namespaces: "set[Namespace]" = set()
        self._maps: list[_MapState] = []
        lib = _L()
        sock = _path(socket, "socket")
        dev = _path(device, "device")
        g3 = _path(g3_directory, "g3_directory")
        connections = _int(connections, "connections", 0, 64)
        workers = _int(workers, "workers", 0, 64)
        timeout_ms = _int(timeout_ms, "timeout_ms", 0, _INT_MAX)
        # The strings stay referenced for the client's life.
        self._strings = (sock, dev, g3)
        self._opts = _Options(sock, dev, connections, workers, timeout_ms, g3)
        ret = lib.kvcache_open(ctypes.byref(self._opts), ctypes.byref(self._c))
        _check(ret, "kvcache_open")
        if not self._c.value:
            raise KvcacheError(_errno.EPROTO,
                               "kvcache_open returned no client")
        self._closed_c = False
        self._guard.closed = False
        self.socket = os.fsdecode(sock) if sock is not None else None

    # -- life ------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._guard.closed

    def close(self) -> None:
        """Close the client (kvcache_close()): wait for the calls in
        progress and the asynchronous calls, release every mapped block,
        close the namespaces. Idempotent.

        If a view derived from a mapped block is still alive, the library's
        client is left open (a ResourceWarning says so) rather than unmap
        memory Python can still read.
        """
        if not self._guard.close():
            return
        with self._lock:
            maps = list(self._maps)
        busy = sum(m.release(strict=True) for m in maps)
        if busy:
            warnings.warn(f"kvcache.Client.close(): {busy} mapped block(s) "
                          f"still have views alive; the client stays open "
                          f"to keep them readable", ResourceWarning,
                          stacklevel=2)
            return
        with self._lock:
            namespaces = list(self._namespaces)
        for ns in namespaces:
            ns._guard.close()
        _L().kvcache_close(self._c)     # waits for the asynchronous calls
        self._closed_c = True
        self._c = ctypes.c_void_p()
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            self._namespaces.clear()
            self._maps.clear()
        for p in pending:
            p.release()
        for ns in namespaces:
            ns._h = ctypes.c_void_p()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed_c:
                self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<kvcache.Client {state} socket={self.socket!r}>"

    # -- queries -----------------------------------------------------------

    @property
    def info(self) -> Info:
        """The pool geometry and mode (kvcache_get_info())."""
        out = _Info()
        with self._guard:
            _check(_L().kvcache_get_info(self._c, ctypes.byref(out)),
                   "kvcache_get_info")
        return Info(int(out.mode), int(out.max_batch), int(out.block_size),
                    int(out.nr_blocks))

    def stat(self, name: str) -> int:
        """One of the daemon's counters (kvcache_stat(); kvcachectl stats
        lists them)."""
        b = _str(name, "name")
        if not b:
            raise ValueError("name must not be empty")
        val = ctypes.c_uint64()
        with self._guard:
            _check(_L().kvcache_stat(self._c, b, ctypes.byref(val)),
                   "kvcache_stat")
        return int(val.value)

    def event_fd(self) -> int:
        """An eventfd readable while completions wait (kvcache_event_fd());
        the client owns it."""
        with self._guard:
            return _check(_L().kvcache_event_fd(self._c), "kvcache_event_fd")

    def pending(self) -> int:
        """Asynchronous calls queued or running, not yet collected."""
        with self._guard:
            return int(_L().kvcache_pending(self._c))

    # -- asynchronous completions -------------------------------------------

    def poll(self, max: int = 64, timeout_ms: int = -1) -> list[Completion]:
        """Collect up to max completions (kvcache_poll()), waiting up to
        timeout_ms for the first (0: do not wait, -1: for ever). Returns a
        list of Completion(tag, result), tag the caller's. The buffers of
        the completed calls are let go.
        """
        max = _int(max, "max", 0, _U32_MAX)
        timeout_ms = _int(timeout_ms, "timeout_ms", -1, _INT_MAX)
        if not max:
            return []
        max = min(max, 4096)
        out = (_Completion * max)()
        deadline = (None if timeout_ms < 0
                    else time.monotonic() + timeout_ms / 1000)
        while True:
            if deadline is None:
                wait = _POLL_SLICE_MS
            else:
                left = int((deadline - time.monotonic()) * 1000)
                wait = _max(0, min(left, _POLL_SLICE_MS))
            with self._guard:
                n = _check(_L().kvcache_poll(self._c, out, max, wait),
                           "kvcache_poll")
            if n or (deadline is not None and time.monotonic() >= deadline):
                break
        return [self._complete(out[i]) for i in range(n)]

    def _complete(self, c: _Completion) -> Completion:
        with self._lock:
            p = self._pending.pop(int(c.tag), None)
        if p is None:
            return Completion(int(c.tag), int(c.result))
        p.release()
        p.ns._async_done()
        return Completion(p.tag, int(c.result))

    def _queue(self, ns: "Namespace", tag: Any, refs: list[Any]) -> int:
        with self._lock:
            t = self._next_tag
            self._next_tag += 1
            self._pending[t] = _Async(tag, ns, refs)
        ns._async_started()
        return t

    def _unqueue(self, t: int) -> None:
        with self._lock:
            p = self._pending.pop(t, None)
        if p is not None:
            p.release()
            p.ns._async_done()

    # -- GPU regions -------------------------------------------------------

    def region_register(self, provider: int, offset: int,
                        length: int) -> int:
        """Register length bytes at offset of P2P provider as a region of
        this client (kvcache_region_register()); returns the region id."""
        provider = _int(provider, "provider", 0, _U32_MAX)
        offset = _int(offset, "offset", 0, _U64_MAX)
        length = _int(length, "length", 1, _U64_MAX)
        region = ctypes.c_uint32()
        with self._guard:
            _check(_L().kvcache_region_register(self._c, provider, offset,
                                                length, ctypes.byref(region)),
                   "kvcache_region_register")
        return int(region.value)

    def region_unregister(self, region: int) -> None:
        """Unregister a region (kvcache_region_unregister())."""
        region = _int(region, "region", 0, _U32_MAX)
        with self._guard:
            _check(_L().kvcache_region_unregister(self._c, region),
                   "kvcache_region_unregister")

    # -- namespaces --------------------------------------------------------

    def namespace(self, ns_id: int, *, model: str, weights_revision: str,
                  tokenizer: str, kv_layout: str, kv_dtype: str,
                  lora: str = "", salt: bytes = b"",
                  tokens_per_block: int, tp_rank: int = 0, tp_size: int = 1,
                  pp_rank: int = 0, pp_size: int = 1,
                  block_bytes: int, ns_salt: bool = True) -> "Namespace":
        """Open namespace ns_id (created by the administrator) for a model
        whose blocks hold block_bytes bytes of KV (kvcache_ns_open()).
        The identity (Documentation/userspace-api/keys.md) makes the keys: every field
        must match for KV to be reused. By default the keys also cover
        the namespace's salt, which kvcached gives only to readers of the
        namespace (PermissionError otherwise); ns_salt=False opts out
        (KVCACHE_NS_NO_SALT), for sharing KV across namespaces."""
        return Namespace(self, ns_id, model=model,
                         weights_revision=weights_revision,
                         tokenizer=tokenizer, kv_layout=kv_layout,
                         kv_dtype=kv_dtype, lora=lora, salt=salt,
                         tokens_per_block=tokens_per_block, tp_rank=tp_rank,
                         tp_size=tp_size, pp_rank=pp_rank, pp_size=pp_size,
                         block_bytes=block_bytes, ns_salt=ns_salt)

    # -- mapped blocks -----------------------------------------------------

    def _release_blocks(self, arr: ctypes.Array, n: int) -> None:
        _L().kvcache_release(self._c, arr, n)

    def _reap(self) -> None:
        """Release the mapped blocks whose MappedBlocks is gone and whose
        views are no longer used."""
        with self._lock:
            maps = [m for m in self._maps if m.orphan and not m.finished]
        if not maps or self._closed_c:
            return
        try:
            with self._guard:
                for m in maps:
                    m.release(strict=False)
        except ValueError:
            return                      # closing
        with self._lock:
            self._maps = [m for m in self._maps if not m.finished]

    def _forget_map(self, state: _MapState) -> None:
        with self._lock:
            try:
                self._maps.remove(state)
            except ValueError:
                pass


def _max(a: int, b: int) -> int:
    """max(), which poll()'s parameter shadows there."""
    return a if a >= b else b


def _tokens_arg(tokens: Any) -> tuple[Any, int, Any]:
    """tokens as (address or ctypes array, count, object to keep alive)."""
    if isinstance(tokens, (str, bytes, bytearray)):
        raise TypeError("tokens must be a sequence of ints or an "
                        "array('I'), not " + type(tokens).__name__)
    if _is_buffer(tokens):
        native = "<" if sys.byteorder == "little" else ">"
        with memoryview(tokens) as mv:
            if mv.itemsize != 4 or mv.format not in ("I", "@I", "=I",
                                                     native + "I"):
                raise TypeError("a tokens buffer must hold native uint32 "
                                f"items (format 'I'), not {mv.format!r}")
            n = mv.nbytes // 4
        if n == 0:
            return None, 0, None
        pin = _Pin(tokens, "tokens", writable=False)
        return pin.addr, n, pin
    try:
        items = list(tokens)
    except TypeError:
        raise TypeError("tokens must be a sequence of ints, not "
                        f"{type(tokens).__name__}") from None
    arr = (ctypes.c_uint32 * len(items))()
    for i, t in enumerate(items):
        arr[i] = _int(t, f"tokens[{i}]", 0, _U32_MAX)
    return arr, len(items), arr


class Namespace:
    """A namespace opened by a client (kvcache_ns_open()); use
    Client.namespace() to make one. A context manager; close() is
    idempotent, and the client closes it too."""

    def __init__(self, client: Client, ns_id: int, *, model: str,
                 weights_revision: str, tokenizer: str, kv_layout: str,
                 kv_dtype: str, lora: str = "", salt: bytes = b"",
                 tokens_per_block: int, tp_rank: int = 0, tp_size: int = 1,
                 pp_rank: int = 0, pp_size: int = 1,
                 block_bytes: int, ns_salt: bool = True) -> None:
        self._h = ctypes.c_void_p()
        self._guard = _Guard("kvcache.Namespace")
        self._guard.closed = True
        self._async = 0
        self._close_later = False
        self.client = client
        self.ns_id = _int(ns_id, "ns_id", 0, _U32_MAX)
        strings = {
            "model": _str(model, "model"),
            "weights_revision": _str(weights_revision, "weights_revision"),
            "tokenizer": _str(tokenizer, "tokenizer"),
            "kv_layout": _str(kv_layout, "kv_layout"),
            "kv_dtype": _str(kv_dtype, "kv_dtype"),
            "lora": _str(lora, "lora"),
        }
        if salt is None:
            salt = b""
        if isinstance(salt, str) or not _is_buffer(salt):
            raise TypeError("salt must be bytes-like, not "
                            f"{type(salt).__name__}")
        with memoryview(salt) as mv:
            if not mv.c_contiguous:
                raise ValueError("salt must be C-contiguous")
            salt_b = mv.tobytes()
        tokens_per_block = _int(tokens_per_block, "tokens_per_block", 1,
                                _U32_MAX)
        tp_size = _int(tp_size, "tp_size", 1, _U32_MAX)
        pp_size = _int(pp_size, "pp_size", 1, _U32_MAX)
        tp_rank = _int(tp_rank, "tp_rank", 0, tp_size - 1)
        pp_rank = _int(pp_rank, "pp_rank", 0, pp_size - 1)
        block_bytes = _int(block_bytes, "block_bytes", 1, _SIZE_MAX)
        if not isinstance(ns_salt, bool):
            raise TypeError("ns_salt must be a bool, not "
                            f"{type(ns_salt).__name__}")
        flags = 0 if ns_salt else NS_NO_SALT
        info = client.info
        if block_bytes > info.block_size:
            raise ValueError(f"block_bytes {block_bytes} is larger than the "
                             f"pool's block size {info.block_size}")
        self._salt = ctypes.create_string_buffer(salt_b, _max(len(salt_b), 1))
        self._strings = strings
        self._id = _Identity(
            strings["model"], strings["weights_revision"],
            strings["tokenizer"], strings["kv_layout"], strings["kv_dtype"],
            strings["lora"],
            ctypes.addressof(self._salt) if salt_b else None, len(salt_b),
            tokens_per_block, tp_rank, tp_size, pp_rank, pp_size)
        self.identity = {
            **{k: v.decode() for k, v in strings.items()},
            "salt": salt_b, "tokens_per_block": tokens_per_block,
            "tp_rank": tp_rank, "tp_size": tp_size, "pp_rank": pp_rank,
            "pp_size": pp_size, "ns_salt": ns_salt,
        }
        with client._guard:
            _check(_L().kvcache_ns_open_flags(client._c, self.ns_id,
                                              ctypes.byref(self._id),
                                              block_bytes, flags,
                                              ctypes.byref(self._h)),
                   "kvcache_ns_open")
            self._guard.closed = False
            with client._lock:
                client._namespaces.add(self)
        self.tokens_per_block = int(
            _L().kvcache_ns_tokens_per_block(self._h))
        self.block_bytes = int(_L().kvcache_ns_block_bytes(self._h))

    # -- life ------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._guard.closed

    def close(self) -> None:
        """Close the namespace (kvcache_ns_close()). Asynchronous calls not
        yet collected keep it open in the library until Client.poll()
        collects their completions."""
        if not self._guard.close():
            return
        c = self.client
        with c._lock:
            if self._async:
                self._close_later = True
                return
            c._namespaces.discard(self)
        self._free()

    def _free(self) -> None:
        c = self.client
        try:
            with c._guard:
                if self._h.value:
                    _L().kvcache_ns_close(self._h)
        except ValueError:
            pass        # the client is closing: kvcache_close() frees it
        self._h = ctypes.c_void_p()

    def _async_started(self) -> None:
        with self.client._lock:
            self._async += 1

    def _async_done(self) -> None:
        c = self.client
        with c._lock:
            self._async -= 1
            later = self._close_later and not self._async
            if later:
                self._close_later = False
                c._namespaces.discard(self)
        if later:
            self._free()

    def __enter__(self) -> "Namespace":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<kvcache.Namespace {self.ns_id} "
                f"{self.identity['model']!r} block_bytes={self.block_bytes}"
                f"{' closed' if self.closed else ''}>")

    def _enter(self) -> "_Both":
        return _Both(self.client._guard, self._guard)

    # -- keys ----------------------------------------------------------------

    def keys(self, tokens: Union[Sequence[int], Any]) -> list[bytes]:
        """The keys of the full blocks of a token sequence
        (kvcache_ns_keys()): a list of 32-byte bytes; a trailing partial
        block has no key. tokens: a sequence of ints (0..2**32-1) or an
        array('I') (any buffer of native uint32)."""
        arg, n, keep = _tokens_arg(tokens)
        nkeys = n // self.tokens_per_block
        if not nkeys:
            return []
        out = ctypes.create_string_buffer(nkeys * KEY_SIZE)
        with self._enter():
            got = int(_L().kvcache_ns_keys(self._h, arg, n, out, nkeys))
        del keep
        if got > nkeys:
            raise KvcacheError(_errno.EPROTO,
                               f"kvcache_ns_keys returned {got} > {nkeys}")
        return _split_keys(out.raw, got)

    # -- lookup and load -----------------------------------------------------

    def lookup(self, keys: Any) -> list[int]:
        """How long a prefix of keys is cached (kvcache_lookup()): the tier
        mask (TIER_DRAM | TIER_G3 | TIER_G4) of each matched key, a list as
        long as the matched prefix."""
        kb = _keys_arg(keys)
        n = len(kb) // KEY_SIZE
        if not n:
            return []
        tiers = (ctypes.c_uint32 * n)()
        with self._enter():
            got = _check(_L().kvcache_lookup(self._h, kb, n, tiers),
                         "kvcache_lookup")
        if got > n:
            raise KvcacheError(_errno.EPROTO,
                               f"kvcache_lookup returned {got} > {n}")
        return [int(tiers[i]) for i in range(got)]

    def _stride(self, stride: Any) -> int:
        if stride is None:
            return self.block_bytes
        return _int(stride, "stride", self.block_bytes, _SIZE_MAX)

    def _need(self, n: int, stride: int) -> int:
        return 0 if not n else (n - 1) * stride + self.block_bytes

    def _out_pin(self, buffer: Any, n: int, stride: int) -> _Pin:
        pin = _Pin(buffer, "buffer", writable=True)
        need = self._need(n, stride)
        if pin.nbytes < need:
            pin.release()
            raise ValueError(f"buffer holds {pin.nbytes} bytes; {n} blocks "
                             f"of {self.block_bytes} bytes at stride "
                             f"{stride} need {need}")
        return pin

    def load(self, keys: Any) -> list[bytes]:
        """Load the longest cached prefix of keys (kvcache_load()): a list
        of bytes, block_bytes each, as long as the prefix."""
        kb = _keys_arg(keys)
        n = len(kb) // KEY_SIZE
        if not n:
            return []
        bb = self.block_bytes
        buf = bytearray(n * bb)
        got = self.load_into(kb, buf)
        mv = memoryview(buf)
        return [mv[i * bb:(i + 1) * bb].tobytes() for i in range(got)]

    def load_into(self, keys: Any, buffer: Any,
                  stride: int | None = None) -> int:
        """Load the longest cached prefix of keys into a writable buffer
        (kvcache_load()): block i goes to buffer[i * stride:][:block_bytes]
        (stride: block_bytes by default). The buffer must hold all the
        keys' blocks. Returns the number of blocks loaded; the bytes after
        them are untouched. No copy besides the library's."""
        kb = _keys_arg(keys)
        n = len(kb) // KEY_SIZE
        stride = self._stride(stride)
        pin = self._out_pin(buffer, n, stride)
        try:
            if not n:
                return 0
            with self._enter():
                got = _check(_L().kvcache_load(self._h, kb, n, pin.addr,
                                               stride), "kvcache_load")
        finally:
            pin.release()
        if got > n:
            raise KvcacheError(_errno.EPROTO,
                               f"kvcache_load returned {got} > {n}")
        return got

    def load_map(self, keys: Any) -> MappedBlocks:
        """Load without copying (kvcache_load_map()): pin the longest cached
        prefix of keys in the pool and map it. Returns MappedBlocks, a
        sequence of read-only memoryviews and a context manager that
        releases them (kvcache_release())."""
        c = self.client
        c._reap()
        kb = _keys_arg(keys)
        n = len(kb) // KEY_SIZE
        arr = (_Block * _max(n, 1))()
        # All inside the guards: close() must see the mapping it unmaps.
        with self._enter():
            got = 0
            if n:
                got = _check(_L().kvcache_load_map(self._h, kb, n, arr),
                             "kvcache_load_map")
            if got > n:
                raise KvcacheError(_errno.EPROTO,
                                   f"kvcache_load_map returned {got} > {n}")
            try:
                state = _MapState(c, arr, got)
            except BaseException:
                c._release_blocks(arr, got)
                raise
            if got:
                with c._lock:
                    c._maps.append(state)
        return MappedBlocks(state)

    def load_region(self, keys: Any, region: int, offset: int = 0,
                    stride: int | None = None) -> int:
        """Load the leading blocks of keys that G3 holds straight into a
        registered GPU region (kvcache_load_region()): block i goes to
        offset + i * stride. Returns the number loaded. EOPNOTSUPP in
        memfd mode or without a g3_directory."""
        kb = _keys_arg(keys)
        n = len(kb) // KEY_SIZE
        region = _int(region, "region", 0, _U32_MAX)
        offset = _int(offset, "offset", 0, _U64_MAX)
        stride = (self.block_bytes if stride is None else
                  _int(stride, "stride", self.block_bytes, _U64_MAX))
        if not n:
            return 0
        with self._enter():
            got = _check(_L().kvcache_load_region(self._h, kb, n, region,
                                                  offset, stride),
                         "kvcache_load_region")
        return got

    # -- store ---------------------------------------------------------------

    def _data_pin(self, data: Any, n: int,
                  stride: int | None) -> tuple[_Pin | None, int]:
        """data as a pinned buffer and its stride."""
        bb = self.block_bytes
        if isinstance(data, str):
            raise TypeError("data must be bytes-like or a list of "
                            "bytes-likes, not str")
        if _is_buffer(data):
            stride = self._stride(stride)
            pin = _Pin(data, "data", writable=False)
            need = self._need(n, stride)
            if pin.nbytes < need:
                pin.release()
                raise ValueError(f"data holds {pin.nbytes} bytes; {n} blocks "
                                 f"of {bb} bytes at stride {stride} need "
                                 f"{need}")
            return pin, stride
        if stride is not None:
            raise ValueError("stride applies to one contiguous buffer, not "
                             "to a list of blocks")
        try:
            items = list(data)
        except TypeError:
            raise TypeError("data must be bytes-like or a list of "
                            f"bytes-likes, not {type(data).__name__}") \
                from None
        if len(items) != n:
            raise ValueError(f"data has {len(items)} blocks for {n} keys")
        joined = bytearray(n * bb)
        for i, item in enumerate(items):
            if isinstance(item, str) or not _is_buffer(item):
                raise TypeError(f"data[{i}] must be bytes-like, not "
                                f"{type(item).__name__}")
            with memoryview(item) as mv:
                if not mv.c_contiguous:
                    raise ValueError(f"data[{i}] must be C-contiguous")
                if mv.nbytes != bb:
                    raise ValueError(f"data[{i}] is {mv.nbytes} bytes, not "
                                     f"block_bytes {bb}")
                joined[i * bb:(i + 1) * bb] = mv.cast("B")
        return _Pin(joined, "data", writable=False), bb

    def store(self, keys: Any, data: Any, parent: Any = None,
              stride: int | None = None) -> int:
        """Store blocks that continue a chain (kvcache_store()): keys[0]'s
        parent is parent (None: the chain starts with it), keys[i]'s
        keys[i-1]. data: a list of bytes-likes of block_bytes each, one per
        key, or one buffer with block i at i * stride (stride:
        block_bytes by default). Returns the number of blocks stored, a
        prefix of the keys (the daemon may decline the rest)."""
        kb = _keys_arg(keys)
        n = len(kb) // KEY_SIZE
        par = None if parent is None else _key_arg(parent, "parent")
        pin, stride = self._data_pin(data, n, stride)
        try:
            if not n:
                return 0
            with self._enter():
                got = _check(_L().kvcache_store(self._h, par, kb, n,
                                                pin.addr, stride),
                             "kvcache_store")
        finally:
            pin.release()
        if got > n:
            raise KvcacheError(_errno.EPROTO,
                               f"kvcache_store returned {got} > {n}")
        return got

    # -- asynchronous ------------------------------------------------------

    def load_async(self, keys: Any, buffer: Any, tag: Any = 0,
                   stride: int | None = None) -> None:
        """Queue a load() into buffer (kvcache_load_async()); its
        Completion(tag, result) comes from Client.poll(). The binding keeps
        keys and buffer (and the buffer's export) until then: do not touch
        the buffer before. tag: any object, echoed."""
        kb = _keys_arg(keys)
        n = len(kb) // KEY_SIZE
        stride = self._stride(stride)
        pin = self._out_pin(buffer, n, stride)
        self._submit("kvcache_load_async", tag, [kb, pin],
                     lambda t: _L().kvcache_load_async(self._h, kb, n,
                                                       pin.addr, stride, t))

    def store_async(self, keys: Any, data: Any, tag: Any = 0,
                    parent: Any = None, stride: int | None = None) -> None:
        """Queue a store() (kvcache_store_async()); its Completion(tag,
        result) comes from Client.poll(). data as for store(); the binding
        keeps it until then."""
        kb = _keys_arg(keys)
        n = len(kb) // KEY_SIZE
        par = None if parent is None else _key_arg(parent, "parent")
        pin, stride = self._data_pin(data, n, stride)
        self._submit("kvcache_store_async", tag, [kb, par, pin],
                     lambda t: _L().kvcache_store_async(self._h, par, kb, n,
                                                        pin.addr, stride, t))

    def _submit(self, call: str, tag: Any, refs: list[Any],
                fn: Any) -> None:
        c = self.client
        try:
            with self._enter():
                t = c._queue(self, tag, refs)
                try:
                    ret = fn(t)
                except BaseException:
                    c._unqueue(t)
                    raise
                if ret < 0:
                    c._unqueue(t)
                    _raise(ret, call)
        except BaseException:
            for r in refs:
                if isinstance(r, _Pin):
                    r.release()
            raise


class _Both:
    """Enter a client's guard and a namespace's."""
    __slots__ = ("a", "b")

    def __init__(self, a: _Guard, b: _Guard) -> None:
        self.a, self.b = a, b

    def __enter__(self) -> None:
        self.a.__enter__()
        try:
            self.b.__enter__()
        except BaseException:
            self.a.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: Any) -> None:
        self.b.__exit__(*exc)
        self.a.__exit__(*exc)
