#pragma once

// Where the extension gives up the GIL, and how memory owned by Python objects is released.
//
// Rules of the whole extension:
// - Every call that may block (a collective, Work.wait, init, split, destroying a communicator
//   or a gradient synchroniser) runs with the GIL released.
// - cohort's core holds Buffer owners until an op completes and drops them on whichever thread
//   finishes it: the communicator's progress thread, or a thread helping in Work::wait with the
//   GIL released. An owner that is a Python object (a numpy array behind a DLPack capsule, a
//   Py_buffer) needs the GIL to be released, and taking the GIL on such a thread could deadlock
//   against a Python thread that holds it while waiting for that very thread. So those owners are
//   wrapped by release_under_gil(): released at once where the GIL is held, otherwise queued for
//   a Python thread. The core's threads never wait for the GIL.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // the same casters in every translation unit (ODR)

#include <memory>

namespace cohort::python {

/// A handle sharing `owner`'s lifetime whose last release drops `owner` with the GIL held: at
/// once on a thread holding the GIL, otherwise on the interpreter's main thread (a pending call
/// between two bytecodes) or in the next drain_deferred_releases(), whichever comes first.
/// After the interpreter has shut down the owner is leaked (its Python objects are gone).
std::shared_ptr<void> release_under_gil(std::shared_ptr<void> owner);

/// Releases every queued owner. The GIL must be held. Called after blocking calls, so memory
/// an op finished with is returned before control goes back to Python.
void drain_deferred_releases();

/// Runs `fn` without the GIL if this thread holds it (and with nothing changed otherwise), for
/// destructors that wait: the same code runs from Python's deallocation and from other threads.
template <class F>
void without_gil(F&& fn);

/// unique_ptr deleter for bound classes whose destructor waits for collectives in flight.
struct DeleteWithoutGil {
  template <class T>
  void operator()(T* object) const noexcept {
    without_gil([object] { delete object; });
  }
};

template <class F>
void without_gil(F&& fn) {
  if (PyGILState_Check() == 0) {
    fn();
    return;
  }
  struct Restore {
    PyThreadState* state;
    ~Restore() { PyEval_RestoreThread(state); }
  } restore{PyEval_SaveThread()};
  fn();
}

}  // namespace cohort::python
