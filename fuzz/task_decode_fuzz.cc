// libFuzzer target: arbitrary bytes -> JSON -> Task::Decode -> Encode / HashId.
// Any exception other than kf::Error (and JSON parse failures) is a bug; so is a crash or a sanitizer report.
// Build: CC=clang-14 CXX=clang++-14 cmake -DKF_BUILD_FUZZ=ON ... && ninja task_decode_fuzz
// Run:   ./task_decode_fuzz -max_len=65536 corpus/   (seed corpus: fixtures/golden/*.json "encode" values)
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/task.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kf::Json json;
  try {
    json = kf::ParseJson(std::string_view(reinterpret_cast<const char*>(data), size), "<fuzz>");
  } catch (const kf::Error&) {
    return 0;
  }
  kf::Task task;
  try {
    task = kf::Task::Decode(json);
  } catch (const kf::Error&) {
    return 0;  // rejected cleanly
  }
  // Whatever decodes must encode, hash and decode again — outside the try: any exception here is a bug.
  kf::Json again = task.Encode();
  (void)task.HashId();
  (void)kf::DumpJson(again);
  (void)kf::Task::Decode(again);
  return 0;
}
