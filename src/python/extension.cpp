// blockmm._native: the CPython side of the in-process product (in_process.hpp), in the plain C API
// (no binding library to install: Debian 12's packages and pip install ./python offline are
// enough; docs/python.md). The arrays come as buffers (no copy), the output arrays from a Python
// callable once their size is known; the GIL is released while the product computes (taken back
// only to allocate the output); Ctrl-C cancels it (a SIGINT handler chained before Python's, in
// the main thread) and raises KeyboardInterrupt; blockmm's errors become ValueError (bad input,
// a malformed setting), MemoryError (out of memory, a budget too small) or RuntimeError (a GPU,
// anything else), told by their type (python::describe_failure), with blockmm's one-line message.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <signal.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "core/record_layout.hpp"
#include "python/in_process.hpp"

namespace {

using blockmm::python::BsrArrays;

// A buffer held for the call; released (with the GIL held) by its destructor.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer() {
    if (held_) PyBuffer_Release(&view_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  // False with a Python error set where `object` offers no C-contiguous buffer of one of
  // `types` (struct format characters of `itemsize` bytes each).
  bool get(PyObject* object, bool writable, const char* types, Py_ssize_t itemsize, const char* what) {
    if (PyObject_GetBuffer(object, &view_, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) != 0)
      return false;
    const char* format = view_.format != nullptr ? view_.format : "B";
    if (*format == '@' || *format == '=' || *format == '<') ++format;  // native order: this is little-endian
    if (view_.itemsize != itemsize || std::strlen(format) != 1 || std::strchr(types, *format) == nullptr) {
      PyErr_Format(PyExc_TypeError, "%s: a buffer of %zd-byte items '%s' expected, not '%s' of %zd bytes", what, itemsize,
                   types, view_.format != nullptr ? view_.format : "B", view_.itemsize);
      PyBuffer_Release(&view_);
      return false;
    }
    held_ = true;
    return true;
  }
  void* data() const { return view_.buf; }
  Py_ssize_t items() const { return view_.len / view_.itemsize; }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

// An index array of scipy's: int32 or int64.
bool get_index(Buffer& buffer, PyObject* object, bool writable, const char* what, blockmm::python::IndexArray& out) {
  if (!buffer.get(object, writable, "il", 4, what)) {
    PyErr_Clear();
    if (!buffer.get(object, writable, "lq", 8, what)) return false;
    out.wide = true;
  }
  out.data = buffer.data();
  out.size = buffer.items();
  return true;
}

// One operand: (name, n, m, indptr, indices, data), data's blocks m*m uint16 values each.
struct Operand {
  Buffer indptr, indices, data;
  BsrArrays arrays;
  bool parse(PyObject* tuple) {
    PyObject *name = nullptr, *indptr_object = nullptr, *indices_object = nullptr, *data_object = nullptr;
    long long n = 0, m = 0;
    if (!PyArg_ParseTuple(tuple, "ULLOOO", &name, &n, &m, &indptr_object, &indices_object, &data_object)) return false;
    const char* text = PyUnicode_AsUTF8(name);
    if (text == nullptr) return false;
    arrays.name = text;
    arrays.n = n;
    arrays.m = m;
    if (!get_index(indptr, indptr_object, false, "indptr", arrays.indptr) ||
        !get_index(indices, indices_object, false, "indices", arrays.indices) ||
        !data.get(data_object, false, "H", 2, "data"))
      return false;
    arrays.data = static_cast<const std::uint16_t*>(data.data());
    // (The file's checks refuse an m outside [1, 46340]; here it only must not overflow.)
    arrays.data_blocks = m > 0 && m <= blockmm::kMaxSupportedBlockOrder ? data.items() / (m * m) : 0;
    return true;
  }
};

// SIGINT while a product runs in the main thread: the flag its cancellation reads, then Python's
// own handler (which marks the signal for the interpreter, as if blockmm were not there).
std::atomic<bool> interrupted{false};
struct sigaction python_handler;

extern "C" void on_interrupt(int signal_number, siginfo_t* info, void* context) {
  interrupted.store(true, std::memory_order_relaxed);
  if ((python_handler.sa_flags & SA_SIGINFO) != 0) {
    if (python_handler.sa_sigaction != nullptr) python_handler.sa_sigaction(signal_number, info, context);
  } else if (python_handler.sa_handler != SIG_DFL && python_handler.sa_handler != SIG_IGN &&
             python_handler.sa_handler != nullptr) {
    python_handler.sa_handler(signal_number);
  }
}

// Installs on_interrupt for its lifetime, where asked (the caller is the main thread and Python's
// SIGINT handler raises KeyboardInterrupt).
class InterruptHandler {
 public:
  explicit InterruptHandler(bool install) {
    if (!install) return;
    interrupted.store(false);
    struct sigaction ours {};
    ours.sa_sigaction = on_interrupt;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    installed_ = sigaction(SIGINT, &ours, &python_handler) == 0;
  }
  ~InterruptHandler() {
    if (installed_) sigaction(SIGINT, &python_handler, nullptr);
  }
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;
  const std::atomic<bool>* flag() const { return installed_ ? &interrupted : nullptr; }

 private:
  bool installed_ = false;
};

// A Python exception taken out of the interpreter where it was raised (the output's allocation,
// with the GIL held for it), put back once the product has unwound.
struct PythonError {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  void fetch() {
    if (type == nullptr) PyErr_Fetch(&type, &value, &traceback);
  }
  bool restore() {
    if (type == nullptr) return false;
    PyErr_Restore(type, value, traceback);
    type = value = traceback = nullptr;
    return true;
  }
  ~PythonError() {
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
  }
};

// The output: what `allocate(blocks, wide)` returned, (indptr, indices, data), checked against
// the sizes asked for. Called without the GIL: takes it.
struct Output {
  PyObject* allocate = nullptr;
  PyObject* arrays = nullptr;
  Buffer indptr, indices, data;
  PythonError error;
  ~Output() { Py_XDECREF(arrays); }

  blockmm::python::OutputArrays make(std::int64_t blocks, bool wide, std::int64_t block_rows, std::int64_t m) {
    // Once a product: a second call would export the buffers again over those held (never released).
    if (arrays != nullptr) throw blockmm::Error(blockmm::ExitCode::other, "internal error: the output's arrays asked for twice");
    const PyGILState_STATE gil = PyGILState_Ensure();
    const bool made = make_holding_gil(blocks, wide, block_rows, m);
    if (!made) error.fetch();
    PyGILState_Release(gil);
    if (!made) throw blockmm::Error(blockmm::ExitCode::other, "the output's arrays could not be allocated");
    return {indptr.data(), indices.data(), static_cast<std::uint32_t*>(data.data())};
  }

 private:
  bool make_holding_gil(std::int64_t blocks, bool wide, std::int64_t block_rows, std::int64_t m) {
    arrays = PyObject_CallFunction(allocate, "Li", static_cast<long long>(blocks), wide ? 1 : 0);
    if (arrays == nullptr) return false;
    PyObject *indptr_object = nullptr, *indices_object = nullptr, *data_object = nullptr;
    if (!PyArg_ParseTuple(arrays, "OOO", &indptr_object, &indices_object, &data_object)) return false;
    blockmm::python::IndexArray a, b;
    if (!get_index(indptr, indptr_object, true, "indptr", a) || !get_index(indices, indices_object, true, "indices", b) ||
        !data.get(data_object, true, "I", 4, "data"))
      return false;
    if (a.wide != wide || b.wide != wide || a.size != block_rows + 1 || b.size != blocks || data.items() != blocks * m * m) {
      PyErr_SetString(PyExc_ValueError, "allocate: arrays of another size or index type than asked for");
      return false;
    }
    return true;
  }
};

// blockmm's error as a Python exception of its kind, its message as the command line prints it.
void raise_error(const blockmm::python::Failure& failure) {
  using blockmm::python::FailureKind;
  PyObject* const type = failure.kind == FailureKind::value    ? PyExc_ValueError
                         : failure.kind == FailureKind::memory ? PyExc_MemoryError
                                                               : PyExc_RuntimeError;
  PyErr_SetString(type, blockmm::escape_control_characters(failure.message).c_str());
}

std::optional<blockmm::kernels::BackendKind> backend_kind(const char* name) {
  if (std::strcmp(name, "auto") == 0) return std::nullopt;
  return blockmm::kernels::parse_backend_kind(name);
}

// multiply(a, b, allocate, backend, threads, gpus, mem_budget, chunk_bytes, interruptible)
//   -> (indptr, indices, data, backend name, device, seconds by phase)
PyObject* multiply(PyObject* /*module*/, PyObject* args) {
  PyObject *a_tuple = nullptr, *b_tuple = nullptr, *allocate = nullptr;
  const char* backend = nullptr;
  int threads = 0, gpus = 0, interruptible = 0;
  long long mem_budget = 0, chunk_bytes = 0;
  if (!PyArg_ParseTuple(args, "OOOsiiLLp", &a_tuple, &b_tuple, &allocate, &backend, &threads, &gpus, &mem_budget,
                        &chunk_bytes, &interruptible))
    return nullptr;
  Operand a, b;
  if (!a.parse(a_tuple) || !b.parse(b_tuple)) return nullptr;
  Output output;
  output.allocate = allocate;
  blockmm::python::ProductRequest request;
  request.threads = threads;
  request.gpus = gpus;
  request.memory_budget = mem_budget;
  request.chunk_bytes = chunk_bytes;

  std::optional<blockmm::python::Failure> failure;
  blockmm::multiply::Report report;
  {
    const InterruptHandler handler(interruptible != 0);
    const blockmm::python::Cancellation cancellation(handler.flag());
    Py_BEGIN_ALLOW_THREADS
    try {
      request.backend = backend_kind(backend);
      blockmm::python::ArrayInputFile a_file(a.arrays), b_file(b.arrays);
      const std::int64_t block_rows = a.arrays.n / a.arrays.m, m = a.arrays.m;
      report = blockmm::python::multiply_arrays(
          a_file, b_file, request,
          [&](std::int64_t blocks, bool wide) { return output.make(blocks, wide, block_rows, m); }, cancellation);
    } catch (...) {
      failure = blockmm::python::describe_failure(std::current_exception());
    }
    Py_END_ALLOW_THREADS
  }
  // A cancelled product raises KeyboardInterrupt (Python's handler, which the signal reached too,
  // raises it; else it is raised here); a Python error of the allocation is itself.
  if (interrupted.load() && interruptible != 0 && failure) {
    if (PyErr_CheckSignals() == 0) PyErr_SetNone(PyExc_KeyboardInterrupt);
    return nullptr;
  }
  if (output.error.restore()) return nullptr;
  if (failure) {
    raise_error(*failure);
    return nullptr;
  }
  if (PyErr_CheckSignals() != 0) return nullptr;  // Ctrl-C after the last check: the interpreter's
  if (output.arrays == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "internal error: the product ended without its output");
    return nullptr;
  }
  const blockmm::multiply::PhaseTimes& t = report.mine;
  return Py_BuildValue("(OOOss{sdsdsdsdsdsd})", PyTuple_GET_ITEM(output.arrays, 0), PyTuple_GET_ITEM(output.arrays, 1),
                       PyTuple_GET_ITEM(output.arrays, 2), report.backend.c_str(), report.device.c_str(), "read", t.read,
                       "build", t.build, "setup", t.setup, "symbolic", t.symbolic, "numeric", t.numeric, "write", t.write);
}

PyObject* visible_gpus(PyObject* /*module*/, PyObject* /*args*/) {
  int count = 0;
  bool failed = false;
  Py_BEGIN_ALLOW_THREADS
  try {
    count = blockmm::python::visible_gpus();
  } catch (...) {
    failed = true;  // no GPU to use
  }
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(failed ? 0 : count);
}

PyMethodDef methods[] = {
    {"multiply", multiply, METH_VARARGS,
     "multiply(a, b, allocate, backend, threads, gpus, mem_budget, chunk_bytes, interruptible): blockmm.multiply's "
     "core; a and b are (name, n, m, indptr, indices, data uint16), allocate(blocks, wide) returns the output's "
     "(indptr, indices, data uint32)"},
    {"visible_gpus", visible_gpus, METH_NOARGS, "visible_gpus(): the GPUs CUDA sees in this process"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "blockmm's in-process product (blockmm.multiply)", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__native() { return PyModule_Create(&module); }
