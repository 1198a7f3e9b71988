// The Python objects of _core and how they refer to C++ values.
//
// A Python Task owns one kf::Task (shared_ptr). Every other object is a Ref<T>: either it owns its own value
// (made by its constructor, decode, merge, ...) or it is a view of a part of a parent object (task.build_result,
// build_result.result, test_result.trace_results["x"], ...). A view keeps its root alive and finds its part
// again on every access, so it reads and writes the parent in place and can never dangle: when the part was
// removed (e.g. task.build_result = None) the view raises ReferenceError. Assigning an attribute copies the
// assigned value into the parent. All access happens with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/task.hpp"

namespace kfpy {

namespace py = pybind11;

/// Raised (as Python's ReferenceError) when a view's part was removed from its parent.
class ReferenceGone : public py::builtin_exception {
 public:
  using py::builtin_exception::builtin_exception;
  void set_error() const override { PyErr_SetString(PyExc_ReferenceError, what()); }
};

/// A reference to a T owned by a root object (see the file comment).
template <typename T>
class Ref {
 public:
  Ref() = default;
  Ref(std::shared_ptr<void> owner, std::function<T*()> resolve, const char* what)
      : owner_(std::move(owner)), resolve_(std::move(resolve)), what_(what) {}

  /// A Ref that owns `value`.
  static Ref Own(T value, const char* what) {
    auto sp = std::make_shared<T>(std::move(value));
    T* raw = sp.get();
    return Ref(std::move(sp), [raw] { return raw; }, what);
  }

  /// The referenced value; raises ReferenceError when the part was removed from its parent.
  T& operator*() const {
    T* p = resolve_ ? resolve_() : nullptr;
    if (p == nullptr) {
      throw ReferenceGone(std::string("this ") + what_ +
                                " was removed from the object it belonged to (the attribute was set to None)");
    }
    return *p;
  }
  T* operator->() const { return &**this; }
  /// nullptr when the part is gone.
  T* TryGet() const { return resolve_ ? resolve_() : nullptr; }

  /// A view of a part of this value: `select(T&)` returns a pointer to the part or nullptr when absent.
  template <typename C>
  Ref<C> Child(std::function<C*(T&)> select, const char* what) const {
    Ref parent = *this;
    return Ref<C>(owner_, [parent, select = std::move(select)]() -> C* {
      T* p = parent.TryGet();
      return p != nullptr ? select(*p) : nullptr;
    }, what);
  }

 private:
  std::shared_ptr<void> owner_;
  std::function<T*()> resolve_;
  const char* what_ = "object";
};

struct PyFileMap {
  Ref<kf::MemoryFileMap> ref;
};
struct PyProcessResult {
  Ref<kf::ProcessResult> ref;
};
struct PyBuildResult {
  Ref<kf::BuildResult> ref;
};
struct PyTestResult {
  Ref<kf::TestResult> ref;
};
struct PyTask {
  std::shared_ptr<kf::Task> task;
  kf::Task& operator*() const { return *task; }
  kf::Task* operator->() const { return task.get(); }
};

// ---- wrapping parts of a parent ----

/// A view of `parent`'s optional member (None when it is empty).
template <typename Wrapper, typename P, typename C>
py::object MemberView(const Ref<P>& parent, std::optional<C> P::*member, const char* what) {
  if (!((*parent).*member)) return py::none();
  return py::cast(Wrapper{parent.template Child<C>([member](P& p) -> C* {
    auto& o = p.*member;
    return o ? &*o : nullptr;
  }, what)});
}

/// Sets `parent`'s optional member from a Python value of wrapper type W or None (copies the value).
template <typename Wrapper, typename P, typename C>
void SetMember(const Ref<P>& parent, std::optional<C> P::*member, py::handle value, const char* field,
               const char* type_name);

/// Ref of a whole root Task (for building views of its members).
inline Ref<kf::Task> TaskRef(const PyTask& t) {
  kf::Task* raw = t.task.get();
  return Ref<kf::Task>(t.task, [raw] { return raw; }, "Task");
}

/// The value of an optional Python argument of wrapper type W (None -> nullopt). Raises TypeError naming
/// `field` and `type_name` for anything else.
template <typename W>
auto OptionalValue(py::handle obj, const char* field, const char* type_name) -> std::optional<
    std::remove_reference_t<decltype(*std::declval<W>().ref)>> {
  if (obj.is_none()) return std::nullopt;
  if (!py::isinstance<W>(obj)) {
    throw py::type_error(std::string(field) + " must be a " + type_name + " or None, not " +
                         std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  }
  return *obj.cast<const W&>().ref;
}

template <typename Wrapper, typename P, typename C>
void SetMember(const Ref<P>& parent, std::optional<C> P::*member, py::handle value, const char* field,
               const char* type_name) {
  std::optional<C> v = OptionalValue<Wrapper>(value, field, type_name);  // copied before the parent changes
  (*parent).*member = std::move(v);
}

/// Task.create's options: the pytest collector (its cache salt hashes our Python package once per process)
/// and the default discovery cache ($KF_CACHE_DIR, else ~/.cache/kernelfoundry).
const kf::TaskCreateOptions& CreateOptions();

// Registration of the classes (one function per source file).
void RegisterFileMap(py::module_& m);
void RegisterResults(py::module_& m);
void RegisterTask(py::module_& m);
void RegisterEvaluate(py::module_& m);
void RegisterStore(py::module_& m);
void RegisterHelpers(py::module_& m);

/// A repr in dataclass style: "Name(field=repr(value), ...)".
std::string DataclassRepr(const char* name, std::initializer_list<std::pair<const char*, py::object>> fields);

}  // namespace kfpy
