// JsonReporter (see json_reporter.hpp).
#include "cli/json_reporter.hpp"

#include <cstdio>

#include "cli/load_task.hpp"

namespace kf::cli {

void JsonReporter::ReportVerdict(const Evaluation& ev, const RecordedRun* recorded) {
  std::string text = DumpJson(EvaluationDocument(ev, recorded), 2) + "\n";
  if (path_ == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } else {
    WriteFileAtomic(path_, text);
  }
}

}  // namespace kf::cli
