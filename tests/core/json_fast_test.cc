// The fast JSON paths (json_writer, json_fast, base64 word loops) against the plain ones they replace:
// DumpJson vs nlohmann's dump, EncodeToString vs DumpJson(Encode()), DecodeFromString vs
// Decode(ParseJson()) — on the reference's goldens, on random documents and strings (invalid UTF-8, control
// characters, duplicate keys, odd numbers) and on thousands of mutated encodings (same result or the same
// error). Fixed seeds: every failure reproduces.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/json_writer.hpp"
#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/task.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Golden;

std::string NlohmannDump(const Json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Random bytes biased towards what needs care: quotes, backslashes, control bytes, DEL, valid multi-byte
// sequences, and invalid UTF-8 (lone continuation bytes, truncated sequences, overlongs, surrogates).
std::string RandomText(std::mt19937_64& rng, size_t max_len) {
  static const std::vector<std::string> pieces = {
      "a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\r", "\b", "\f", std::string(1, '\0'), "\x01", "\x1f",
      "\x7f", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\x80", "\xbf", "\xc3", "\xe2\x82", "\xc0\xaf",
      "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "plain ascii run of text ", "{\"k\": [1, 2]}"};
  std::string s;
  const size_t n = rng() % (max_len + 1);
  while (s.size() < n) s += pieces[rng() % pieces.size()];
  return s;
}

Json RandomJson(std::mt19937_64& rng, int depth) {
  const int kind = static_cast<int>(rng() % (depth > 0 ? 10 : 7));
  switch (kind) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int64_t>(rng()) >> (rng() % 64);
    case 3: return static_cast<uint64_t>(rng());
    case 4: {
      const double pool[] = {0.0, -0.0, 1.0, 1e20, 1e-7, 1733000000.123456, -2.5, 3.141592653589793, 1e300};
      return pool[rng() % 9] * ((rng() % 2) != 0u ? 1.0 : static_cast<double>(rng() % 1000) / 7.0);
    }
    case 5:
    case 6: return RandomText(rng, 40);
    case 7:
    case 8: {
      Json obj = Json::object();
      const size_t n = rng() % 5;
      for (size_t i = 0; i < n; ++i) obj[RandomText(rng, 8)] = RandomJson(rng, depth - 1);
      return obj;
    }
    default: {
      Json arr = Json::array();
      const size_t n = rng() % 5;
      for (size_t i = 0; i < n; ++i) arr.push_back(RandomJson(rng, depth - 1));
      return arr;
    }
  }
}

// ---------------------------------------------------------------- writer identity

TEST(JsonWriter, StringsAreEscapedExactlyAsNlohmann) {
  std::mt19937_64 rng(15);
  for (int i = 0; i < 20000; ++i) {
    const std::string s = RandomText(rng, 64);
    ASSERT_EQ(DumpJson(Json(s)), NlohmannDump(Json(s), -1)) << ::testing::PrintToString(s);
  }
  // Every single byte, alone and inside ASCII text.
  for (int b = 0; b < 256; ++b) {
    const std::string s = "ab" + std::string(1, static_cast<char>(b)) + "cdefghijk";
    EXPECT_EQ(DumpJson(Json(s)), NlohmannDump(Json(s), -1)) << b;
  }
}

TEST(JsonWriter, DocumentsAreByteIdenticalInEveryIndent) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) {
    const Json j = RandomJson(rng, 4);
    for (int indent : {-1, 0, 1, 2, 4}) ASSERT_EQ(DumpJson(j, indent), NlohmannDump(j, indent)) << j.dump();
  }
  for (const char* name : {"relu_cpu", "multi_block", "edge_text", "e2e_relu_cpu", "probes", "with_blocks"}) {
    for (int indent : {-1, 2}) EXPECT_EQ(DumpJson(Golden(name), indent), NlohmannDump(Golden(name), indent)) << name;
  }
}

TEST(JsonWriter, StreamingCallsNestLikeNlohmann) {
  std::string out;
  internal::JsonWriter w(&out, 2);
  w.BeginObject();
  w.Key("a");
  w.BeginArray();
  w.Int(-1);
  w.BeginObject();
  w.EndObject();
  w.Base64String("hi");
  w.EndArray();
  w.Key("e");
  w.BeginArray();
  w.EndArray();
  w.EndObject();
  const Json expected = Json::parse(R"({"a": [-1, {}, "aGk="], "e": []})");
  EXPECT_EQ(out, NlohmannDump(expected, 2));
}

// ---------------------------------------------------------------- base64

// The plain definition (RFC 4648 §4), for comparison with the word loops.
std::string SimpleBase64(std::string_view in) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = (uint32_t{static_cast<uint8_t>(in[i])} << 16) |
                       (uint32_t{static_cast<uint8_t>(in[i + 1])} << 8) | static_cast<uint8_t>(in[i + 2]);
    for (int s : {18, 12, 6, 0}) out += a[(v >> s) & 63];
  }
  if (in.size() - i == 1) {
    const uint32_t v = uint32_t{static_cast<uint8_t>(in[i])} << 16;
    out += a[v >> 18];
    out += a[(v >> 12) & 63];
    out += "==";
  } else if (in.size() - i == 2) {
    const uint32_t v = (uint32_t{static_cast<uint8_t>(in[i])} << 16) | (uint32_t{static_cast<uint8_t>(in[i + 1])} << 8);
    out += a[v >> 18];
    out += a[(v >> 12) & 63];
    out += a[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

TEST(Base64Fast, MatchesThePlainDefinitionForEveryLengthAndTail) {
  std::mt19937_64 rng(64);
  for (size_t n = 0; n < 300; ++n) {
    std::string bytes(n, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    const std::string text = SimpleBase64(bytes);
    ASSERT_EQ(Base64Encode(bytes), text) << n;
    ASSERT_EQ(Base64Decode(text), bytes) << n;
    std::string appended = "x";
    Base64Append(appended, bytes);
    ASSERT_EQ(appended, "x" + text);
  }
}

TEST(Base64Fast, ABadCharacterAnywhereIsFoundWithItsQuad) {
  const std::string good = Base64Encode(std::string(300, 'q'));
  for (size_t pos = 0; pos < good.size(); pos += 7) {
    for (char bad : {'!', '=', '\n', '\x80', '-'}) {
      // "xyz=" as the last quad is valid padding (CPython's b64decode accepts it; so do we).
      if (bad == '=' && pos == good.size() - 1) continue;
      std::string text = good;
      text[pos] = bad;
      try {
        Base64Decode(text);
        ADD_FAILURE() << pos << " " << static_cast<int>(bad);
      } catch (const Error& e) {
        EXPECT_NE(e.message().find("near offset " + std::to_string(pos / 4 * 4)), std::string::npos) << e.message();
      }
    }
  }
}

// ---------------------------------------------------------------- typed encoders

void ExpectSameTask(const Task& a, const Task& b) { EXPECT_EQ(a.EncodeToString(2), b.EncodeToString(2)); }

TEST(EncodeToString, GoldenTasksAreByteIdenticalToTheReference) {
  for (const char* name : {"relu_cpu", "multi_block", "slow_or_hang", "edge_text"}) {
    const Json golden = Golden(name)["encode"];
    const Task task = Task::Decode(golden);
    EXPECT_EQ(task.EncodeToString(), golden.dump()) << name;  // key order, modes, mtimes
    for (int indent : {-1, 0, 2, 4}) EXPECT_EQ(task.EncodeToString(indent), DumpJson(task.Encode(), indent)) << name;
    const Task back = Task::DecodeFromString(golden.dump());
    EXPECT_EQ(back.Encode().dump(), golden.dump()) << name;
    ExpectSameTask(back, task);
  }
}

TEST(EncodeToString, ResultsWithArtifactsTracesAndArchs) {
  std::mt19937_64 rng(3);
  BuildResult b;
  b.worker_info = Json{{"hostname", "h"}, {"gpu_name", ""}};
  b.result = ProcessResult::Create(0, "built\n", "warning: \xff bad byte\n", "note", Json{{"x", 1.5}});
  b.artifacts.emplace();
  for (int i = 0; i < 40; ++i) {
    std::string bytes(rng() % 5000, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    b.artifacts->Set("lib/a" + std::to_string(i) + ".so", bytes, FileMeta{0755, 1704067200.25 + i});
  }
  b.artifacts->Set("no_meta.txt", "x", FileMeta{});
  for (int indent : {-1, 2}) EXPECT_EQ(b.EncodeToString(indent), DumpJson(b.Encode(), indent));
  const auto back = BuildResult::DecodeFromString(b.EncodeToString());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, b);
  EXPECT_FALSE(BuildResult::DecodeFromString("null").has_value());

  TestResult t;
  t.correctness_result = ProcessResult::Create(1, "F\n", "", std::nullopt);
  t.trace_results = {{"nsys", *t.correctness_result}, {"ncu", ProcessResult::Create(0, "", "", "m")},
                     {"nsys", ProcessResult::Create(2, "again", "", std::nullopt)}};  // a repeated name: last wins
  TestResult per;
  per.performance_result = ProcessResult::Create(0, "ok", "", std::nullopt, Json{{"runtimes", {1, 2}}});
  t.results_per_gpu = std::vector<std::pair<std::string, TestResult>>{{"a", per}, {"b", TestResult()}};
  for (int indent : {-1, 2}) EXPECT_EQ(t.EncodeToString(indent), DumpJson(t.Encode(), indent));
  EXPECT_EQ(TestResult::DecodeFromString(t.EncodeToString()), TestResult::Decode(t.Encode()));
}

TEST(EncodeToString, BigFileMapRoundTrips) {
  std::mt19937_64 rng(11);
  MemoryFileMap m;
  for (int i = 0; i < 200; ++i) {
    std::string bytes(rng() % 40000, '\0');
    for (char& c : bytes) c = static_cast<char>(i % 2 == 0 ? 'a' + rng() % 26 : rng());
    m.Set("d" + std::to_string(i % 7) + "/f" + std::to_string(i), bytes, FileMeta{0644, 1.7e9 + i / 3.0});
  }
  const std::string text = m.EncodeToString();
  EXPECT_EQ(text, DumpJson(m.Encode()));
  const MemoryFileMap back = MemoryFileMap::DecodeFromString(text);
  EXPECT_EQ(back, m);
  EXPECT_EQ(back.ListFiles(), m.ListFiles());
}

// ---------------------------------------------------------------- decoders: fast == plain

// Outcome of a decode: the encoded text on success, else "error <kind> <file> <field>: <message>".
template <class F>
std::string Outcome(F&& decode) {
  try {
    return decode();
  } catch (const Error& e) {
    return "error " + std::string(ErrorKindName(e.kind())) + " " + e.file() + " " + e.field() + ": " + e.message();
  }
}

std::string SlowTask(const std::string& text) {
  return Outcome([&] { return Task::Decode(ParseJson(text, "t.json")).EncodeToString(); });
}
std::string FastTask(const std::string& text) {
  return Outcome([&] { return Task::DecodeFromString(text, "t.json").EncodeToString(); });
}

// Over kBase64ParallelBytes (contents decoded on several threads) and kHugePageWorthyBytes (huge-page
// buffers): the same map back, and a bad file names itself as the plain path does.
TEST(EncodeToString, FileMapOverTheParallelThresholdRoundTripsAndNamesTheBadFile) {
  std::mt19937_64 rng(12);
  MemoryFileMap m;
  for (int i = 0; i < 300; ++i) {
    std::string bytes(40000 + rng() % 5, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    m.Set("d/f" + std::to_string(i), bytes, FileMeta{0600, 1.7e9 + i});
  }
  std::string text = m.EncodeToString();
  ASSERT_GE(text.size(), kBase64ParallelBytes);
  EXPECT_EQ(text, DumpJson(m.Encode()));
  EXPECT_EQ(MemoryFileMap::DecodeFromString(text), m);
  for (const char* path : {"\"d/f250\"", "\"d/f31\""}) {  // the later file is broken first
    const size_t at = text.find("\"content\":\"", text.find(path)) + 20;
    text[at] = '!';
  }
  const std::string fast = Outcome([&] { return MemoryFileMap::DecodeFromString(text, "m.json").EncodeToString(); });
  const std::string plain = Outcome([&] { return MemoryFileMap::FromJson(ParseJson(text, "m.json")).EncodeToString(); });
  EXPECT_EQ(fast, plain);
  EXPECT_EQ(fast.rfind("error parse d/f31 content: invalid base64: character outside the alphabet near offset", 0), 0u)
      << fast;
}

TEST(DecodeFromString, TrickyTextDecodesAsNlohmannDoes) {
  // Values that land in worker_info keep their exact JSON (number kinds, duplicates, escapes).
  const std::vector<std::string> values = {
      "0", "-0", "1.0", "1e2", "-5", "18446744073709551615", "18446744073709551616", "-9223372036854775809",
      "1e400", "1e-400", "\"\\ud83d\\ude00\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\u0000\"",
      "\"a\\/b\"", "\"\xc3\xa9\"", "\"\xff\"", "\"\x01\"", "{\"a\": 1, \"a\": 2, \"b\": 3}", "[1,]", "01", "NaN",
      "tru", "\"\\x\"", std::string(2000, '[') + std::string(2000, ']')};
  for (const std::string& v : values) {
    const std::string text = "{\"worker_info\": " + v + ", \"correctness_result\": null}";
    const std::string slow = Outcome([&] {
      return DumpJson(TestResult::Decode(ParseJson(text, "r.json"))->worker_info.value_or(Json("none")));
    });
    const std::string fast = Outcome([&] {
      return DumpJson(TestResult::DecodeFromString(text, "r.json")->worker_info.value_or(Json("none")));
    });
    EXPECT_EQ(fast, slow) << v;
  }
  EXPECT_EQ(FastTask("\xef\xbb\xbf{}"), SlowTask("\xef\xbb\xbf{}"));  // a byte order mark
  EXPECT_EQ(FastTask(""), SlowTask(""));
  EXPECT_EQ(FastTask("{} x"), SlowTask("{} x"));
}

TEST(DecodeFromString, MutatedEncodingsGiveTheSameTaskOrTheSameError) {
  // Start from a real encoding with results attached, then mutate it: type swaps, deletions, duplicate
  // keys, bad base64, unsafe paths, truncation. Both paths must agree on every outcome.
  Task task = Task::Decode(Golden("relu_cpu")["encode"]);
  task.build_result = BuildResult{Json{{"hostname", "h"}}, ProcessResult::Create(0, "out", "err", std::nullopt),
                                  MemoryFileMap::FromJson(Golden("multi_block")["encode"]["task_data"])};
  task.test_result = TestResult();
  task.test_result->correctness_result = ProcessResult::Create(0, "5 passed", "", "m", Json{{"k", -1}});
  const std::string base = task.EncodeToString();
  ASSERT_EQ(FastTask(base), SlowTask(base));

  const std::vector<std::pair<std::string, std::string>> swaps = {
      {"\"has_build_step\":true", "\"has_build_step\":1"},
      {"\"has_build_step\":true", "\"has_build_step\":true,\"has_build_step\":false"},
      {"\"returncode\":0", "\"returncode\":-0"},
      {"\"returncode\":0", "\"returncode\":4294967296"},
      {"\"returncode\":0", "\"returncode\":0.0"},
      {"\"returncode\":0", "\"returncode\":0,\"extra\":1"},
      {"\"mode\":420", "\"mode\":-1"},
      {"\"mode\":420", "\"mode\":1e3"},
      {"\"mode\":420", "\"mode\":18446744073709551615"},
      {"\"mtime\":", "\"mtime\":\"x\",\"mtime\":"},
      {"\"content\":\"", "\"content\":\"!"},
      {"\"content\":\"", "\"content\":1,\"content\":\""},
      {"\"task.py\":", "\"../task.py\":"},
      {"\"task.py\":", "\"./task.py\":"},
      {"\"config\":{", "\"config\":[{"},
      {"\"blocks\":{", "\"blocks\":{\"X\":1,"},
      {"\"extract_code_result\":null", "\"extract_code_result\":{}"},
      {"\"extract_code_result\":null", "\"extract_code_result\":0.0"},
      {"\"extract_code_result\":null", "\"extract_code_result\":\"x\""},
      {"\"hyperparameters\":null", "\"hyperparameters\":[]"},
      {"\"test_result_reference\":null", "\"test_result_reference\":{\"results_per_gpu\":{\"a\":null}}"},
      {"\"test_result_reference\":null", "\"test_result_reference\":{\"trace_results\":[]}"},
      {"\"correctness_tests\":[", "\"correctness_tests\":[1,"},
  };
  for (const auto& [from, to] : swaps) {
    const size_t at = base.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    std::string text = base;
    text.replace(at, from.size(), to);
    EXPECT_EQ(FastTask(text), SlowTask(text)) << to;
  }
  std::mt19937_64 rng(99);
  const std::string small = Task::Decode(Golden("multi_block")["encode"]).EncodeToString();
  const char replacements[] = {'"', '\\', ',', ':', '{', '}', '[', ']', '0', '-', 'e', 'x', ' ', '\x01', '\xff'};
  for (int i = 0; i < 3000; ++i) {
    std::string text = small;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = replacements[rng() % sizeof replacements]; break;
        case 1: text.erase(at, 1 + rng() % 8); break;
        default: text.insert(at, 1, replacements[rng() % sizeof replacements]); break;
      }
      if (text.empty()) text = "{";
    }
    ASSERT_EQ(FastTask(text), SlowTask(text)) << i;
  }
}

}  // namespace
}  // namespace kf
