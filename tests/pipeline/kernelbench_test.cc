// `kf import-kernelbench` (kernelbench.hpp) on the real KernelBench problems in shared/kernelbench: size
// rewriting, task names, package rendering, the CLI, and (tests named *Slow*, minutes) every problem imported
// and validated, plus `kf run` end to end on 19_ReLU and 23_Softmax with the OpenMP candidates of
// examples/candidates/kernelbench and with the generated starting point.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/kernelbench.hpp"
#include "pipeline_util.hpp"
#include "store/sql_helpers.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::RunShell;
using testing::TempDir;

fs::path Problem(const std::string& rel) { return testing::SharedDir() / "kernelbench" / rel; }

std::string Q(const fs::path& p) { return "'" + p.string() + "'"; }

bool Has(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// --set arguments shrinking every integer size above 16 to 16 (floats and small ints such as reduce_dim kept).
std::string SmallSets(const fs::path& problem) {
  std::string args;
  for (const KernelBenchSize& s : ListKernelBenchSizes(ReadFile(problem))) {
    if (Has(s.expression, ".")) continue;
    bool plain = s.expression.find_first_not_of("0123456789") == std::string::npos;
    if (plain && std::stoll(s.expression) <= 16) continue;
    args += " --set " + s.name + "=16";
  }
  return args;
}

TEST(KernelBenchSizes, ListsTopLevelConstantAssignmentsOfRealProblems) {
  std::vector<KernelBenchSize> relu = ListKernelBenchSizes(ReadFile(Problem("level1/19_ReLU.py")));
  ASSERT_EQ(relu.size(), 2u);
  EXPECT_EQ(relu[0].name, "batch_size");
  EXPECT_EQ(relu[0].expression, "4096");
  EXPECT_EQ(relu[1].name, "dim");
  EXPECT_EQ(relu[1].expression, "393216");
  std::vector<KernelBenchSize> matvec = ListKernelBenchSizes(ReadFile(Problem("level1/4_Matrix_vector_multiplication_.py")));
  ASSERT_EQ(matvec.size(), 2u);
  EXPECT_EQ(matvec[0].name, "M");
  EXPECT_EQ(matvec[0].expression, "256 * 8");  // comment "# 2048" dropped
  std::vector<KernelBenchSize> gemm = ListKernelBenchSizes(ReadFile(Problem("level2/12_Gemm_Multiply_LeakyReLU.py")));
  ASSERT_EQ(gemm.size(), 5u);
  EXPECT_EQ(gemm[3].name, "multiplier");
  EXPECT_EQ(gemm[3].expression, "2.0");
}

TEST(KernelBenchSizes, RewritesOnlyTopLevelNumericLines) {
  std::string src = "import torch\nclass Model:\n    dim = 5\nbatch_size = 4096\nN = 2048 * 2  # big\n"
                    "name = 'x'\nflag == 3\n";
  std::string out = ApplyKernelBenchSizes(src, {{"batch_size", "8"}, {"N", "2.5"}}, "p.py");
  EXPECT_EQ(out, "import torch\nclass Model:\n    dim = 5\nbatch_size = 8  # kf import-kernelbench --set (was: 4096)\n"
                 "N = 2.5  # kf import-kernelbench --set (was: 2048 * 2)\nname = 'x'\nflag == 3\n");
  EXPECT_EQ(ApplyKernelBenchSizes(src, {}, "p.py"), src);
}

TEST(KernelBenchSizes, UnknownNameOrNonNumericValueIsAnErrorNamingIt) {
  std::string src = ReadFile(Problem("level1/19_ReLU.py"));
  try {
    ApplyKernelBenchSizes(src, {{"batch", "8"}}, "19_ReLU.py");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.field(), "--set batch");
    EXPECT_EQ(e.file(), "19_ReLU.py");
    EXPECT_TRUE(Has(e.message(), "unknown size 'batch'")) << e.message();
    EXPECT_TRUE(Has(e.message(), "settable: batch_size, dim")) << e.message();
  }
  for (const char* bad : {"abc", "", "0x10", "inf", "nan", "1e", "8;import os", "2*3"}) {
    try {
      ApplyKernelBenchSizes(src, {{"dim", bad}}, "19_ReLU.py");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), "--set dim");
      EXPECT_TRUE(Has(e.message(), "is not an integer or floating-point number")) << e.message();
    }
  }
  EXPECT_THROW(ApplyKernelBenchSizes(src, {{"dim", "8"}, {"dim", "9"}}, "19_ReLU.py"), Error);
  // Indented (class-level) assignments are not sizes.
  EXPECT_THROW(ApplyKernelBenchSizes("class A:\n    dim = 5\n", {{"dim", "8"}}, "p.py"), Error);
  EXPECT_NO_THROW(ApplyKernelBenchSizes(src, {{"dim", "-3"}, {"batch_size", "1.5e2"}}, "19_ReLU.py"));
}

TEST(KernelBenchNames, TaskNameFromLevelFolderAndStem) {
  EXPECT_EQ(KernelBenchTaskName(Problem("level1/19_ReLU.py")), "kb_l1_19_relu");
  EXPECT_EQ(KernelBenchTaskName(Problem("level1/26_GELU_.py")), "kb_l1_26_gelu");
  EXPECT_EQ(KernelBenchTaskName(Problem("level2/12_Gemm_Multiply_LeakyReLU.py")), "kb_l2_12_gemm_multiply_leakyrelu");
  EXPECT_EQ(KernelBenchTaskName("/tmp/x/My Problem.py"), "kb_my_problem");
}

KernelBenchPackageSpec GemmSpec() {
  KernelBenchPackageSpec spec;
  spec.task_name = "kb_l2_12_gemm_multiply_leakyrelu";
  spec.problem_file = "level2/12_Gemm_Multiply_LeakyReLU.py";
  spec.problem_source = ReadFile(Problem(spec.problem_file));
  spec.introspection = Json::parse(R"({
    "inputs": [{"kind": "tensor", "shape": [4, 8], "dtype": "float32"}],
    "state": [{"name": "gemm.weight", "shape": [8, 8], "dtype": "float32"},
              {"name": "gemm.bias", "shape": [8], "dtype": "float32"}],
    "init_inputs": [{"kind": "int", "value": 8}, {"kind": "int", "value": 8}, {"kind": "float", "value": 2.0},
                    {"kind": "float", "value": 0.1}],
    "forward_params": ["x"], "init_params": ["in_features", "out_features", "multiplier", "negative_slope"]})");
  return spec;
}

TEST(KernelBenchRender, Level2PackageFollowsTheCallingConvention) {
  std::map<std::string, std::string> files = RenderKernelBenchPackage(GemmSpec());
  ASSERT_EQ(files.size(), 6u);
  const std::string& k = files["kernel.cpp"];
  EXPECT_TRUE(Has(k, "#include <torch/extension.h>")) << k;
  EXPECT_TRUE(Has(k, "torch::Tensor forward(torch::Tensor x, torch::Tensor gemm_weight, torch::Tensor gemm_bias, "
                     "int64_t in_features, int64_t out_features, double multiplier, double negative_slope)"))
      << k;
  EXPECT_TRUE(Has(k, "state[\"gemm.weight\"] = gemm_weight;")) << k;
  EXPECT_TRUE(Has(k, "ProblemModel(in_features, out_features, multiplier, negative_slope)")) << k;
  EXPECT_TRUE(Has(k, "m.def(\"forward\", &forward")) << k;
  EXPECT_LT(k.find("// [EVOLVE_START]"), k.find("torch::Tensor forward("));
  EXPECT_LT(k.find("torch::Tensor forward("), k.find("// [EVOLVE_END]"));
  const std::string& p = files["problem.py"];
  EXPECT_LT(p.find("# [REFERENCE_START]\n"), p.find("class Model"));
  EXPECT_TRUE(p.size() > 18 && p.substr(p.size() - 18) == "# [REFERENCE_END]\n") << p;
  // Quoted: a --name such as `null` or `no` stays a string (stranger test, 2026-12-07).
  EXPECT_TRUE(Has(files["config.yaml"], "task_name: \"kb_l2_12_gemm_multiply_leakyrelu\"\n"));
  EXPECT_TRUE(Has(files["config.yaml"], "task_origin: KernelBench\n"));
  // The candidate runs in an executor process built from sides.py; task.py never imports it.
  EXPECT_TRUE(Has(files["sides.py"], "def candidate():")) << files["sides.py"];
  EXPECT_TRUE(Has(files["sides.py"], "def reference():")) << files["sides.py"];
  EXPECT_TRUE(Has(files["task.py"], "Executor(\"sides:reference\" if use_reference else \"sides:candidate\""))
      << files["task.py"];
  EXPECT_FALSE(Has(files["task.py"], "import_module(EXTENSION_NAME)")) << files["task.py"];
  EXPECT_TRUE(Has(files["config.yaml"], "gpu_arch: cpu\n"));
  EXPECT_TRUE(Has(files["task.py"], "#   forward(torch::Tensor x, torch::Tensor gemm_weight,")) << files["task.py"];
  EXPECT_TRUE(Has(files["task.py"], "# [USER_INSTRUCTIONS_START]"));
  EXPECT_EQ(files["conftest.py"], "from kernelfoundry.conftest import *\n");

  KernelBenchPackageSpec bad = GemmSpec();
  bad.introspection["init_inputs"][0] = Json::parse(R"({"kind": "unsupported", "type": "str", "where": "get_init_inputs()[0]"})");
  try {
    RenderKernelBenchPackage(bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_TRUE(Has(e.message(), "get_init_inputs()[0]: a str")) << e.message();
  }
}

// --gpu (issue 27): the same calling convention as a CUDA torch extension: kernel.cu, language cuda, the config's
// gpu_arch, inputs and model on the CUDA device, the sides called in the test process (CUDA tensors cannot cross
// to an executor), every test skipped without a device.
TEST(KernelBenchRender, GpuPackageIsACudaTorchExtension) {
  KernelBenchPackageSpec spec = GemmSpec();
  spec.target.gpu = true;
  std::map<std::string, std::string> files = RenderKernelBenchPackage(spec);
  ASSERT_EQ(files.size(), 6u);
  EXPECT_EQ(files.count("kernel.cpp"), 0u);
  const std::string& k = files["kernel.cu"];
  EXPECT_TRUE(Has(k, "as a CUDA torch extension (task kb_l2_12_gemm_multiply_leakyrelu")) << k;
  EXPECT_TRUE(Has(k, "torch::Tensor forward(torch::Tensor x, torch::Tensor gemm_weight,")) << k;
  EXPECT_TRUE(Has(files["config.yaml"], "language: cuda\ngpu_arch: \"90\"\n")) << files["config.yaml"];
  const std::string& t = files["task.py"];
  EXPECT_TRUE(Has(t, "KERNEL_FILE = \"kernel.cu\"\nDEVICE = \"cuda\"\n")) << t;
  EXPECT_TRUE(Has(t, "pytest.mark.skipif(not torch.cuda.is_available(), reason=\"no CUDA device\")")) << t;
  EXPECT_TRUE(Has(t, "# order; init_inputs = problem.get_init_inputs() (ints as int64_t, floats as double). Tensors are "
                     "contiguous CUDA tensors\n# on the current device;")) << t;
  EXPECT_TRUE(Has(files["sides.py"], "DEVICE = \"cuda\"\n")) << files["sides.py"];
  EXPECT_TRUE(Has(k, ".attr(\"Model\")(in_features, out_features, multiplier, negative_slope).attr(\"to\")(\"cuda\")"))
      << k;
  EXPECT_TRUE(Has(k, "py::module_::import(\"torch.func\").attr(\"functional_call\")")) << k;
  EXPECT_TRUE(Has(t, "# Implement `forward` in kernel.cu for")) << t;
  KernelBenchPackageSpec odd = spec;
  odd.problem_file = "level1/e\nmemory_limit: off\n#.py";  // would add a key to config.yaml
  EXPECT_THROW(RenderKernelBenchPackage(odd), Error);
  odd.problem_file = "level1/q\"\"\" + __import__('os').getcwd() + \"\"\".py";  // would close task.py's docstring
  EXPECT_THROW(RenderKernelBenchPackage(odd), Error);
  spec.target.gpu_arch = "Hopper";
  EXPECT_TRUE(Has(RenderKernelBenchPackage(spec)["config.yaml"], "gpu_arch: \"Hopper\"\n"));
  spec.target.gpu_arch = "bmg";  // an Intel GPU: not for a CUDA extension
  try {
    RenderKernelBenchPackage(spec);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.field(), "--gpu-arch");
    EXPECT_TRUE(Has(e.message(), "'bmg' is not a CUDA architecture")) << e.message();
  }
  // The CPU package keeps its executor and its host tensors.
  std::map<std::string, std::string> cpu = RenderKernelBenchPackage(GemmSpec());
  EXPECT_TRUE(Has(cpu["task.py"], "KERNEL_FILE = \"kernel.cpp\"\nDEVICE = \"cpu\"\n")) << cpu["task.py"];
  EXPECT_TRUE(Has(cpu["task.py"], "OpenMP is available (-fopenmp).")) << cpu["task.py"];
}

TEST(KernelBenchCli, GpuImportIsAValidCudaTaskAndBadArchsAreRefused) {
  TempDir tmp;
  fs::path out = tmp.path() / "gelu";
  const std::string problem = Q(Problem("level1/88_MinGPTNewGelu.py"));
  auto [rc, text] = RunShell(testing::KfCommand("import-kernelbench " + problem +
                                                " --gpu --set batch_size=4 --set dim=8 -o " + Q(out)));
  ASSERT_EQ(rc, 0) << text;
  EXPECT_TRUE(fs::is_regular_file(out / "kernel.cu"));
  EXPECT_FALSE(fs::exists(out / "kernel.cpp"));
  auto [vrc, vtext] = RunShell(testing::KfCommand("validate " + Q(out)));
  EXPECT_EQ(vrc, 0) << vtext;
  EXPECT_TRUE(Has(vtext, "valid pytest task (6 correctness test(s), 1 performance test(s))")) << vtext;
  auto [rc2, text2] = RunShell(testing::KfCommand("import-kernelbench " + problem + " --gpu --gpu-arch lnl -o " +
                                                  Q(tmp.path() / "bad")));
  EXPECT_EQ(rc2, 3) << text2;
  EXPECT_TRUE(Has(text2, "--gpu-arch: 'lnl' is not a CUDA architecture")) << text2;
  EXPECT_FALSE(fs::exists(tmp.path() / "bad"));
  auto [rc3, text3] = RunShell(testing::KfCommand("import-kernelbench " + problem + " --gpu-arch 90 -o " +
                                                  Q(tmp.path() / "bad")));
  EXPECT_EQ(rc3, 3) << text3;
  EXPECT_TRUE(Has(text3, "--gpu-arch needs --gpu")) << text3;
  // --force never writes through a link planted in the output folder (stranger test, 2026-12-07: it did).
  const fs::path victim = tmp.path() / "victim.txt";
  testing::WriteFile(victim, "keep me\n");
  fs::create_directories(tmp.path() / "linked");
  fs::create_symlink(victim, tmp.path() / "linked" / "config.yaml");
  auto [rc4, text4] = RunShell(testing::KfCommand("import-kernelbench " + problem + " --gpu --set batch_size=4 "
                                                  "--set dim=8 --force -o " + Q(tmp.path() / "linked")));
  EXPECT_NE(rc4, 0) << text4;
  EXPECT_EQ(ReadFile(victim), "keep me\n");
}

TEST(KernelBenchCli, ImportWritesPackageAndRejectsBadSizes) {
  TempDir tmp;
  fs::path out = tmp.path() / "relu";
  auto [rc, text] = RunShell(testing::KfCommand("import-kernelbench " + Q(Problem("level1/19_ReLU.py")) +
                                " --set batch_size=4 --set dim=32 -o " + Q(out)));
  ASSERT_EQ(rc, 0) << text;
  EXPECT_TRUE(Has(text, "wrote task kb_l1_19_relu")) << text;
  for (const char* f : {"problem.py", "kernel.cpp", "task.py", "config.yaml", "conftest.py"}) {
    EXPECT_TRUE(fs::is_regular_file(out / f)) << f;
  }
  std::string problem = ReadFile(out / "problem.py");
  EXPECT_TRUE(Has(problem, "batch_size = 4  # kf import-kernelbench --set (was: 4096)")) << problem;
  EXPECT_TRUE(Has(ReadFile(out / "kernel.cpp"), "//   torch::Tensor x  <- get_inputs()[0]: float32 tensor (4, 32)"));

  auto [rc2, text2] = RunShell(testing::KfCommand("import-kernelbench " + Q(Problem("level1/19_ReLU.py")) + " --set batch=4 -o " +
                                  Q(tmp.path() / "bad")));
  EXPECT_EQ(rc2, 3) << text2;
  EXPECT_TRUE(Has(text2, "unknown size 'batch'")) << text2;
  EXPECT_FALSE(fs::exists(tmp.path() / "bad"));
  auto [rc3, text3] = RunShell(testing::KfCommand("import-kernelbench " + Q(Problem("level1/19_ReLU.py")) + " --set dim=big -o " +
                                  Q(tmp.path() / "bad")));
  EXPECT_EQ(rc3, 3) << text3;
  EXPECT_TRUE(Has(text3, "value 'big' of size 'dim'")) << text3;
  auto [rc4, text4] = RunShell(testing::KfCommand("import-kernelbench " + Q(Problem("level1/19_ReLU.py")) + " -o " + Q(out)));
  EXPECT_EQ(rc4, 3) << text4;  // not empty, no --force
  EXPECT_TRUE(Has(text4, "not empty")) << text4;
  auto [rc5, text5] = RunShell(testing::KfCommand("import-kernelbench " + Q(Problem("level1/1_Square_matrix_multiplication_.py")) +
                                  " --list-sizes"));
  EXPECT_EQ(rc5, 0) << text5;
  EXPECT_EQ(text5, "N = 2048 * 2\n");
}

// Every problem of shared/kernelbench, shrunk to sizes of at most 16, gives a package kf validate accepts with
// its 6 correctness tests and 1 benchmark collected.
TEST(KernelBenchSlow, EveryProblemImportsToAValidPackage) {
  TempDir tmp;
  int count = 0;
  for (const char* level : {"level1", "level2"}) {
    for (const auto& e : fs::directory_iterator(testing::SharedDir() / "kernelbench" / level)) {
      if (e.path().extension() != ".py") continue;
      ++count;
      fs::path out = tmp.path() / (std::string(level) + "_" + e.path().stem().string());
      auto [rc, text] = RunShell(testing::KfCommand("import-kernelbench " + Q(e.path()) + SmallSets(e.path()) + " -o " + Q(out)));
      ASSERT_EQ(rc, 0) << e.path() << "\n" << text;
      auto [vrc, vtext] = RunShell(testing::KfCommand("validate " + Q(out)));
      EXPECT_EQ(vrc, 0) << e.path() << "\n" << vtext;
      EXPECT_TRUE(Has(vtext, "valid pytest task (6 correctness test(s), 1 performance test(s))")) << e.path() << "\n" << vtext;
    }
  }
  EXPECT_GE(count, 12);
}

// Imports `problem` small, runs `kf run` (candidate file, or the starting point when empty) and checks the
// verdict, the printed speedup and the job + kernel rows in the SQLite database.
void RunImported(const std::string& problem, const std::string& sets, const std::string& candidate,
                 const std::string& task_name) {
  TempDir tmp;
  fs::path task = tmp.path() / "task";
  auto [rc, text] = RunShell(testing::KfCommand("import-kernelbench " + Q(Problem(problem)) + sets + " -o " + Q(task)));
  ASSERT_EQ(rc, 0) << text;
  fs::path db = tmp.path() / "kernels.sqlite3";
  std::string cand = candidate.empty() ? "" : " --candidate " + Q(testing::SourceDir() / candidate);
  auto [rrc, out] = RunShell(testing::KfCommand("run " + Q(task) + cand + " --no-verdict-cache --db " + Q(db) + " --json " + Q(tmp.path() / "out.json")));
  ASSERT_EQ(rrc, 0) << out;
  EXPECT_TRUE(testing::HasCorrectVerdictLine(out)) << out;
  EXPECT_TRUE(Has(out, "task.py::TestKernelBench::test_benchmark")) << out;
  EXPECT_TRUE(Has(out, "overall speedup (geomean):")) << out;
  Json j = Json::parse(ReadFile(tmp.path() / "out.json"));
  EXPECT_TRUE(testing::CorrectAndTimed(j["status"])) << out;
  EXPECT_EQ(j["perf_score"], 5);
  EXPECT_GT(j["speedup"].get<double>(), 0.0);
  EXPECT_EQ(testing::SqlValue(db, "SELECT COUNT(*) FROM jobs WHERE status = 'COMPLETE'"), "1");
  EXPECT_EQ(testing::SqlValue(db, "SELECT COUNT(*) FROM kernels"), "1");
  EXPECT_EQ(testing::SqlValue(db, "SELECT task_name FROM tasks"), task_name);
}

TEST(KernelBenchSlow, ReluOpenMpCandidateIsCorrectWithSpeedupStored) {
  RunImported("level1/19_ReLU.py", " --set batch_size=64 --set dim=8192", "examples/candidates/kernelbench/relu_omp.cpp",
              "kb_l1_19_relu");
}

TEST(KernelBenchSlow, SoftmaxOpenMpCandidateIsCorrectWithSpeedupStored) {
  RunImported("level1/23_Softmax.py", " --set batch_size=64 --set dim=8192",
              "examples/candidates/kernelbench/softmax_omp.cpp", "kb_l1_23_softmax");
}

// Regression (issue 9): an all-zeros output passed softmax over 4096 columns (outputs ~2.4e-4, all below
// KernelBench's fixed atol 1e-2) and was scored correct with a 7x speedup. The imported tests scale atol with
// the reference output's magnitude, so zeros are a value mismatch.
TEST(KernelBenchSlow, ZerosOnSoftmaxAreAValueMismatch) {
  TempDir tmp;
  fs::path task = tmp.path() / "task";
  auto [rc, text] = RunShell(testing::KfCommand("import-kernelbench " + Q(Problem("level1/23_Softmax.py")) +
                                " --set batch_size=16 --set dim=4096 -o " + Q(task)));
  ASSERT_EQ(rc, 0) << text;
  fs::path cand = tmp.path() / "zeros.cpp";
  testing::WriteFile(cand, "torch::Tensor forward(torch::Tensor x) { return torch::zeros_like(x); }\n");
  auto [rrc, out] = RunShell(testing::KfCommand("run " + Q(task) + " --candidate " + Q(cand) + " --no-reference --no-store --no-verdict-cache --json " +
                                Q(tmp.path() / "out.json")));
  EXPECT_NE(rrc, 0) << out;
  Json j = Json::parse(ReadFile(tmp.path() / "out.json"));
  EXPECT_EQ(j["status"], "value_mismatch") << out;
}

// The generated starting point (calls back into the PyTorch Model) is correct, here on a level-2 problem with
// state tensors and int/float init inputs.
TEST(KernelBenchSlow, StartingPointIsCorrect) {
  RunImported("level2/12_Gemm_Multiply_LeakyReLU.py",
              " --set batch_size=8 --set in_features=32 --set out_features=16", "", "kb_l2_12_gemm_multiply_leakyrelu");
}

}  // namespace
}  // namespace kf
