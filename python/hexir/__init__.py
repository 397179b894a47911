"""Hexir from Python: the C API (hexir/hexir.h) through ctypes, numpy only.

    import hexir
    program = hexir.load("mlp.hxe")            # mmap + verify, prepared on the cpu
    print(program.functions)                   # {'main': Function(inputs=[...], outputs=[...])}
    ctx = program.context()                    # one arena; use one per thread
    out = ctx(x=numpy.load("input_x.npy"))     # {'p': array(...)}, runs 'main'
    out = ctx("other_function", a=..., b=...)  # any function by name
    ctx.deadline = 10.0                        # seconds per call (None: no limit)
    ctx.max_loop_iterations = 10**9            # per call (default 2**32; None: no limit)
    ctx.cancel()                               # from another thread: stops the running call
    program.function_for(ids, cache)           # the function whose inputs have these shapes
    gen = ctx.generator(max_new_tokens=64)     # a language model: decode (+ prefill) functions
    tokens = gen.generate(prompt, max_new_tokens=20)   # numpy int64; gen.stats: timings

    hexir.compile("model.onnx", input_shapes={"input": (1, 3, 224, 224)}, output="m.hxe", fuse=False)
                                               # the compiler (libhexir_compile): returns "m.hxe"

No build step: the package loads libhexir_vm.so.0 at import (and
libhexir_compile.so.0 at the first compile): the file $HEXIR_LIBRARY
($HEXIR_COMPILE_LIBRARY) names when set, otherwise the one installed with
the package (pip install ., meson install) or, run from a source checkout,
the one in its build/, otherwise by name as the dynamic loader finds it.
Errors of the C API are raised as hexir.Error, whose message is the
library's and whose .code names the status ('INVALID_ARGUMENT',
'DATA_LOSS', ...).

Inputs (numpy arrays, 0-d included, or anything numpy.asarray takes) are
passed as they are when C-contiguous and of the declared type; otherwise a
converted copy is passed. A context converts by value (cast="checked", the
default): an integer array to any integer type when every value fits
(int64 [1, 2] to i8 or u8), a float array to a narrower float type when no
finite value becomes infinite (float64 to float32); a value that does not fit
raises hexir.Error naming the input and the first offending index. Floats
are never rounded into integers, nor integers made floats: that dtype, or a
wrong shape, is refused by the library, naming the input.
program.context(cast="unsafe") converts any numeric dtype with numpy's
astype instead (integers wrap, floats truncate or overflow to inf) for
callers who have checked their values already.

A donated input (Tensor.donated_to >= 0) is handed over: when the array is
C-contiguous, writeable and of the declared type, the library computes the
result into that very array (the result returned for it is the caller's
array, no copy made), so its old contents are lost; pass array.copy() to keep
them. An input that needs converting is converted into a new array first,
which is then the one handed over. Other results come back as new numpy
arrays the caller owns.

Paths and device names are refused (hexir.Error, INVALID_ARGUMENT) when they
hold a NUL character, which the C API would read as their end; threads must
be an int the C API's int32 holds (the library takes 0..1024).
"""

import ctypes
import glob
import numbers
import operator
import os
from collections import namedtuple

import numpy as np

__all__ = ["Error", "Program", "Context", "Generator", "Function", "Tensor", "load", "compile", "abi_version",
           "version"]

ABI_VERSION = 1

_DTYPES = {0: "float32", 1: "float16", 3: "int32", 4: "int64", 5: "int8", 6: "uint8", 7: "bool"}
_DTYPE_NAMES = {0: "f32", 1: "f16", 2: "bf16", 3: "i32", 4: "i64", 5: "i8", 6: "u8", 7: "bool"}


class Error(Exception):
    """A failed C API call: str(e) is the library's message, e.code its status name."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_uint32),
                ("dims", ctypes.POINTER(ctypes.c_int64)), ("byte_size", ctypes.c_uint64),
                ("donated_to", ctypes.c_int32)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("byte_size", ctypes.c_uint64), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_uint32), ("dims", ctypes.POINTER(ctypes.c_int64))]


class _DeviceOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("threads", ctypes.c_int32), ("ordinal", ctypes.c_int32)]


class _ModuleMemory(ctypes.Structure):
    _fields_ = [("arena_bytes", ctypes.c_uint64), ("lower_bound_bytes", ctypes.c_uint64),
                ("workspace_bytes", ctypes.c_uint64), ("constant_bytes", ctypes.c_uint64),
                ("context_bytes", ctypes.c_uint64)]


class _ModuleHostMemory(ctypes.Structure):
    _fields_ = [("host_arena_bytes", ctypes.c_uint64), ("host_lower_bound_bytes", ctypes.c_uint64),
                ("streamed_constant_bytes", ctypes.c_uint64)]


class _GeneratorOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("decode_function", ctypes.c_char_p),
                ("decode_index", ctypes.c_int64), ("input_ids", ctypes.c_char_p), ("position", ctypes.c_char_p),
                ("logits", ctypes.c_char_p), ("use_prefill", ctypes.c_int32), ("temperature", ctypes.c_float),
                ("top_k", ctypes.c_uint32), ("top_p", ctypes.c_float), ("seed", ctypes.c_uint64),
                ("eos_token", ctypes.c_int64), ("max_new_tokens", ctypes.c_uint32), ("max_positions", ctypes.c_uint64)]


class _GenerationStats(ctypes.Structure):
    _fields_ = [("prompt_tokens", ctypes.c_uint64), ("generated_tokens", ctypes.c_uint64),
                ("prefill_function", ctypes.c_int64), ("prefill_ns", ctypes.c_uint64), ("decode_ns", ctypes.c_uint64),
                ("tokens_per_second", ctypes.c_double), ("token_ns", ctypes.POINTER(ctypes.c_uint64))]


_TokenCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64,
                                  ctypes.POINTER(ctypes.c_float), ctypes.c_size_t)


def _open_library(variable, soname, build_folder):
    """The shared library `soname`: the file $`variable` names when set;
    otherwise the one installed with this package (pip: the wheel's
    .hexir.mesonpy.libs beside the package; meson install: the folder
    _libdir.py names) or, in a source checkout, build/`build_folder`'s; else
    by soname, as the dynamic loader finds it."""
    if os.environ.get(variable):
        candidates = [os.environ[variable]]
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        folders = [os.path.join(here, "..", ".hexir.mesonpy.libs")]
        try:
            from . import _libdir  # written at install; absent in the source tree
            folders.append(os.path.join(here, _libdir.LIBDIR))
        except ImportError:
            folders.append(os.path.join(here, "..", "..", "build", build_folder))
        candidates = []
        for folder in folders:  # a wheel holds the file under its full version (libhexir_vm.so.0.1.0) only
            candidates += [p for p in sorted(glob.glob(os.path.join(glob.escape(folder), soname + "*")))
                           if os.path.isfile(p)][:1]
        candidates.append(soname)
    errors = []
    for candidate in candidates:
        try:
            return ctypes.CDLL(candidate)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("hexir: cannot load %s (set %s to its path): %s" % (soname, variable, "; ".join(errors)))


_lib = _open_library("HEXIR_LIBRARY", "libhexir_vm.so.0", "vm")
_status = ctypes.c_void_p
_P = ctypes.POINTER


def _declare(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_abi_version = _declare("hexir_abi_version", ctypes.c_uint32)
_version_string = _declare("hexir_version_string", ctypes.c_char_p)
_status_code = _declare("hexir_status_code", ctypes.c_int, _status)
_status_message = _declare("hexir_status_message", ctypes.c_char_p, _status)
_status_code_name = _declare("hexir_status_code_name", ctypes.c_char_p, ctypes.c_int)
_status_free = _declare("hexir_status_free", None, _status)
_device_options_init = _declare("hexir_device_options_init", None, _P(_DeviceOptions))
_device_create = _declare("hexir_device_create", _status, ctypes.c_char_p, _P(_DeviceOptions),
                          _P(ctypes.c_void_p))
_device_name = _declare("hexir_device_name", ctypes.c_char_p, ctypes.c_void_p)
_device_release = _declare("hexir_device_release", None, ctypes.c_void_p)
_module_load_file = _declare("hexir_module_load_file", _status, ctypes.c_char_p, ctypes.c_void_p,
                             _P(ctypes.c_void_p))
_module_release = _declare("hexir_module_release", None, ctypes.c_void_p)
_module_name = _declare("hexir_module_name", ctypes.c_char_p, ctypes.c_void_p)
_function_count = _declare("hexir_module_function_count", ctypes.c_size_t, ctypes.c_void_p)
_function_name = _declare("hexir_module_function_name", ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)
_input_count = _declare("hexir_module_input_count", ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)
_output_count = _declare("hexir_module_output_count", ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)
_input_info = _declare("hexir_module_input_info", _status, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                       _P(_TensorInfo))
_output_info = _declare("hexir_module_output_info", _status, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                        _P(_TensorInfo))
_module_memory = _declare("hexir_module_memory", None, ctypes.c_void_p, _P(_ModuleMemory))
_module_host_memory = _declare("hexir_module_host_memory", None, ctypes.c_void_p, _P(_ModuleHostMemory))
_program_prepare = _declare("hexir_program_prepare", _status, ctypes.c_void_p, ctypes.c_void_p,
                            _P(ctypes.c_void_p))
_program_release = _declare("hexir_program_release", None, ctypes.c_void_p)
_context_create = _declare("hexir_context_create", _status, ctypes.c_void_p, _P(ctypes.c_void_p))
_context_release = _declare("hexir_context_release", None, ctypes.c_void_p)
_buffer_allocate = _declare("hexir_buffer_allocate", _status, ctypes.c_void_p, ctypes.c_uint64,
                            _P(ctypes.c_void_p))
_buffer_release = _declare("hexir_buffer_release", None, ctypes.c_void_p)
_buffer_data = _declare("hexir_buffer_data", ctypes.c_void_p, ctypes.c_void_p)
_buffer_write = _declare("hexir_buffer_write", _status, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                         ctypes.c_uint64)
_buffer_read = _declare("hexir_buffer_read", _status, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                        ctypes.c_uint64)
_output_bounded_dim = _declare("hexir_module_output_bounded_dim", ctypes.c_int32, ctypes.c_void_p,
                               ctypes.c_size_t, ctypes.c_size_t)
_output_shape = _declare("hexir_context_output_shape", _status, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                         _P(ctypes.c_int64), ctypes.c_uint32, _P(ctypes.c_uint32))
_context_invoke = _declare("hexir_context_invoke", _status, ctypes.c_void_p, ctypes.c_size_t, _P(_Tensor),
                           ctypes.c_size_t, _P(_Tensor), ctypes.c_size_t)
_context_cancel = _declare("hexir_context_cancel", ctypes.c_int, ctypes.c_void_p)
_program_module = _declare("hexir_program_module", ctypes.c_void_p, ctypes.c_void_p)
_program_prepared_bytes = _declare("hexir_program_prepared_bytes", ctypes.c_uint64, ctypes.c_void_p)
_find_function_for_shapes = _declare("hexir_module_find_function_for_shapes", _status, ctypes.c_void_p,
                                     _P(_Tensor), ctypes.c_size_t, _P(ctypes.c_size_t))
_generator_options_init = _declare("hexir_generator_options_init", None, _P(_GeneratorOptions))
_generator_create = _declare("hexir_generator_create", _status, ctypes.c_void_p, _P(_GeneratorOptions),
                             _P(ctypes.c_void_p))
_generator_release = _declare("hexir_generator_release", None, ctypes.c_void_p)
_generator_generate = _declare("hexir_generator_generate", _status, ctypes.c_void_p, _P(ctypes.c_int64),
                               ctypes.c_size_t, ctypes.c_size_t, _P(ctypes.c_int64), _P(ctypes.c_size_t),
                               _TokenCallback, ctypes.c_void_p)
_generator_set_sampling = _declare("hexir_generator_set_sampling", _status, ctypes.c_void_p, ctypes.c_float,
                                   ctypes.c_uint32, ctypes.c_float, ctypes.c_uint64)
_generator_stats = _declare("hexir_generator_stats", None, ctypes.c_void_p, _P(_GenerationStats))
_generator_vocab_size = _declare("hexir_generator_vocab_size", ctypes.c_size_t, ctypes.c_void_p)
_generator_prefill_function = _declare("hexir_generator_prefill_function", ctypes.c_int64, ctypes.c_void_p,
                                       ctypes.c_size_t)
_context_set_deadline = _declare("hexir_context_set_deadline", _status, ctypes.c_void_p, ctypes.c_uint64)
_context_set_max_loop_iterations = _declare("hexir_context_set_max_loop_iterations", _status, ctypes.c_void_p,
                                            ctypes.c_uint64)

if _abi_version() != ABI_VERSION:
    raise ImportError("hexir: libhexir_vm has ABI %d, this package speaks %d" % (_abi_version(), ABI_VERSION))


def _check(status):
    """Raises the C API's error (and frees its status); nothing for success (NULL)."""
    if status:
        code = _status_code_name(_status_code(status)).decode()
        message = _status_message(status).decode("utf-8", "replace")
        _status_free(status)
        raise Error(code, message)


def abi_version():
    return _abi_version()


def version():
    return _version_string().decode()


# One argument or result: its name, dtype name ('f32'), shape, bytes, and
# (inputs) the output index it is donated to, or -1; (results) the dim whose
# size in `shape` is an upper bound (a bounded dynamic shape, f32[<=300,4]),
# or -1. A call returns such a result at the actual extent it produced.
Tensor = namedtuple("Tensor", ["name", "dtype", "shape", "byte_size", "donated_to", "bounded"],
                    defaults=(-1,))
Function = namedtuple("Function", ["index", "name", "inputs", "outputs"])


def _tensor(info):
    return Tensor(info.name.decode(), _DTYPE_NAMES.get(info.dtype, "?"),
                  tuple(info.dims[i] for i in range(info.rank)), info.byte_size, info.donated_to)


def _numpy_dtype(name, code):
    if code not in _DTYPES:
        raise Error("UNIMPLEMENTED", "hexir: %s is %s, which numpy has no type for" % (name, _DTYPE_NAMES[code]))
    return np.dtype(_DTYPES[code])


_CASTS = ("checked", "unsafe")


def _first(mask):
    """The numpy index of the first True of `mask` (() for a 0-d mask)."""
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def _type_text(sig):
    """'f32[8,128]', as the library writes a type."""
    return "%s[%s]" % (sig.dtype, ",".join(map(str, sig.shape)))


def _index_text(index):
    """'index 3' (1-d), 'index (1, 2)', 'index ()' (0-d): numpy's index of one value."""
    return "index %d" % index[0] if len(index) == 1 else "index %s" % (index,)


def _converted(array, dtype):
    """`array` as `dtype` by value: the converted copy and a mask of the values
    it changed (an integer that does not fit, a finite float that overflowed;
    None when none did), or (None, None) when the dtypes are not converted by
    value (the library refuses them)."""
    integers = array.dtype.kind in "iu" and dtype.kind in "iu"
    floats = array.dtype.kind == "f" and dtype.kind == "f"
    if not integers and not floats:
        return None, None
    if integers:
        out = array.astype(dtype)  # wraps without a warning
    else:
        with np.errstate(over="ignore"):
            out = array.astype(dtype)
    if np.can_cast(array.dtype, dtype, "safe") or array.size == 0:
        return out, None
    if integers:
        info = np.iinfo(dtype)  # min and max as python ints compare exactly
        if info.min <= int(array.min()) and int(array.max()) <= info.max:
            return out, None
        # A round trip gives the value back, with its sign, exactly when it fits.
        return out, (out.astype(array.dtype) != array) | ((out < 0) != (array < 0))
    overflowed = np.isinf(out)
    if not overflowed.any():
        return out, None
    return out, overflowed & np.isfinite(array)


def _argument(value, dtype, sig, fn, cast, donated):
    """The array handed to the library for input `sig` of `fn`: `value` itself
    when it is C-contiguous, aligned and of `dtype` (and writeable when
    donated), otherwise a converted or contiguous copy."""
    array = np.asarray(value)
    if array.dtype != dtype:
        if cast == "unsafe" and array.dtype.kind in "biuf":
            with np.errstate(over="ignore", invalid="ignore"):
                return np.require(array.astype(dtype), requirements="CA")
        converted, changed = _converted(array, dtype)
        if converted is None:
            return np.require(array, requirements="CA")  # the library names the dtype it refuses
        if changed is not None and changed.any():  # inf and nan pass through a float cast
            index = _first(changed)
            raise Error("INVALID_ARGUMENT", "input '%s' of function '%s' (%s): the value %s at %s of the numpy "
                        "%s array %s %s; program.context(cast=\"unsafe\") converts anyway" % (
                            sig.name, fn.name, _type_text(sig), array[index], _index_text(index),
                            array.dtype, "does not fit" if dtype.kind in "iu" else "overflows", sig.dtype))
        array = converted
    flags = array.flags
    if flags.c_contiguous and flags.aligned and (flags.writeable or not donated):
        return array
    return np.require(array, requirements="CAW" if donated else "CA")


def _c_string(name, value):
    """`value` (bytes) for a char* of the C API, which would end it at a NUL."""
    if b"\0" in value:
        raise Error("INVALID_ARGUMENT", "%s %r holds a NUL character at offset %d" % (name, value, value.index(b"\0")))
    return value


def _c_int32(name, value):
    """`value` for an int32_t of the C API, which ctypes would silently wrap."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not -2**31 <= value < 2**31:
        raise Error("INVALID_ARGUMENT", "%s=%r is not an int32 (the library takes 0..1024)" % (name, value))
    return int(value)


class Program:
    """A loaded, verified module prepared on a device. Made by hexir.load."""

    def __init__(self, path, device="cpu", threads=0):
        self._program = None
        self._device = None
        path_bytes, device_bytes = _c_string("path", os.fsencode(path)), _c_string("device", device.encode())
        options = _DeviceOptions()
        _device_options_init(ctypes.byref(options))
        options.threads = _c_int32("threads", threads)
        dev = ctypes.c_void_p()
        _check(_device_create(device_bytes, ctypes.byref(options), ctypes.byref(dev)))
        self._device = dev  # kept for the device buffers of contexts that stage arguments
        module = ctypes.c_void_p()
        _check(_module_load_file(path_bytes, None, ctypes.byref(module)))
        try:
            self.name = _module_name(module).decode()
            self.functions, self._codes = self._reflect(module)
            memory = _ModuleMemory()
            _module_memory(module, ctypes.byref(memory))
            self.memory = {f: getattr(memory, f) for f, _ in _ModuleMemory._fields_}
            host = _ModuleHostMemory()
            _module_host_memory(module, ctypes.byref(host))
            self.memory.update({f: getattr(host, f) for f, _ in _ModuleHostMemory._fields_})
            program = ctypes.c_void_p()
            _check(_program_prepare(module, dev, ctypes.byref(program)))
            self._program = program
            self.device = _device_name(dev).decode()
            # What kernels derived from the constants at prepare (the cpu's packed weights), once per weight.
            self.memory["prepared_bytes"] = _program_prepared_bytes(program)
        finally:
            _module_release(module)  # the program keeps what it needs

    @staticmethod
    def _reflect(module):
        functions, codes = {}, {}
        for f in range(_function_count(module)):
            info = _TensorInfo()
            inputs, outputs = [], []
            for i in range(_input_count(module, f)):
                _check(_input_info(module, f, i, ctypes.byref(info)))
                inputs.append((_tensor(info), info.dtype))
            for i in range(_output_count(module, f)):
                _check(_output_info(module, f, i, ctypes.byref(info)))
                outputs.append((_tensor(info)._replace(bounded=_output_bounded_dim(module, f, i)), info.dtype))
            name = _function_name(module, f).decode()
            functions[name] = Function(f, name, [t for t, _ in inputs], [t for t, _ in outputs])
            codes[name] = ([c for _, c in inputs], [c for _, c in outputs])
        return functions, codes

    def function_for(self, *inputs):
        """The Function whose inputs have the dtypes and shapes of `inputs`, by
        position (numpy arrays, or anything with .dtype and .shape: a Tensor
        of program.functions too). hexir.Error NOT_FOUND (none fits) or
        INVALID_ARGUMENT (several do), naming the shapes asked and listing
        every function's signature."""
        codes = {name: code for code, name in _DTYPE_NAMES.items()}
        args = (_Tensor * max(len(inputs), 1))()
        keep = []
        for i, value in enumerate(inputs):
            dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
            if dtype is None or shape is None:
                value = np.asarray(value)
                dtype, shape = value.dtype, value.shape
            code = codes.get(dtype) if isinstance(dtype, str) else next(
                (c for c, n in _DTYPES.items() if np.dtype(n) == np.dtype(dtype)), None)
            if code is None:
                raise Error("INVALID_ARGUMENT", "function_for: input %d has dtype %s, which no function takes" %
                            (i, dtype))
            dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            keep.append(dims)
            args[i] = _Tensor(None, 0, code, len(shape), dims)
        index = ctypes.c_size_t()
        _check(_find_function_for_shapes(_program_module(self._program), args, len(inputs), ctypes.byref(index)))
        return next(f for f in self.functions.values() if f.index == index.value)

    def context(self, staged=None, cast="checked"):
        """A new context (its own arena): not thread-safe, make one per thread.
        staged (default: on for every device but the cpu): arguments go
        through device buffers of the context (hexir_buffer_*), allocated at
        the first call of each function and reused. cast: how inputs of
        another dtype are converted, "checked" (by value, refusing one that
        does not fit) or "unsafe" (numpy's astype); see the module's doc."""
        return Context(self, staged, cast)

    def __del__(self):
        if getattr(self, "_program", None):
            _program_release(self._program)
            self._program = None
        if getattr(self, "_device", None):
            _device_release(self._device)
            self._device = None

    def __repr__(self):
        return "hexir.Program(%r on %s, functions %s)" % (self.name, self.device, list(self.functions))


class Context:
    """ctx(**inputs) runs the module's only function (or 'main');
    ctx("name", **inputs) any function. Returns {output name: numpy array}.

    One thread at a time: a call made while another thread's call runs on
    the same context raises hexir.Error with code 'FAILED_PRECONDITION'
    (make one context per thread). The bounds on a call may be set from any
    thread and apply from the next call on: ctx.deadline (seconds, None: no
    limit; past it a call raises 'DEADLINE_EXCEEDED' at its next loop
    iteration or branch, checked against a clock of a few milliseconds'
    resolution) and ctx.max_loop_iterations (DEFAULT_MAX_LOOP_ITERATIONS,
    2**32, like hexir-run: a file's loop whose trip count is data cannot run
    for ever; None: no limit; past it 'RESOURCE_EXHAUSTED'). ctx.cancel()
    from another thread stops the running call ('CANCELLED')."""

    _UINT64_MAX = 2**64 - 1
    DEFAULT_MAX_LOOP_ITERATIONS = 2**32

    def __init__(self, program, staged=None, cast="checked"):
        self._context = None
        self._buffers = {}
        if cast not in _CASTS:
            raise Error("INVALID_ARGUMENT", "cast=%r: a context casts %s" % (cast, " or ".join(map(repr, _CASTS))))
        self._deadline = None
        self._max_loop_iterations = None
        self.program = program
        self.staged = program.device != "cpu" if staged is None else bool(staged)
        self.cast = cast
        context = ctypes.c_void_p()
        _check(_context_create(program._program, ctypes.byref(context)))
        self._context = context
        self.max_loop_iterations = self.DEFAULT_MAX_LOOP_ITERATIONS

    def cancel(self):
        """Asks the call running on this context (in another thread) to stop:
        it raises hexir.Error with code 'CANCELLED' at its next loop iteration
        or branch, or returns normally if it finishes first. Returns whether
        a call was running; with none, nothing happens and the next call runs
        normally (set a deadline to bound a call that has not started yet)."""
        return bool(_context_cancel(self._context))

    @property
    def deadline(self):
        """Seconds each call may run, from its start; None: no limit."""
        return self._deadline

    @deadline.setter
    def deadline(self, seconds):
        self.set_deadline(seconds)

    def set_deadline(self, seconds):
        """ctx.deadline = seconds (None or 0: no limit)."""
        if seconds is None or seconds == 0:
            nanoseconds, seconds = 0, None
        else:
            try:
                value = float(seconds)
            except (TypeError, ValueError):
                value = float("nan")
            if not value > 0:
                raise Error("INVALID_ARGUMENT", "deadline is %r: seconds > 0, or None for no limit" % (seconds,))
            if value == float("inf"):
                nanoseconds, seconds = 0, None
            else:  # at least 1 ns (0 is no limit); past 2^64 ns (584 years): the most there is
                nanoseconds = min(max(int(value * 1e9), 1), self._UINT64_MAX)
        _check(_context_set_deadline(self._context, nanoseconds))
        self._deadline = seconds

    @property
    def max_loop_iterations(self):
        """Loop iterations each call may run, all loops together; None: no limit."""
        return self._max_loop_iterations

    @max_loop_iterations.setter
    def max_loop_iterations(self, limit):
        count = -1
        if limit is None:
            count = 0
        elif not isinstance(limit, bool):
            try:
                count = operator.index(limit)  # ints, numpy integers; not floats
            except TypeError:
                pass
        if not 0 <= count <= self._UINT64_MAX:
            raise Error("INVALID_ARGUMENT", "max_loop_iterations is %r: an int from 1 to 2**64 - 1, or None for "
                        "no limit" % (limit,))
        _check(_context_set_max_loop_iterations(self._context, count))
        self._max_loop_iterations = count or None

    def _function(self, name):
        functions = self.program.functions
        if name is None:
            if len(functions) == 1:
                return next(iter(functions.values()))
            name = "main"
        if name not in functions:
            raise Error("NOT_FOUND", "no function '%s' (the module has %s)" %
                        (name, ", ".join("'%s'" % f for f in functions) or "none"))
        return functions[name]

    def __call__(self, function=None, **inputs):
        fn = self._function(function)
        in_codes, out_codes = self.program._codes[fn.name]
        names = [t.name for t in fn.inputs]
        unknown = [k for k in inputs if k not in names]
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise Error("INVALID_ARGUMENT", "function '%s' takes %s; %s" % (
                fn.name, ", ".join(names) or "no inputs",
                "; ".join(x for x in ["no input named " + ", ".join(unknown) if unknown else "",
                                      "missing " + ", ".join(missing) if missing else ""] if x)))
        keep = []  # dims alive until the call returns
        arrays = []
        args = (_Tensor * max(len(names), 1))()
        for i, (sig, code) in enumerate(zip(fn.inputs, in_codes)):
            dtype = _numpy_dtype("input '%s'" % sig.name, code)
            array = _argument(inputs[sig.name], dtype, sig, fn, self.cast, sig.donated_to >= 0)
            if array.dtype != dtype:
                got_code = next((c for c, n in _DTYPES.items() if np.dtype(n) == array.dtype), -1)
            else:
                got_code = code
            if got_code < 0:
                raise Error("INVALID_ARGUMENT", "input '%s' of function '%s' expects %s, got numpy %s" % (
                    sig.name, fn.name, _type_text(sig), array.dtype))
            dims = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
            keep.append(dims)
            arrays.append(array)
            args[i] = _Tensor(array.ctypes.data, array.nbytes, got_code, array.ndim, dims)
        results = []
        outs = (_Tensor * max(len(fn.outputs), 1))()
        for j, (sig, code) in enumerate(zip(fn.outputs, out_codes)):
            donated = [i for i, s in enumerate(fn.inputs) if s.donated_to == j]
            if donated:  # the result is computed in the donated input's array (handed over above)
                result = arrays[donated[0]]
            else:
                result = np.empty(sig.shape, dtype=_numpy_dtype("output '%s'" % sig.name, code))
            dims = (ctypes.c_int64 * max(len(sig.shape), 1))(*sig.shape)
            keep.append(dims)
            results.append(result)
            outs[j] = _Tensor(result.ctypes.data, result.nbytes, code, len(sig.shape), dims)
        if self.staged:
            self._stage(fn, arrays, args, outs)
        _check(_context_invoke(self._context, fn.index, args, len(names), outs, len(fn.outputs)))
        if self.staged:
            for j, result in enumerate(results):
                if outs[j].data in self._staged_at:
                    _check(_buffer_read(self._staged_at[outs[j].data], 0, result.ctypes.data, result.nbytes))
        for j, sig in enumerate(fn.outputs):
            if sig.bounded >= 0:  # its elements lie row-major at the actual shape, from the start
                dims, rank = (ctypes.c_int64 * max(len(sig.shape), 1))(), ctypes.c_uint32()
                _check(_output_shape(self._context, fn.index, j, dims, len(sig.shape), ctypes.byref(rank)))
                shape = tuple(dims[i] for i in range(rank.value))
                results[j] = results[j].reshape(-1)[:int(np.prod(shape))].reshape(shape)
        return {sig.name or str(j): r for j, (sig, r) in enumerate(zip(fn.outputs, results))}

    def generator(self, decode="decode", input_ids="input_ids", position="pos", logits="logits", prefill=True,
                  temperature=0.0, top_k=0, top_p=1.0, seed=0, eos_token=None, max_new_tokens=256,
                  max_positions=0):
        """A generation runner on this context (hexir_generator_create): the
        decode function (a name or an index) with its donated caches and the
        prefill functions, its buffers allocated once. See Generator."""
        return Generator(self, decode, input_ids, position, logits, prefill, temperature, top_k, top_p, seed,
                         eos_token, max_new_tokens, max_positions)

    def _buffer(self, key, size):
        buffer = self._buffers.get(key)
        if buffer is None:
            buffer = ctypes.c_void_p()
            _check(_buffer_allocate(self.program._device, size, ctypes.byref(buffer)))
            self._buffers[key] = buffer
        return buffer

    def _stage(self, fn, arrays, args, outs):
        """Points the arguments at device buffers holding the inputs. An
        argument of the wrong size or dtype stays on the host: the library
        refuses it by its type before reading any byte."""
        self._staged_at = {}
        for i, (sig, array) in enumerate(zip(fn.inputs, arrays)):
            if array.nbytes != sig.byte_size or args[i].dtype != self.program._codes[fn.name][0][i]:
                continue
            buffer = self._buffer((fn.index, "in", i), sig.byte_size)
            _check(_buffer_write(buffer, 0, array.ctypes.data, array.nbytes))
            args[i].data = _buffer_data(buffer)
            self._staged_at[args[i].data] = buffer
        for j, sig in enumerate(fn.outputs):
            donated = [i for i, s in enumerate(fn.inputs) if s.donated_to == j]
            if donated:
                outs[j].data = args[donated[0]].data
            else:
                buffer = self._buffer((fn.index, "out", j), sig.byte_size)
                outs[j].data = _buffer_data(buffer)
                self._staged_at[outs[j].data] = buffer

    def __del__(self):
        if getattr(self, "_context", None):
            _context_release(self._context)
            self._context = None
        for buffer in getattr(self, "_buffers", {}).values():
            _buffer_release(buffer)
        self._buffers = {}


class Generator:
    """A language model decoding in place (docs/embedding.md; made by
    context.generator(...)). The decode function takes the token ids
    ('input_ids', i64[1,1]), optionally the position ('pos', i64[] or [1])
    and its caches (every donated input, fed back from the output it is
    donated to), and returns the logits ('logits', [1,1,V] or [1,V]); every
    other function with an 'input_ids' input is a prefill, used when it takes
    the prompt's length ([1,L]). The caches and buffers are allocated once,
    here; each generate() zeroes the caches, runs the prompt and one decode
    step per token with no allocation and no copy of a cache.

    gen.generate(prompt, max_new_tokens=None, on_token=None) returns the
    tokens (numpy int64); on_token(index, token, logits) is called after each
    (logits: a float32 copy), returning False stops. gen.stats: the last
    generation's prompt_tokens, generated_tokens, prefill_function (a name, or
    None: token by token), prefill_ns, decode_ns, tokens_per_second and
    token_ns (a numpy array, [0] the prefill's). Sampling: temperature 0 is
    greedy; otherwise top_k / top_p from `seed`, restarted at each generate()
    (gen.set_sampling(...) changes it)."""

    def __init__(self, context, decode="decode", input_ids="input_ids", position="pos", logits="logits",
                 prefill=True, temperature=0.0, top_k=0, top_p=1.0, seed=0, eos_token=None, max_new_tokens=256,
                 max_positions=0):
        self._generator = None
        self.context = context
        options = _GeneratorOptions()
        _generator_options_init(ctypes.byref(options))
        keep = []

        def name(what, value):
            encoded = _c_string(what, value.encode())
            keep.append(encoded)
            return encoded
        if isinstance(decode, numbers.Integral) and not isinstance(decode, bool):
            options.decode_index = int(decode)
        else:
            options.decode_function = name("decode", decode)
        options.input_ids = name("input_ids", input_ids)
        options.position = name("position", position)
        options.logits = name("logits", logits)
        options.use_prefill = 1 if prefill else 0
        options.temperature, options.top_k, options.top_p, options.seed = temperature, top_k, top_p, seed
        options.eos_token = -1 if eos_token is None else eos_token
        options.max_new_tokens, options.max_positions = max_new_tokens, max_positions
        self.max_new_tokens = max_new_tokens
        generator = ctypes.c_void_p()
        _check(_generator_create(context._context, ctypes.byref(options), ctypes.byref(generator)))
        self._generator = generator
        self.vocab_size = _generator_vocab_size(generator)
        self._tokens = np.empty(max(max_new_tokens, 1), dtype=np.int64)  # reused by every generate()

    def prefill_function(self, length):
        """The name of the function a prompt of `length` tokens runs through in one invoke, or None."""
        index = _generator_prefill_function(self._generator, length)
        return None if index < 0 else next(f.name for f in self.context.program.functions.values()
                                           if f.index == index)

    def set_sampling(self, temperature=0.0, top_k=0, top_p=1.0, seed=0):
        _check(_generator_set_sampling(self._generator, temperature, top_k, top_p, seed))

    def generate(self, prompt, max_new_tokens=None, on_token=None):
        prompt = np.asarray(prompt)
        if prompt.size and prompt.dtype.kind not in "iu":
            raise Error("INVALID_ARGUMENT", "generate: the prompt is numpy %s, not token ids (integers)" % prompt.dtype)
        prompt = np.ascontiguousarray(prompt.reshape(-1), dtype=np.int64)
        count = ctypes.c_size_t()
        wanted = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        callback = _TokenCallback()
        if on_token is not None:
            def trampoline(_, index, token, logits, vocab):
                values = np.ctypeslib.as_array(logits, shape=(vocab,)).copy()
                return 0 if on_token(index, token, values) is False else 1
            callback = _TokenCallback(trampoline)
        _check(_generator_generate(self._generator, prompt.ctypes.data_as(_P(ctypes.c_int64)), prompt.size,
                                   wanted, self._tokens.ctypes.data_as(_P(ctypes.c_int64)), ctypes.byref(count),
                                   callback, None))
        return self._tokens[:count.value].copy()

    @property
    def stats(self):
        s = _GenerationStats()
        _generator_stats(self._generator, ctypes.byref(s))
        names = {f.index: f.name for f in self.context.program.functions.values()}
        n = s.generated_tokens
        return {"prompt_tokens": s.prompt_tokens, "generated_tokens": n,
                "prefill_function": names.get(s.prefill_function) if s.prefill_function >= 0 else None,
                "prefill_ns": s.prefill_ns, "decode_ns": s.decode_ns, "tokens_per_second": s.tokens_per_second,
                "token_ns": np.ctypeslib.as_array(s.token_ns, shape=(n,)).copy() if n else np.zeros(0, np.uint64)}

    def __del__(self):
        if getattr(self, "_generator", None):
            _generator_release(self._generator)
            self._generator = None


def load(path, device="cpu", threads=0):
    """Maps and verifies the .hxe at `path` and prepares it on `device`
    ('cpu', 'cuda', 'cuda:1', ...); `threads` for the cpu (0: one per core)."""
    return Program(path, device, threads)


_compiler = {}  # libhexir_compile's hexir_compile, loaded at the first compile()


def _compile_function():
    if not _compiler:
        library = _open_library("HEXIR_COMPILE_LIBRARY", "libhexir_compile.so.0", "compiler/capi")
        f = library.hexir_compile
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_char_p, ctypes.c_char_p, _P(ctypes.c_char_p), ctypes.c_size_t, ctypes.c_char_p,
                      ctypes.c_size_t]
        _compiler["hexir_compile"] = f
    return _compiler["hexir_compile"]


def _compile_option(name, value):
    """hexir-compile's option(s) for one keyword: True --name, False --no-name
    (in_place=False: --no-in-place), a dict one --name=KEY=VALUE per item, a
    list or tuple one --name=VALUE per element, anything else --name=VALUE."""
    flag = "--" + name.replace("_", "-")
    if value is True:
        return [flag]
    if value is False:
        return ["--no-" + name.replace("_", "-")]
    if isinstance(value, dict):
        return ["%s=%s=%s" % (flag, k, v) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return ["%s=%s" % (flag, v) for v in value]
    return ["%s=%s" % (flag, value)]


def compile(source, output=None, input_shapes=None, load=False, device="cpu", threads=0, **options):
    """Compiles `source` (.hxir text, or an .onnx model by its extension)
    into `output` (default: the source's path with .hxe) with libhexir_compile,
    which parses hexir-compile's options (docs/tools.md) with the tool's own
    code. `input_shapes` fixes ONNX inputs' dims ({"input": (1, 3, 224, 224)},
    --input-shape); every other keyword is one of the tool's options, named
    with underscores: plan="naive", align=256, fuse=False (--no-fuse),
    in_place=False, views=False, channels_last=False, data_checksum=True,
    weights="int8", compress="zstd", memory_budget={"device": "64MiB"},
    bind={"n": 3}, donate=["past.*=present.*"], ... Returns the output's path,
    or with load=True the Program loaded from it on `device` (`threads`).
    A failure raises hexir.Error with the compiler's message: a wrong option
    INVALID_ARGUMENT, a wrong source naming its file, line and column."""
    source = os.fspath(source)
    output = os.fspath(output) if output is not None else os.path.splitext(source)[0] + ".hxe"
    arguments = ["--input-shape=%s=%s" % (name, "x".join(str(int(d)) for d in dims))
                 for name, dims in (input_shapes or {}).items()]
    for name, value in options.items():
        arguments += _compile_option(name, value)
    encoded = [_c_string("option", a.encode()) for a in arguments]
    array = (ctypes.c_char_p * max(len(encoded), 1))(*encoded)
    message = ctypes.create_string_buffer(4096)
    code = _compile_function()(_c_string("source", os.fsencode(source)), _c_string("output", os.fsencode(output)),
                               array, len(encoded), message, len(message))
    if code:
        raise Error(_status_code_name(code).decode(), message.value.decode("utf-8", "replace"))
    return Program(output, device, threads) if load else output
