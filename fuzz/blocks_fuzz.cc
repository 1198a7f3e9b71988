// libFuzzer target: block parsing/replacement, terminal-escape stripping and lossy UTF-8 decoding.
//
// Properties checked (abort on violation):
//  * ParseBlocks either returns or throws kf::Error — never crashes — for every key;
//  * on success, UpdateBlock with each block's own content succeeds and re-parses to the same blocks;
//  * DecodeUtf8Replace yields valid UTF-8 and is the identity on valid input;
//  * StripTerminalEscapes leaves no ESC byte, keeps valid UTF-8 valid and is idempotent.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/terminal.hpp"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

void FuzzBlocks(const std::string& text) {
  for (const char* key : kf::kBlockKeys) {
    std::vector<std::string> blocks;
    try {
      blocks = kf::ParseBlocks(text, key, "f.cpp");
    } catch (const kf::Error&) {
      continue;
    }
    kf::MemoryFileMap files;
    files.Set("f.cpp", text);
    for (size_t i = 0; i < blocks.size(); ++i) kf::UpdateBlock(files, key, "f.cpp", blocks[i], i);
    Check(kf::ParseBlocks(*files.Get("f.cpp"), key, "f.cpp") == blocks);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);

  FuzzBlocks(bytes);

  const std::string decoded = kf::DecodeUtf8Replace(bytes);
  Check(kf::IsValidUtf8(decoded));
  Check(kf::IsValidUtf8(bytes) == (decoded == bytes));
  Check(kf::DescribeUtf8Error(bytes).empty() == kf::IsValidUtf8(bytes));

  const std::string stripped = kf::StripTerminalEscapes(decoded);
  Check(stripped.find('\x1b') == std::string::npos);
  Check(kf::IsValidUtf8(stripped));
  Check(kf::StripTerminalEscapes(stripped) == stripped);
  Check(kf::StripTerminalEscapes(bytes).find('\x1b') == std::string::npos);
  return 0;
}
