// kernelfoundry._contain (host side): the warm-start zygote's worker takes its client's containment through the
// exec module's own code (src/exec/contain.hpp: ContainLikePeer -> ChildPolicy + ContainSelf, what the shepherd's
// child applies before exec), so a warm test process is contained exactly like a cold one. Never on a candidate's
// path.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <string>

#include "exec/contain.hpp"
#include "exec/landlock.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/process.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_contain, m) {
  m.doc() = "Containment of a warm-start worker by kf's exec module (host side; src/exec/contain.hpp).";
  m.def(
      "contain_like",
      [](int peer, const std::string& request) {
        try {
          kf::ProcessOptions o;
          kf::ParseChildContainmentRequest(kf::ParseJson(request, "containment request"), &o);
          return kf::exec_internal::ContainLikePeer(static_cast<pid_t>(peer), o.filesystem_isolation, o.sandbox);
        } catch (const kf::Error& e) {
          const int err = e.kind() == kf::ErrorKind::kNotFound ? ESRCH : EPERM;
          PyErr_SetObject(PyExc_OSError, py::make_tuple(err, std::string(e.what())).ptr());
          throw py::error_already_set();
        }
      },
      py::arg("peer"), py::arg("request"),
      "Contains this process like the running process `peer` (a warm-start client the shepherd started): a new "
      "session, peer's cgroups (checked afterwards) and resource limits, then what `request` asks for (JSON of "
      "kf::ChildContainmentRequest, registered by kf): the runner's Landlock policy (writable directories, read "
      "allow-list), the sandbox user (which must be peer's) with a /dev/shm and IPC namespace of its own where the "
      "machine allows, no capabilities, no_new_privs and the seccomp filter — "
      "kf::exec_internal::ContainSelf, as the shepherd's child before exec. Must be called single-threaded. Returns "
      "the isolation description (\"landlock (ABI n)\", \"unavailable: ...\", or \"\" without isolation). Raises "
      "OSError naming the step that failed, or why the request is refused.");
  m.def("landlock_abi", &kf::exec_internal::LandlockAbi,
        "The running kernel's Landlock ABI version (>= 1), or -errno when Landlock is unavailable.");
}
