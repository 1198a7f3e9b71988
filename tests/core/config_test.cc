// Config loading: OmegaConf/PyYAML typing, discovery, legacy keys, overrides, interpolation — against the
// reference's answers in probes.json ("get_config", "overrides_via_create") and the fixture goldens.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>

#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Golden;
using testing::SharedDir;

MemoryFileMap FilesOf(const Json& files) {
  MemoryFileMap m;
  for (const auto& [path, text] : files.items()) m.Set(path, text.get<std::string>());
  return m;
}

ErrorKind KindOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no kf::Error thrown";
  return ErrorKind::kInternal;
}

TEST(ConfigProbes, MatchReferenceWhereWeDoNotDiffer) {
  const Json probes = Golden("probes")["get_config"];
  for (const char* name : {"yaml", "yml", "interpolation", "empty_file", "scalar_yaml", "types"}) {
    SCOPED_TRACE(name);
    const Json& probe = probes[name];
    Json got = GetConfig(FilesOf(probe["files"]));
    EXPECT_EQ(got, probe["ok"]);
    EXPECT_EQ(got.dump(), probe["ok"].dump());  // same key order and same number types (1 vs 1.0)
  }
}

TEST(ConfigProbes, BothTopLevelConfigsIsAnErrorNamingBoth) {
  const Json probe = Golden("probes")["get_config"]["both"];
  try {
    GetConfig(FilesOf(probe["files"]));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("config.yaml"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("config.yml"), std::string::npos);
  }
}

// Our fix (B4): nested config.yaml files are ordinary files. The reference raises "Multiple config files"
// for nested_duplicate and reads sub/config.yaml for nested_only.
TEST(ConfigProbes, NestedConfigIsAnOrdinaryFile) {
  const Json probes = Golden("probes")["get_config"];
  EXPECT_TRUE(probes["nested_duplicate"].contains("error"));
  EXPECT_EQ(GetConfig(FilesOf(probes["nested_duplicate"]["files"])), Json::parse(R"({"a": 1})"));
  EXPECT_EQ(KindOf([&] { GetConfig(FilesOf(probes["nested_only"]["files"])); }), ErrorKind::kNotFound);
  EXPECT_EQ(KindOf([&] { GetConfig(FilesOf(probes["none"]["files"])); }), ErrorKind::kNotFound);
}

TEST(ConfigProbes, InvalidYamlNamesFileAndLine) {
  const Json probe = Golden("probes")["get_config"]["invalid_yaml"];
  try {
    GetConfig(FilesOf(probe["files"]));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kParse);
    EXPECT_EQ(e.file(), "config.yaml");
    EXPECT_NE(e.message().find("line "), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(YamlTyping, Yaml11ScalarsLikePyYaml) {
  Json j = ParseYaml(
      "a: yes\nb: Off\nc: 0x1F\nd: 010\ne: 1_000\nf: 1e3\ng: 1:30\nh: .inf\ni: 2024-01-01\nj: ~\nk: 'true'\n"
      "l: !!str 12\nm: -0b101\nn: 1.\no: +12\np: 0\nq: ON\nr: \"01\"\ns: 1.5e-3\nt: .NaN\nu: 12abc\n",
      "t.yaml");
  EXPECT_EQ(j["a"], true);
  EXPECT_EQ(j["b"], false);
  EXPECT_EQ(j["c"], 31);
  EXPECT_EQ(j["d"], 8);
  EXPECT_EQ(j["e"], 1000);
  EXPECT_TRUE(j["f"].is_number_float());
  EXPECT_EQ(j["f"].get<double>(), 1000.0);
  EXPECT_EQ(j["g"], 90);
  EXPECT_TRUE(std::isinf(j["h"].get<double>()));
  EXPECT_EQ(j["i"], "2024-01-01");  // OmegaConf drops the timestamp resolver
  EXPECT_TRUE(j["j"].is_null());
  EXPECT_EQ(j["k"], "true");
  EXPECT_EQ(j["l"], "12");
  EXPECT_EQ(j["m"], -5);
  EXPECT_EQ(j["n"], 1.0);
  EXPECT_TRUE(j["n"].is_number_float());
  EXPECT_EQ(j["o"], 12);
  EXPECT_EQ(j["p"], 0);
  EXPECT_EQ(j["q"], true);
  EXPECT_EQ(j["r"], "01");
  EXPECT_DOUBLE_EQ(j["s"].get<double>(), 1.5e-3);
  EXPECT_TRUE(std::isnan(j["t"].get<double>()));
  EXPECT_EQ(j["u"], "12abc");
}

TEST(YamlTyping, KeyOrderKeptAndDuplicatesRejected) {
  Json j = ParseYaml("z: 1\na: 2\nm: {y: 1, b: 2}\n", "t.yaml");
  EXPECT_EQ(j.dump(), R"({"z":1,"a":2,"m":{"y":1,"b":2}})");
  try {
    ParseYaml("a: 1\nb: 2\na: 3\n", "dup.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kParse);
    EXPECT_EQ(e.file(), "dup.yaml");
    EXPECT_NE(e.message().find("duplicate key 'a'"), std::string::npos) << e.what();
  }
}

// Regression (2026-12-05): `threads:1` (no space) under eval_config was read by yaml-cpp as a key without a value and
// the setting silently lost; PyYAML refuses such a file. Keys with a colon and a value, quoted keys and URL-like
// values stay accepted.
TEST(YamlTyping, AColonWithoutASpaceIsRefusedNamingTheFix) {
  try {
    ParseYaml("eval_config:\n  profile_custom_model: false\n  threads:1\n", "config.yaml");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kParse);
    EXPECT_EQ(e.file(), "config.yaml");
    EXPECT_EQ(e.field(), "eval_config.threads:1");
    EXPECT_NE(e.message().find("line 3"), std::string::npos) << e.what();
    EXPECT_NE(e.message().find("expected 'threads: 1'"), std::string::npos) << e.what();
  }
  const Json ok = ParseYaml("a: 1\n\"b:c\":\nurl: http://x:80/y\nd:e: 2\nempty:\nflow: {f:1}\n", "t.yaml");
  EXPECT_EQ(ok.dump(), R"({"a":1,"b:c":null,"url":"http://x:80/y","d:e":2,"empty":null,"flow":{"f:1":null}})");
  // Where yaml-cpp's own error points elsewhere ("end of map not found", "illegal map value"), the line is named.
  for (const char* text : {"e:\n  p: false\n  threads:1  # fix me\n", "e:\n  p: false\n  \"threads\":1\n",
                           "e:\n  threads:1\n  allocator: glibc\n"}) {
    try {
      ParseYaml(text, "config.yaml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("expected 'threads: 1'; YAML needs a space after the colon"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(ColonValueHint(Json("threads:1")), " (expected 'threads: 1'? YAML needs a space after the colon)");
  EXPECT_EQ(ColonValueHint(Json("a: b")), "");
  EXPECT_EQ(ColonValueHint(Json(5)), "");
}

TEST(YamlTyping, MergeKeysAndAnchors) {
  Json j = ParseYaml("base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n  z: 4\n", "t.yaml");
  EXPECT_EQ(j["derived"].dump(), R"({"x":1,"y":3,"z":4})");
}

TEST(YamlTyping, TopLevelShapes) {
  EXPECT_EQ(LoadConfigText("", "c.yaml"), Json::object());
  EXPECT_EQ(LoadConfigText("# only a comment\n", "c.yaml"), Json::object());
  EXPECT_EQ(KindOf([] { LoadConfigText("- 1\n- 2\n", "c.yaml"); }), ErrorKind::kParse);
  EXPECT_EQ(KindOf([] { LoadConfigText("42\n", "c.yaml"); }), ErrorKind::kParse);
  EXPECT_EQ(KindOf([] { LoadConfigText("a: 1\n---\nb: 2\n", "c.yaml"); }), ErrorKind::kParse);
}

TEST(Interpolation, AbsoluteRelativeEnvAndEscapes) {
  setenv("KF_CONFIG_TEST_VAR", "from_env", 1);
  unsetenv("KF_CONFIG_TEST_UNSET");
  Json j = LoadConfigText(
      "n: 3\nname: relu\nsub:\n  k: ${.sib}\n  sib: 7\n  up: ${..name}\n  list: [a, b]\n"
      "whole: ${n}\ntext: n=${n} ok=${flag}\nflag: true\nenv: ${oc.env:KF_CONFIG_TEST_VAR}\n"
      "env_default: ${oc.env:KF_CONFIG_TEST_UNSET,fallback}\nidx: ${sub.list[1]}\nesc: \\${n}\n",
      "c.yaml");
  EXPECT_EQ(j["sub"]["k"], 7);
  EXPECT_EQ(j["sub"]["up"], "relu");
  EXPECT_EQ(j["whole"], 3);  // a whole-value interpolation keeps the target's type
  EXPECT_EQ(j["text"], "n=3 ok=True");
  EXPECT_EQ(j["env"], "from_env");
  EXPECT_EQ(j["env_default"], "fallback");
  EXPECT_EQ(j["idx"], "b");
  EXPECT_EQ(j["esc"], "${n}");
}

TEST(Interpolation, MissingKeysAndCyclesAreErrors) {
  try {
    LoadConfigText("a: ${nope}\n", "c.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kParse);
    EXPECT_EQ(e.field(), "a");
    EXPECT_NE(e.message().find("nope"), std::string::npos);
  }
  EXPECT_EQ(KindOf([] { LoadConfigText("a: ${b}\nb: ${a}\n", "c.yaml"); }), ErrorKind::kParse);
  EXPECT_EQ(KindOf([] { LoadConfigText("a: ${oc.env:KF_CONFIG_TEST_UNSET}\n", "c.yaml"); }), ErrorKind::kParse);
}

TEST(LegacyKeys, RenamedKeysMoveToTheEndLikeTheGolden) {
  MemoryFileMap files = MemoryFileMap::FromDisk(SharedDir() / "fixtures/tasks/multi_block");
  Json config = GetConfig(files);
  EXPECT_EQ(config.dump(), Golden("multi_block")["config"].dump());
  // When the new key exists the legacy one is left alone.
  Json both = Json::parse(R"({"run_name": "old", "job_name": "new"})");
  RenameLegacyKeys(both);
  EXPECT_EQ(both.dump(), R"({"run_name":"old","job_name":"new"})");
}

TEST(Overrides, TopLevelFileIsReadAndRemoved) {
  MemoryFileMap files = MemoryFileMap::FromDisk(SharedDir() / "fixtures/tasks/multi_block");
  ASSERT_TRUE(files.Contains("overrides.yml"));
  std::optional<Json> overrides = TakeOverrides(files);
  ASSERT_TRUE(overrides);
  EXPECT_EQ(overrides->dump(), Golden("multi_block")["metadata"]["overrides"].dump());
  EXPECT_FALSE(files.Contains("overrides.yml"));
  EXPECT_FALSE(TakeOverrides(files));
}

// Our fix: the reference silently ignores a broken overrides file (probes overrides_via_create.invalid_yaml:
// metadata {}) and both .yml and .yaml (both_yml_and_yaml: metadata {}, one file left in the task).
TEST(Overrides, BrokenOrDuplicatedOverridesAreErrorsNamingTheFile) {
  const Json probes = Golden("probes")["overrides_via_create"];
  EXPECT_EQ(probes["invalid_yaml"]["metadata"], Json::object());
  MemoryFileMap broken;
  broken.Set("overrides.yaml", "a: [1, 2\n");
  try {
    TakeOverrides(broken);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kParse);
    EXPECT_EQ(e.file(), "overrides.yaml");
  }
  MemoryFileMap both;
  both.Set("overrides.yml", "a: 1\n");
  both.Set("overrides.yaml", "a: 2\n");
  try {
    TakeOverrides(both);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overrides.yml"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("overrides.yaml"), std::string::npos);
  }
  EXPECT_TRUE(both.Contains("overrides.yml"));  // nothing removed on error
  MemoryFileMap nested;
  nested.Set("sub/overrides.yml", "a: 3\n");
  EXPECT_FALSE(TakeOverrides(nested));
  EXPECT_TRUE(nested.Contains("sub/overrides.yml"));
}

TEST(MergeConfig, DeepMergeKeepsOrderAndAppendsNewKeys) {
  Json base = Json::parse(R"({"a": 1, "eval": {"x": 1, "y": 2}, "c": [1]})");
  Json over = Json::parse(R"({"eval": {"y": 3, "z": 4}, "c": [2], "d": null})");
  EXPECT_EQ(MergeConfig(base, over).dump(), R"({"a":1,"eval":{"x":1,"y":3,"z":4},"c":[2],"d":null})");
}

TEST(DumpYaml, RoundTripsTypesAndQuotesAmbiguousStrings) {
  Json v = Json::parse(
      R"({"s": "01", "t": "true", "n": "null", "e": "", "i": 3, "f": 1.5, "b": false, "z": null,
          "l": [1, "a"], "m": {"k": "v: x"}, "multi": "a\nb", "empty_map": {}, "empty_list": []})");
  std::string text = DumpYaml(v);
  EXPECT_EQ(ParseYaml(text, "dump.yaml").dump(), v.dump()) << text;
}

}  // namespace
}  // namespace kf
