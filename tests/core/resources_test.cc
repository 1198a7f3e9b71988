// Resource lookup (kernelfoundry/resources.hpp): environment variables first (a wrong one is an error, never
// skipped), then — for this test binary, which runs from the build tree — the build and source trees. The
// install-prefix branch is exercised by the InstallE2E test (tests/install/install_test.sh).
#include "kernelfoundry/resources.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "kernelfoundry/error.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::ExpectError;
using testing::ScopedEnv;
using testing::TempDir;
using testing::WriteFile;

TEST(Resources, InterpreterIsKfPythonElseDebiansPython) {
  {
    ScopedEnv env("KF_PYTHON", "/opt/py/bin/python3.12");
    EXPECT_EQ(TaskPythonInterpreter(), "/opt/py/bin/python3.12");
  }
  ScopedEnv unset("KF_PYTHON", nullptr);
  EXPECT_EQ(TaskPythonInterpreter(), "/usr/bin/python3");
  ScopedEnv empty("KF_PYTHON", "");
  EXPECT_EQ(TaskPythonInterpreter(), "/usr/bin/python3");
}

TEST(Resources, PythonDirFromTheEnvironment) {
  TempDir tmp;
  WriteFile(tmp.path() / "pkg/kernelfoundry/__init__.py", "");
  ScopedEnv env("KF_PYTHON_DIR", (tmp.path() / "pkg").c_str());
  ResourceDir dir = TaskPythonDir();
  EXPECT_EQ(dir.path, fs::canonical(tmp.path() / "pkg"));
  EXPECT_EQ(dir.origin, "KF_PYTHON_DIR");
}

TEST(Resources, AWrongPythonDirVariableIsAnErrorNotSkipped) {
  TempDir tmp;
  ScopedEnv env("KF_PYTHON_DIR", tmp.path().c_str());
  Error e = ExpectError(ErrorKind::kNotFound, [] { TaskPythonDir(); });
  EXPECT_EQ(e.field(), "KF_PYTHON_DIR");
  EXPECT_NE(e.message().find("KF_PYTHON_DIR=" + tmp.path().string()), std::string::npos) << e.what();
  EXPECT_NE(e.message().find((tmp.path() / "kernelfoundry/__init__.py").string()), std::string::npos) << e.what();
}

TEST(Resources, PythonDirOfABuildTreeProgramIsTheBuildOrSourceTree) {
  ScopedEnv env("KF_PYTHON_DIR", nullptr);
  ResourceDir dir = TaskPythonDir();
  EXPECT_TRUE(fs::is_regular_file(dir.path / "kernelfoundry/__init__.py")) << dir.path;
  if (dir.origin == "build tree") {
    EXPECT_EQ(dir.path, fs::canonical(testing::BinaryDir() / "python-task"));
  } else {
    EXPECT_EQ(dir.origin, "source tree");
    EXPECT_EQ(dir.path, fs::canonical(testing::SourceDir() / "python/task"));
  }
}

// The trust split (python/README.md): the task side never holds a host-side module, and a variable pointing the
// task side at the host directory is refused with a message saying which is which.
TEST(Resources, TheTaskSideIsNeverTheHostSide) {
  ScopedEnv unset("KF_PYTHON_DIR", nullptr);
  ScopedEnv unset_host("KF_PYTHON_HOST_DIR", nullptr);
  const ResourceDir task = TaskPythonDir();
  EXPECT_FALSE(fs::exists(task.path / "kernelfoundry/zygote.py")) << task.path;
  EXPECT_FALSE(fs::exists(task.path / "kernelfoundry/eval_pipeline/task.py")) << task.path;
  const ResourceDir host = HostPythonDir();
  EXPECT_EQ(host.origin, "build tree");
  EXPECT_EQ(host.path, fs::canonical(testing::BinaryDir() / "python"));
  EXPECT_NE(host.path, task.path);
  ScopedEnv env("KF_PYTHON_DIR", host.path.c_str());
  Error e = ExpectError(ErrorKind::kNotFound, [] { TaskPythonDir(); });
  EXPECT_EQ(e.field(), "KF_PYTHON_DIR");
  EXPECT_NE(e.message().find("is the host side of the Python package"), std::string::npos) << e.what();
}

TEST(Resources, HostPythonDirFromTheEnvironmentOrAnError) {
  TempDir tmp;
  WriteFile(tmp.path() / "host/kernelfoundry/zygote.py", "");
  {
    ScopedEnv env("KF_PYTHON_HOST_DIR", (tmp.path() / "host").c_str());
    const ResourceDir dir = HostPythonDir();
    EXPECT_EQ(dir.path, fs::canonical(tmp.path() / "host"));
    EXPECT_EQ(dir.origin, "KF_PYTHON_HOST_DIR");
  }
  ScopedEnv env("KF_PYTHON_HOST_DIR", tmp.path().c_str());
  Error e = ExpectError(ErrorKind::kNotFound, [] { HostPythonDir(); });
  EXPECT_EQ(e.field(), "KF_PYTHON_HOST_DIR");
  EXPECT_NE(e.message().find((tmp.path() / "kernelfoundry/zygote.py").string()), std::string::npos) << e.what();
}

TEST(Resources, SdkFromTheSourceTreeHasTheHeaderAndTheTimingLoopSources) {
  ScopedEnv env("KF_SDK_DIR", nullptr);
  TaskSdk sdk = FindTaskSdk();
  EXPECT_EQ(sdk.origin, "source tree");
  EXPECT_EQ(sdk.include_dir, fs::canonical(testing::SourceDir() / "include"));
  EXPECT_TRUE(fs::is_regular_file(sdk.include_dir / "kernelfoundry/sdk/task_sdk.hpp"));
  std::vector<std::string> names;
  for (const fs::path& s : sdk.sources) {
    EXPECT_TRUE(fs::is_regular_file(s)) << s;
    names.push_back(s.lexically_relative(testing::SourceDir() / "src").string());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"measure/measure.cc", "measure/paired.cc", "measure/stats.cc",
                                             "measure/round.cc", "measure/timing_keys.cc", "core/error.cc",
                                             "sdk/task_sdk.cc"}));
#if KF_TASK_SDK_BUILT
  // This build compiled them once (target kf_task_sdk); native builds link that object.
  EXPECT_EQ(sdk.object, testing::BinaryDir() / "sdk/lib/kf_task_sdk.o");
  EXPECT_EQ(sdk.LinkInputs(), sdk.object.string());
#else
  // The sanitizer and fuzz presets build no SDK object: native builds get the sources.
  EXPECT_TRUE(sdk.object.empty()) << sdk.object;
  EXPECT_EQ(sdk.LinkInputs(), sdk.SourceFiles());
#endif
}

TEST(Resources, SdkFromTheEnvironmentAndAnIncompleteOneNamesWhatIsMissing) {
  TempDir tmp;
  const fs::path root = tmp.path() / "sdk";
  WriteFile(root / "include/kernelfoundry/sdk/task_sdk.hpp", "");
  for (const char* s : {"measure/measure.cc", "measure/paired.cc", "measure/stats.cc", "measure/round.cc",
                        "measure/timing_keys.cc"})
    WriteFile(root / "src" / s, "");
  ScopedEnv env("KF_SDK_DIR", root.c_str());
  Error e = ExpectError(ErrorKind::kNotFound, [] { FindTaskSdk(); });
  EXPECT_EQ(e.field(), "KF_SDK_DIR");
  EXPECT_NE(e.message().find("missing src/core/error.cc"), std::string::npos) << e.what();

  WriteFile(root / "src/core/error.cc", "");
  WriteFile(root / "src/sdk/task_sdk.cc", "");
  TaskSdk sdk = FindTaskSdk();
  EXPECT_EQ(sdk.origin, "KF_SDK_DIR");
  EXPECT_EQ(sdk.include_dir, fs::canonical(root) / "include");
  ASSERT_EQ(sdk.sources.size(), 7u);
  EXPECT_EQ(sdk.sources[5], fs::canonical(root) / "src/core/error.cc");
  EXPECT_TRUE(sdk.object.empty());  // no lib/kf_task_sdk.o: the build compiles the sources
  EXPECT_EQ(sdk.LinkInputs(), sdk.SourceFiles());
  EXPECT_EQ(sdk.SourceFiles().find((fs::canonical(root) / "src/measure/measure.cc").string()), 0u);
}

TEST(Resources, TheCompiledSdkObjectIsUsedOnlyWhenNewerThanEverySourceAndHeader) {
  TempDir tmp;
  const fs::path root = tmp.path() / "sdk";
  WriteFile(root / "include/kernelfoundry/sdk/task_sdk.hpp", "");
  WriteFile(root / "include/kernelfoundry/paired.hpp", "");
  for (const char* s : {"measure/measure.cc", "measure/paired.cc", "measure/stats.cc", "measure/round.cc",
                        "measure/timing_keys.cc", "core/error.cc", "sdk/task_sdk.cc"})
    WriteFile(root / "src" / s, "");
  WriteFile(root / "lib/kf_task_sdk.o", "");
  const auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) fs::last_write_time(e.path(), now - std::chrono::hours(1));
  }
  fs::last_write_time(root / "lib/kf_task_sdk.o", now);
  ScopedEnv env("KF_SDK_DIR", root.c_str());
  EXPECT_EQ(FindTaskSdk().object, fs::canonical(root) / "lib/kf_task_sdk.o");
  EXPECT_EQ(FindTaskSdk().LinkInputs(), (fs::canonical(root) / "lib/kf_task_sdk.o").string());
  // A header edited after the object was built: the object may not match it, so the sources are handed out.
  fs::last_write_time(root / "include/kernelfoundry/paired.hpp", now + std::chrono::seconds(5));
  EXPECT_TRUE(FindTaskSdk().object.empty());
  EXPECT_EQ(FindTaskSdk().LinkInputs(), FindTaskSdk().SourceFiles());
  fs::last_write_time(root / "include/kernelfoundry/paired.hpp", now - std::chrono::hours(1));
  fs::last_write_time(root / "src/sdk/task_sdk.cc", now + std::chrono::seconds(5));  // likewise a source
  EXPECT_TRUE(FindTaskSdk().object.empty());
}

TEST(Resources, RunningExecutableIsThisTestBinary) {
  fs::path exe = RunningExecutable();
  EXPECT_EQ(exe.filename(), "kf_core_tests");
  EXPECT_TRUE(fs::is_regular_file(exe));
}

}  // namespace
}  // namespace kf
