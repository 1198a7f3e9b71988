// JsonReporter — `kf run --json OUT`: writes kf::EvaluationDocument of the verdict to OUT ("-" = stdout),
// indented by 2, atomically (temp file + rename) for a file.
#pragma once

#include <string>

#include "kernelfoundry/record.hpp"

namespace kf::cli {

class JsonReporter final : public EvaluationReporter {
 public:
  /// `path`: the output file, or "-" for stdout.
  explicit JsonReporter(std::string path) : path_(std::move(path)) {}
  /// Writes the document. Throws kf::Error(kNotFound / kIO) when the file cannot be written.
  void ReportVerdict(const Evaluation& ev, const RecordedRun* recorded) override;

 private:
  std::string path_;
};

}  // namespace kf::cli
