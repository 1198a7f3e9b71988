// Internal helpers of scoring (not part of the public API): the eval_log post-processing of pytest and
// compiler output (reference spec §4.9), Python's str() of values, and the geometric mean of speedups.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"

namespace kf {

/// Post-processes pytest output for eval_log: starts at the first line containing "task.py::" (whole
/// output when there is none), drops "could not import" skip noise, collapses tensor dumps to
/// "tensor(...)", caps the length at `cap_chars` (head and tail kept, the cut marked), and returns
/// "==== test session starts\n\n" + that text, trailing whitespace removed.
std::string PostprocessPytestOutput(std::string_view output, size_t cap_chars = 16000);

/// Collapses every "tensor(" … matching ")" (across lines) to "tensor(...)".
std::string CollapseTensorDumps(std::string_view text);

/// Post-processes compiler output for eval_log: cut after "ninja: build stopped", `project_dir` shortened
/// to "<project_dir>", long compiler command lines shortened, warnings about files outside the project
/// dropped, include stacks collapsed; at most `head_chars` of text plus up to `error_chars` of the error
/// lines that were cut off.
std::string PostprocessCompilerOutput(std::string_view output, std::string_view project_dir = {},
                                      size_t head_chars = 5000, size_t error_chars = 2000);

/// Python's str() of a JSON value as a list/tuple element: 16, 1.5, 'a', True, None; arrays as [a, b].
std::string PythonRepr(const Json& value);

/// Geometric mean of the values > 0 (others ignored); -1 when there are none. One value is returned as is;
/// otherwise exp(mean(log)). Never NaN.
double GeometricMean(const std::vector<double>& values);

}  // namespace kf
