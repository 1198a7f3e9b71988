// kernelfoundry._contain (host side): the warm-start zygote's worker takes its client's containment through the
// exec module's own code (src/exec/contain.hpp: ContainLikePeer -> ContainSelf, the function the shepherd's child
// calls before exec), so a warm test process is contained exactly like a cold one. Never on a candidate's path.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <string>
#include <vector>

#include "exec/contain.hpp"
#include "exec/landlock.hpp"
#include "kernelfoundry/error.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_contain, m) {
  m.doc() = "Containment of a warm-start worker by kf's exec module (host side; src/exec/contain.hpp).";
  m.def(
      "contain_like",
      [](int peer, bool isolate, const std::vector<std::string>& writable, bool required) {
        try {
          return kf::exec_internal::ContainLikePeer(static_cast<pid_t>(peer), isolate, writable, required);
        } catch (const kf::Error& e) {
          const int err = e.kind() == kf::ErrorKind::kNotFound ? ESRCH : EPERM;
          PyErr_SetObject(PyExc_OSError, py::make_tuple(err, std::string(e.what())).ptr());
          throw py::error_already_set();
        }
      },
      py::arg("peer"), py::arg("isolate"), py::arg("writable"), py::arg("required"),
      "Contains this process like the running process `peer` (a warm-start client the shepherd started): a new "
      "session, peer's cgroups (checked afterwards) and resource limits, and with `isolate` the runner's Landlock "
      "policy with `writable` directories (no_new_privs set) — kf::exec_internal::ContainSelf, as the shepherd's "
      "child before exec. Returns the isolation description (\"landlock (ABI n)\", \"unavailable: ...\", or \"\" "
      "without `isolate`). Raises OSError naming the step that failed (or Landlock missing while `required`).");
  m.def("landlock_abi", &kf::exec_internal::LandlockAbi,
        "The running kernel's Landlock ABI version (>= 1), or -errno when Landlock is unavailable.");
}
