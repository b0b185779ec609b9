"""Numba set-up shared by every kernel module: where the JIT cache lives, and toolchain shims.

Nothing here touches a GPU. CUDA is imported only by `numbatok.backends.cuda`, on first use.
"""
import hashlib
import os
import tempfile

import numpy as np


def _source_stamp():
    # Numba invalidates a cached kernel only when its own file changes, not when a helper it
    # inlines from another module does; keying the cache folder by every source file's stat makes
    # any edit (or upgrade) start from a clean cache.
    h = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(_HERE)):
        for f in sorted(files):
            if f.endswith(".py"):
                st = os.stat(os.path.join(dirpath, f))
                h.update(f"{dirpath[len(_HERE):]}/{f}:{st.st_mtime_ns}:{st.st_size};".encode())
    return h.hexdigest()[:16]


def _cache_dir():
    # A user cache folder (never the package folder, which may be read-only), else the temp dir.
    base = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "numbatok")
    for root in (base, os.path.join(tempfile.gettempdir(), "numbatok-cache")):
        path = os.path.join(root, _source_stamp())
        try:
            os.makedirs(path, exist_ok=True)
            if os.access(path, os.W_OK):
                return path
        except OSError:
            continue
    return None


def _numpy_shims():
    # numba-cuda 0.30.x registers an overload for np.row_stack, which numpy 2.5 removed: its first
    # CUDA compile then dies with AttributeError. np.vstack is what row_stack always was.
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack


_HERE = os.path.dirname(os.path.abspath(__file__))
_numpy_shims()

import numba  # noqa: E402
from numba import njit, prange  # noqa: E402
from numba.extending import register_jitable  # noqa: E402


def jitable(fn=None, **options):
    """Marks a helper shared by the CPU drivers and the CUDA kernels.

    Helpers never allocate (they must run in CUDA kernels), so they are compiled without Numba's
    reference counting: with it, every call that passes an array did an atomic incref/decref pair,
    which cost a quarter of the CPU time and made threads contend for the same counters.
    """
    options.setdefault("_nrt", False)
    return register_jitable(**options)(fn) if fn is not None else register_jitable(**options)


def _prefetch():
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def prefetch(typingctx, arr, idx):
        """Starts loading arr[idx] into the CPU cache and goes on (CPU kernels only): lookups in a
        table beyond L2 then overlap instead of stalling one at a time."""
        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]])
            i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                                "llvm.prefetch.p0i8")
            builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])  # read, keep in all levels
            return context.get_dummy_value()
        return types.void(arr, types.int64), codegen
    return prefetch


def _fetch_add():
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def fetch_add(typingctx, arr, idx, val):
        """Atomically adds val to int64 arr[idx] and returns the value before (CPU kernels only): the
        threads of a parallel loop take work from one counter, so none waits at the loop's end while
        another still has a queue of its own."""
        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]])
            return builder.atomic_rmw("add", ptr, args[2], "monotonic")
        return types.int64(arr, types.int64, types.int64), codegen
    return fetch_add


def _ascii_masks():
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def ascii_masks(typingctx, arr, idx):
        """(whitespace, space, letter, digit, \\r or \\n, upper-case letter) of the 64 bytes
        arr[idx:idx + 64] as bit masks, bit i for byte idx + i (CPU kernels only; the caller keeps
        idx + 64 within the array): one vector compare per class, which LLVM turns into the CPU's
        byte compares and mask moves (the classes a caller does not use are never computed)."""
        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]])
            vt = ir.VectorType(ir.IntType(8), 64)
            v = builder.load(builder.bitcast(ptr, vt.as_pointer()), align=1)

            def const(c):
                return ir.Constant(vt, [c] * 64)

            def below(x, n):  # unsigned x < n, per byte
                return builder.icmp_unsigned("<", x, const(n))

            space = builder.icmp_unsigned("==", v, const(32))
            ws = builder.or_(below(builder.sub(v, const(9)), 5), space)  # \t \n \v \f \r and ' ': \s in ASCII
            letter = below(builder.sub(builder.or_(v, const(32)), const(97)), 26)
            digit = below(builder.sub(v, const(48)), 10)
            newline = builder.or_(builder.icmp_unsigned("==", v, const(10)), builder.icmp_unsigned("==", v, const(13)))
            upper = below(builder.sub(v, const(65)), 26)
            i64 = ir.IntType(64)
            masks = [builder.bitcast(m, i64) for m in (ws, space, letter, digit, newline, upper)]
            return context.make_tuple(builder, sig.return_type, masks)
        return types.UniTuple(types.uint64, 6)(arr, types.int64), codegen
    return ascii_masks


def _atomics():
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def compare_swap(typingctx, arr, idx, old, new):
        """Atomically sets uint64 arr[idx] to new if it holds old; True if it did (CPU kernels only)."""
        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]])
            res = builder.cmpxchg(ptr, args[2], args[3], "acq_rel", "monotonic")
            return builder.extract_value(res, 1)
        return types.boolean(arr, types.int64, types.uint64, types.uint64), codegen

    @intrinsic
    def store_release(typingctx, arr, idx, val):
        """uint64 arr[idx] = val, after every store before it (CPU kernels only): a reader that sees
        val sees what was written before."""
        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]])
            builder.store_atomic(args[2], ptr, "release", 8)
            return context.get_dummy_value()
        return types.void(arr, types.int64, types.uint64), codegen

    @intrinsic
    def load_acquire(typingctx, arr, idx):
        """uint64 arr[idx], read before every load after it, and read again each time (a loop that
        waits on it is not folded into one read; CPU kernels only)."""
        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]])
            return builder.load_atomic(ptr, "acquire", 8)
        return types.uint64(arr, types.int64), codegen
    return compare_swap, store_release, load_acquire


def _readonly_view():
    from numba import types
    from numba.core.imputils import impl_ret_borrowed
    from numba.extending import intrinsic

    @intrinsic
    def readonly(typingctx, arr):
        """The same array, typed read-only (CPU kernels only): a kernel that compiled code calls with an
        array it made then runs the one specialization Python's callers load, whose input may be a
        read-only buffer (each extra specialization of the largest kernels compiles for 5-7 s)."""
        if not isinstance(arr, types.Array):
            return None
        rt = arr.copy(readonly=True)

        def codegen(context, builder, sig, args):
            return impl_ret_borrowed(context, builder, sig.return_type, args[0])
        return rt(arr), codegen
    return readonly


def _pointer():
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def pointer(typingctx, addr, dtype):
        """Address `addr` (an int64) as a pointer to values of `dtype`, for `numba.carray` (CPU kernels
        only): the arrays of an address table (`backends.cpu.address_table`)."""
        ty = getattr(dtype, "instance_type", None) or getattr(dtype, "dtype", None)
        if not isinstance(addr, types.Integer) or not isinstance(ty, types.Number):
            return None

        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], context.get_value_type(sig.return_type))
        return types.CPointer(ty)(addr, dtype), codegen
    return pointer


prefetch = _prefetch()
readonly = _readonly_view()
pointer = _pointer()
fetch_add = _fetch_add()
compare_swap, store_release, load_acquire = _atomics()
ascii_masks = _ascii_masks()
CACHE_DIR = _cache_dir()


def cached(decorate):
    """Applies a numba decorator with the cache folder pointed at numbatok's own (then restored, so
    other numba users in the process keep theirs)."""
    saved = numba.config.CACHE_DIR
    numba.config.CACHE_DIR = CACHE_DIR or saved
    try:
        return decorate()
    finally:
        numba.config.CACHE_DIR = saved


def readonly_view(a):
    """a, or a read-only view of it. Kernels take their input arrays read-only, whichever way they were
    made (a bytes object's buffer is read-only, a new array is not): one compiled specialization of
    each kernel, loaded by any earlier call, instead of a second one compiled in the middle of a job."""
    if not a.flags.writeable:
        return a
    v = a.view()
    v.flags.writeable = False
    return v


def cpu_kernel(fn=None, *, parallel=False, nogil=True):
    """njit with the project's defaults (cached, no Python fallback)."""
    def wrap(f):
        return cached(lambda: njit(cache=CACHE_DIR is not None, nogil=nogil, parallel=parallel, boundscheck=False)(f))
    return wrap(fn) if fn is not None else wrap


__all__ = ["jitable", "cpu_kernel", "prange", "njit", "prefetch", "fetch_add", "ascii_masks"]
