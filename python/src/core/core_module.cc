// kernelfoundry.eval_pipeline._core — the C++ core (Task, MemoryFileMap, results, evaluate, stored results)
// as a Python extension. The public modules (kernelfoundry.eval_pipeline.task, .utils.memory_file_map,
// .evaluation, .store, .errors) re-export these classes under the reference's names; there is no second
// implementation in Python.
#include "convert.hpp"
#include "objects.hpp"

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  m.doc() = "KernelFoundry's C++ core behind kernelfoundry.eval_pipeline (see include/kernelfoundry/*.hpp).";
  kfpy::RegisterErrors(m);
  kfpy::RegisterFileMap(m);
  kfpy::RegisterResults(m);
  kfpy::RegisterTask(m);
  kfpy::RegisterEvaluate(m);
  kfpy::RegisterStore(m);
  kfpy::RegisterHelpers(m);
  // Classes report the public module they are documented in (repr, pickle, help()).
  const std::pair<const char*, const char*> homes[] = {
      {"MemoryFileMap", "kernelfoundry.eval_pipeline.utils.memory_file_map"},
      {"ProcessResult", "kernelfoundry.eval_pipeline.task"},
      {"BuildResult", "kernelfoundry.eval_pipeline.task"},
      {"TestResult", "kernelfoundry.eval_pipeline.task"},
      {"Task", "kernelfoundry.eval_pipeline.task"},
      {"DatabaseTask", "kernelfoundry.eval_pipeline.task"},
      {"Evaluation", "kernelfoundry.eval_pipeline.evaluation"},
      {"ResultStore", "kernelfoundry.eval_pipeline.store"},
  };
  for (const auto& [name, module] : homes) m.attr(name).attr("__module__") = module;
}
