// Task::WithBlocks against fixtures/golden/with_blocks.json (the reference's with_blocks on relu_cpu,
// multi_block and edge_text), plus our fixes: B11 ({path: [None]} is the None path), B12 (deep copies),
// CRLF files keep their line endings, unclosed blocks fail.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/task.hpp"
#include "task_fixtures.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using namespace kf::testing;

const Json& Cases() {
  static const Json cases = Golden("with_blocks");
  return cases;
}

// The parent task of a case: the fixture's golden encoding, plus the reference results the golden's
// "keep_reference" cases carried over.
Task Parent(const std::string& fixture, const Json& with_reference_from = nullptr) {
  Task t = Task::Decode(Golden(fixture)["encode"]);
  if (!with_reference_from.is_null()) {
    t.build_result_reference = BuildResult::Decode(with_reference_from["build_result_reference"]);
    t.test_result_reference = TestResult::Decode(with_reference_from["test_result_reference"]);
  }
  return t;
}

// Compares a with_blocks result with the golden case: encode (rewritten files' mtimes are "now" in both,
// so mtimes are compared only for untouched files), blocks, blocks_to_str, rewritten texts and modes.
void ExpectCase(const Task& parent, const Task& got, const Json& c) {
  const Json ours = got.Encode();
  ExpectEncodeEq(ours, c["encode"], /*drop_mtime=*/true);
  for (const auto& [path, entry] : c["encode"]["task_data"].items()) {
    if (c["rewritten_files_text"].contains(path)) {
      EXPECT_GT(ours["task_data"][path]["mtime"].get<double>(), kFixtureMtime) << path;
    } else {
      EXPECT_EQ(ours["task_data"][path]["mtime"], entry["mtime"]) << path;
    }
  }
  EXPECT_EQ(BlocksToJson(got.blocks).dump(), c["blocks"].dump());
  for (const auto& [key, text] : c["blocks_to_str"].items())
    EXPECT_EQ(BlocksToStr(got.blocks.at(key)), text.get<std::string>());
  for (const auto& [path, text] : c["rewritten_files_text"].items()) {
    EXPECT_EQ(*got.task_data.Get(path), text.get<std::string>()) << path;
    EXPECT_EQ(got.task_data.Meta(path)->mode, c["rewritten_files_modes"][path].get<uint32_t>());
    EXPECT_NE(*parent.task_data.Get(path), *got.task_data.Get(path)) << "parent changed: " << path;
  }
  std::vector<std::string> files = got.task_data.ListFiles();
  std::sort(files.begin(), files.end());
  std::vector<std::string> golden_files = c["task_data_files"].get<std::vector<std::string>>();
  std::sort(golden_files.begin(), golden_files.end());
  EXPECT_EQ(files, golden_files);
}

Task Apply(const Task& parent, const Json& c) {
  return parent.WithBlocks(BlockUpdateFromJson(c["blocks_arg"], "blocks_arg"),
                           c["keep_test_result_reference"].get<bool>());
}

class WithBlocksGolden : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(WithBlocksGolden, MatchesReference) {
  const auto& [name, fixture] = GetParam();
  const Json& c = Cases()[name];
  ASSERT_EQ(c["result"], "ok");
  const Task parent = Parent(fixture, c["keep_test_result_reference"].get<bool>() ? c : Json(nullptr));
  const std::string parent_json = parent.Encode().dump();
  const Task got = Apply(parent, c);
  ExpectCase(parent, got, c);
  EXPECT_EQ(parent.Encode().dump(), parent_json) << "with_blocks modified its receiver";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, WithBlocksGolden,
    ::testing::Values(std::pair{"relu_string_evolve", "relu_cpu"},
                      std::pair{"relu_string_evolve_keep_reference", "relu_cpu"},
                      std::pair{"relu_string_user_instructions", "relu_cpu"},
                      std::pair{"multi_block_dict", "multi_block"},
                      std::pair{"multi_block_dict_partial_first_only", "multi_block"},
                      std::pair{"empty_string_content", "relu_cpu"}),
    [](const auto& param_info) { return param_info.param.first; });

// The None failure path: an empty file map, the old blocks, the reference's extract_code_result.
TEST(WithBlocksNone, MatchesReferenceExactly) {
  for (const auto& [name, fixture] : {std::pair{"none_top_level", "relu_cpu"},
                                      std::pair{"none_top_level_keep_reference", "relu_cpu"},
                                      std::pair{"none_per_path", "multi_block"}}) {
    SCOPED_TRACE(name);
    const Json& c = Cases()[name];
    const Task parent = Parent(fixture, c["keep_test_result_reference"].get<bool>() ? c : Json(nullptr));
    const Task got = Apply(parent, c);
    EXPECT_EQ(got.Encode().dump(), c["encode"].dump());
    EXPECT_FALSE(got.Problems().empty());
  }
}

// B11: the reference crashes with AttributeError on {path: [None]}; we take the None failure path.
TEST(WithBlocksNone, NoneInsideTheListIsTheNonePath) {
  const Json& c = Cases()["multi_block_list_with_none"];
  EXPECT_EQ(c["result"]["type"], "AttributeError");
  const Task got = Apply(Parent("multi_block"), c);
  EXPECT_EQ(got.Encode().dump(), Cases()["none_per_path"]["encode"].dump());
}

TEST(WithBlocksErrors, LikeTheReference) {
  const Task relu = Parent("relu_cpu");
  const Task multi = Parent("multi_block");
  auto error_of = [](const Task& t, const Json& c) -> Error {
    try {
      Apply(t, c);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "no error for " << c["blocks_arg"].dump();
    return Error(ErrorKind::kInternal, "none");
  };
  Error missing = error_of(relu, Cases()["relu_missing_key"]);
  EXPECT_EQ(missing.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(missing.field(), "NOT_A_KEY");

  const Json& rejected = Cases()["multi_block_string_rejected"];
  Error multiple = error_of(multi, rejected);
  EXPECT_EQ(multiple.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(multiple.what()).find(rejected["result"]["message"].get<std::string>()), std::string::npos)
      << multiple.what();

  const Json& too_many = Cases()["multi_block_too_many_contents"];
  Error index = error_of(multi, too_many);
  EXPECT_EQ(index.kind(), ErrorKind::kNotFound);
  EXPECT_NE(std::string(index.what()).find(too_many["result"]["message"].get<std::string>()), std::string::npos)
      << index.what();

  // The reference creates bad_blocks_unclosed and fails here; decoding its encoding gives us that task.
  const Json& unclosed = Cases()["unclosed_string"];
  Error open = error_of(Parent("bad_blocks_unclosed"), unclosed);
  EXPECT_EQ(open.kind(), ErrorKind::kParse);
  EXPECT_EQ(open.file(), "kernel.cpp");
}

// Ours keeps the CRLF line endings of the file (the reference rewrites it with LF); everything else, the
// extracted blocks included, matches the golden.
TEST(WithBlocksCrlf, KeepsTheFilesLineEndings) {
  const Json& c = Cases()["edge_text_crlf_string"];
  const Task parent = Parent("edge_text");
  const Task got = Apply(parent, c);
  std::string expected = c["rewritten_files_text"]["kernel.cpp"].get<std::string>();
  std::string crlf;
  for (char ch : expected) crlf += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
  EXPECT_EQ(*got.task_data.Get("kernel.cpp"), crlf);
  Json ours = got.Encode();
  Json golden = c["encode"];
  ours["task_data"].erase("kernel.cpp");
  golden["task_data"].erase("kernel.cpp");
  ExpectEncodeEq(ours, golden, /*drop_mtime=*/true);
}

TEST(WithBlocks, IdentityUpdateKeepsEveryByte) {
  const Task parent = Parent("relu_cpu");
  BlockUpdateShort update;
  update["EVOLVE"] = parent.blocks.at("EVOLVE").at("relu_kernel.cpp").at(0);
  const Task got = parent.WithBlocks(update);
  for (const auto& [path, same] : Cases()["identity_update_bytes_equal"].items()) {
    EXPECT_TRUE(same.get<bool>());
    EXPECT_EQ(*got.task_data.Get(path), *parent.task_data.Get(path)) << path;
  }
}

// B12: children never share bytes with their parent; const WithBlocks is safe from many threads.
TEST(WithBlocks, ConcurrentCandidatesFromOneParent) {
  const Task parent = Parent("multi_block");
  const std::string parent_json = parent.Encode().dump();
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        BlockUpdateFull update;
        std::map<std::string, std::optional<std::vector<BlockContent>>> per_path;
        const std::string body = "def stage_a(x):\n    return x * " + std::to_string(t * 100 + i) + "\n";
        per_path["kernel_a.py"] = std::vector<BlockContent>{body};
        update["EVOLVE"] = per_path;
        Task child = parent.WithBlocks(update);
        if (child.blocks.at("EVOLVE").at("kernel_a.py").at(0) == body) ++ok[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int n : ok) EXPECT_EQ(n, 25);
  EXPECT_EQ(parent.Encode().dump(), parent_json);
}

TEST(BlockUpdateFromJson, ShapesAndErrors) {
  BlockUpdate s = BlockUpdateFromJson(Json::parse(R"({"EVOLVE": "x", "REFERENCE": null})"), "u.json");
  ASSERT_TRUE(std::holds_alternative<BlockUpdateShort>(s));
  EXPECT_FALSE(std::get<BlockUpdateShort>(s).at("REFERENCE"));
  BlockUpdate f = BlockUpdateFromJson(Json::parse(R"({"EVOLVE": {"a.py": "x", "b.py": ["y", null]}})"), "u.json");
  ASSERT_TRUE(std::holds_alternative<BlockUpdateFull>(f));
  EXPECT_EQ(std::get<BlockUpdateFull>(f).at("EVOLVE")->at("a.py")->size(), 1u);
  for (const char* bad : {R"([1])", R"({"EVOLVE": 3})", R"({"EVOLVE": "x", "REFERENCE": {"a": ["y"]}})",
                          R"({"EVOLVE": {"a.py": [1]}})", R"({"EVOLVE": {"a.py": {"x": 1}}})"}) {
    try {
      BlockUpdateFromJson(Json::parse(bad), "u.json");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << bad;
      EXPECT_EQ(e.file(), "u.json");
    }
  }
}

}  // namespace
}  // namespace kf
