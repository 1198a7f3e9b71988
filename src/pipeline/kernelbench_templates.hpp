// Text templates of the KernelBench importer (kernelbench_templates.cc). Placeholders are written
// {{NAME}} and filled by SubstituteTemplate.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace kf::kernelbench {

/// Python script run by IntrospectKernelBenchProblem: argv[1] = folder holding problem.py; prints one line
/// "KF_INTROSPECTION_JSON {…}" on stdout.
extern const std::string_view kIntrospectScript;
/// Prefix of the introspection script's result line.
extern const std::string_view kIntrospectMarker;
/// kernel.cpp, task.py, config.yaml and conftest.py templates.
extern const std::string_view kKernelCpp;
extern const std::string_view kTaskPy;
extern const std::string_view kConfigYaml;
extern const std::string_view kConftestPy;

/// Replaces every {{KEY}} of `text` by values.at(KEY). Throws kf::Error(kInternal) for a placeholder
/// without a value.
std::string SubstituteTemplate(std::string_view text, const std::map<std::string, std::string>& values);

}  // namespace kf::kernelbench
