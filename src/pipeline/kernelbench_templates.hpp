// Text templates of the KernelBench importer: the files of src/pipeline/kernelbench/templates/, embedded at
// build time (CMakeLists.txt, cmake/embed_files.cmake). Placeholders are written {{NAME}} and filled by
// SubstituteTemplate (kernelbench_templates.cc).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace kf::kernelbench {

/// templates/introspect.py, run by IntrospectKernelBenchProblem: argv[1] = folder holding problem.py; prints
/// one line "KF_INTROSPECTION_JSON {…}" on stdout.
extern const std::string_view kIntrospectScript;
/// Prefix of the introspection script's result line.
extern const std::string_view kIntrospectMarker;
/// templates/kernel.cpp, task.py, config.yaml, conftest.py (and kSidesPy): the files of a generated task package.
extern const std::string_view kKernelCpp;
extern const std::string_view kTaskPy;
extern const std::string_view kConfigYaml;
extern const std::string_view kConftestPy;
/// sides.py: the reference and candidate factories run in executor processes (kernelfoundry.executor).
extern const std::string_view kSidesPy;

/// Replaces every {{KEY}} of `text` by values.at(KEY). Throws kf::Error(kInternal) for a placeholder
/// without a value.
std::string SubstituteTemplate(std::string_view text, const std::map<std::string, std::string>& values);

}  // namespace kf::kernelbench
