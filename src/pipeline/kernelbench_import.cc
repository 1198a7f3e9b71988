// KernelBench importer (include/kernelfoundry/kernelbench.hpp): size rewriting, introspection through
// /usr/bin/python3, and rendering of the task package from the templates in kernelbench_templates.cc.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/kernelbench.hpp"

#include "core/files.hpp"
#include "core/strings.hpp"
#include "core/temp_dir.hpp"
#include "harness/isolation.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/process.hpp"
#include "kernelfoundry/profile.hpp"
#include "pipeline/kernelbench_templates.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }


// A constant arithmetic expression: digits, '.', 'e'/'E' and '_' inside numbers, + - * / % ( ) and spaces,
// with at least one digit.
bool IsConstantExpression(const std::string& expr) {
  bool digit = false;
  for (size_t i = 0; i < expr.size(); ++i) {
    char c = expr[i];
    if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
      digit = true;
    } else if ((c == 'e' || c == 'E' || c == '_') && i > 0 && std::isdigit(static_cast<unsigned char>(expr[i - 1])) != 0) {
      continue;
    } else if (std::string_view("+-*/%(). \t").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return digit;
}

// An integer or floating-point literal (optional sign) — what --set accepts as VALUE.
bool IsNumberLiteral(const std::string& v) {
  if (v.empty()) return false;
  const char* begin = v.c_str();
  char* end = nullptr;
  std::strtod(begin, &end);
  if (end != begin + v.size()) return false;
  // strtod also takes "inf", "nan" and hex: accept only decimal digits, '.', exponent and sign.
  return std::all_of(v.begin(), v.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
  });
}

// Splits `line` as `NAME = EXPR [# comment]`; false when it is not a top-level size assignment.
bool ParseSizeLine(const std::string& line, std::string* name, std::string* expr) {
  if (line.empty() || !IsIdentStart(line[0])) return false;
  size_t i = 0;
  while (i < line.size() && IsIdentChar(line[i])) ++i;
  *name = line.substr(0, i);
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  if (i >= line.size() || line[i] != '=' || (i + 1 < line.size() && line[i + 1] == '=')) return false;
  std::string rest = line.substr(i + 1);
  size_t hash = rest.find('#');
  *expr = std::string(Trim(hash == std::string::npos ? rest : rest.substr(0, hash)));
  return IsConstantExpression(*expr);
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::string cur;
  std::istringstream in(text);
  while (std::getline(in, cur)) {
    if (!cur.empty() && cur.back() == '\r') cur.pop_back();
    lines.push_back(cur);
  }
  return lines;
}

// A C++ identifier derived from a Python name: non-identifier characters -> '_', keywords get a '_'.
std::string CppName(const std::string& raw, std::set<std::string>* used) {
  static const std::set<std::string> kReserved = {
      "auto", "bool", "break", "case", "char", "class", "const", "default", "delete", "do", "double", "else",
      "enum", "explicit", "extern", "float", "for", "friend", "goto", "if", "int", "long", "namespace", "new",
      "operator", "private", "protected", "public", "register", "return", "short", "signed", "sizeof", "static",
      "struct", "switch", "template", "this", "throw", "try", "typedef", "typename", "union", "unsigned",
      "using", "virtual", "void", "volatile", "while", "m", "model", "gil", "no_grad", "state", "py", "torch",
      "forward", "functional_call"};
  std::string n;
  for (char c : raw) n += IsIdentChar(c) ? c : '_';
  if (n.empty() || !IsIdentStart(n[0])) n = "a_" + n;
  if (kReserved.count(n) != 0) n += '_';
  std::string unique = n;
  for (int k = 2; used->count(unique) != 0; ++k) unique = n + "_" + std::to_string(k);
  used->insert(unique);
  return unique;
}

std::string Describe(const Json& arg) {
  std::string kind = arg.value("kind", "");
  if (kind == "tensor") {
    std::string shape;
    for (const Json& d : arg["shape"]) shape += (shape.empty() ? "" : ", ") + d.dump();
    return fmt::format("{} tensor ({})", arg.value("dtype", "?"), shape);
  }
  return fmt::format("{} = {}", kind, arg.contains("value") ? arg["value"].dump() : "?");
}

struct Param {
  std::string cpp_type, name, doc;
};

// The problem's file name (and its folder's) goes into comments, docstrings and a C++ string literal of the package:
// letters, digits, '_', '-' and '.' only, as every KernelBench file is. Regression (stranger test, 2026-12-07): a
// name holding a newline added keys to config.yaml (memory_limit: off), one holding \"\"\" closed task.py's
// docstring.
void CheckProblemFileName(const std::string& problem_file, const std::string& file) {
  const bool plain = !problem_file.empty() && std::all_of(problem_file.begin(), problem_file.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.' || c == '/';
  });
  if (!plain) {
    throw Error(ErrorKind::kInvalidArgument,
                "the problem's file and folder names may hold only letters, digits, '_', '-' and '.' (they are "
                "written into the package's files)", file);
  }
}

// A GPU target's gpu_arch must name a CUDA architecture (it becomes config.yaml's gpu_arch and nvcc's target).
void CheckTarget(const KernelBenchTarget& target) {
  if (target.gpu && !IsCudaArch(target.gpu_arch)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("'{}' is not a CUDA architecture (expected e.g. 90, sm_90, 9.0, 90a or Hopper)",
                            target.gpu_arch),
                "", "--gpu-arch");
  }
}

}  // namespace

std::vector<KernelBenchSize> ListKernelBenchSizes(const std::string& source) {
  std::vector<KernelBenchSize> out;
  std::vector<std::string> lines = SplitLines(source);
  for (size_t i = 0; i < lines.size(); ++i) {
    KernelBenchSize s;
    if (ParseSizeLine(lines[i], &s.name, &s.expression)) {
      s.line = static_cast<int>(i + 1);
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::string ApplyKernelBenchSizes(const std::string& source,
                                  const std::vector<std::pair<std::string, std::string>>& sets,
                                  const std::string& file) {
  std::vector<KernelBenchSize> sizes = ListKernelBenchSizes(source);
  std::string settable;
  for (const KernelBenchSize& s : sizes) settable += (settable.empty() ? "" : ", ") + s.name;
  std::map<std::string, std::string> wanted;
  for (const auto& [name, value] : sets) {
    std::string field = "--set " + name;
    if (wanted.count(name) != 0) throw Error(ErrorKind::kInvalidArgument, "size '" + name + "' is set twice", file, field);
    bool known = std::any_of(sizes.begin(), sizes.end(), [&](const KernelBenchSize& s) { return s.name == name; });
    if (!known) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("unknown size '{}': not a top-level `NAME = <number>` assignment of the problem "
                              "(settable: {})", name, settable.empty() ? "none" : settable),
                  file, field);
    }
    if (!IsNumberLiteral(value)) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("value '{}' of size '{}' is not an integer or floating-point number", value, name),
                  file, field);
    }
    wanted[name] = value;
  }
  std::vector<std::string> lines = SplitLines(source);
  std::string out;
  for (const std::string& line : lines) {
    std::string name, expr;
    if (ParseSizeLine(line, &name, &expr) && wanted.count(name) != 0) {
      out += fmt::format("{} = {}  # kf import-kernelbench --set (was: {})\n", name, wanted[name], expr);
    } else {
      out += line + "\n";
    }
  }
  return out;
}

std::string KernelBenchTaskName(const fs::path& problem) {
  std::string prefix = "kb_";
  std::string parent = problem.parent_path().filename().string();
  if (parent.rfind("level", 0) == 0 && parent.size() > 5 &&
      std::all_of(parent.begin() + 5, parent.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
    prefix += "l" + parent.substr(5) + "_";
  }
  std::string stem;
  for (char c : problem.stem().string()) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      stem += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (stem.empty() || stem.back() != '_') {
      stem += '_';
    }
  }
  while (!stem.empty() && stem.back() == '_') stem.pop_back();
  while (!stem.empty() && stem.front() == '_') stem.erase(stem.begin());
  return prefix + (stem.empty() ? "problem" : stem);
}

std::string KernelBenchCppType(const Json& arg) {
  std::string kind = arg.is_object() ? arg.value("kind", "") : "";
  if (kind == "tensor") return "torch::Tensor";
  if (kind == "int") return "int64_t";
  if (kind == "float") return "double";
  if (kind == "bool") return "bool";
  if (kind == "int_list") return "std::vector<int64_t>";
  if (kind == "float_list") return "std::vector<double>";
  throw Error(ErrorKind::kUnsupported,
              fmt::format("{}: a {} ({}) has no C++ type in the calling convention (expected a tensor, int, float, "
                          "bool or a tuple/list of ints or floats)",
                          arg.value("where", std::string("argument")), arg.value("type", kind),
                          arg.value("repr", std::string())),
              "", arg.value("where", std::string()));
}

Json IntrospectKernelBenchProblem(const std::string& problem_source, const std::string& file, const std::string& python,
                                  std::chrono::milliseconds timeout) {
  TempDir tmp({}, "kf-kernelbench-");
  const fs::path& dir = tmp.path();
  ProcessOptions po;
  po.argv = {python, "-c", std::string(kernelbench::kIntrospectScript), dir.string()};
  po.cwd = dir;
  po.wall_timeout = timeout;
  po.memory_limit_bytes = uint64_t{8} << 30;
  po.env_add["PYTHONDONTWRITEBYTECODE"] = "1";
  po.env_add["OMP_NUM_THREADS"] = "1";
  // The problem's code runs isolated like task code (issue 25): `dir` is its private, writable directory.
  IsolateChild(po, {}, dir);
  {
    std::ofstream f(dir / "problem.py", std::ios::binary);
    f << problem_source;
    if (!f) throw Error(ErrorKind::kIO, "cannot write the problem copy", (dir / "problem.py").string());
  }
  ProcessRun run = RunProcess(po);
  const ProcessResult& r = run.result;
  std::string tail = r.stderr_text.size() > 4000 ? r.stderr_text.substr(r.stderr_text.size() - 4000) : r.stderr_text;
  if (run.reason != TerminationReason::kExited || r.returncode != 0) {
    throw Error(ErrorKind::kParse,
                fmt::format("introspecting the problem with {} failed ({}, exit {}){}:\n{}{}", python,
                            TerminationReasonName(run.reason), r.returncode,
                            r.message ? " - " + *r.message : std::string(), r.stdout_text, tail),
                file);
  }
  std::string marker(kernelbench::kIntrospectMarker);
  size_t at = r.stdout_text.rfind(marker);
  if (at == std::string::npos) {
    throw Error(ErrorKind::kParse, "the introspection script printed no result line:\n" + r.stdout_text + tail, file);
  }
  size_t end = r.stdout_text.find('\n', at);
  Json j = ParseJson(r.stdout_text.substr(at + marker.size(), end == std::string::npos ? std::string::npos
                                                                                           : end - at - marker.size()),
                     file);
  for (const char* key : {"inputs", "init_inputs"}) {
    for (const Json& a : j[key]) KernelBenchCppType(a);  // reject unsupported kinds now, naming them
  }
  return j;
}

std::map<std::string, std::string> RenderKernelBenchPackage(const KernelBenchPackageSpec& spec) {
  const Json& in = spec.introspection;
  auto names_or = [&](const char* key, size_t n) {
    std::vector<std::string> v;
    if (in.contains(key) && in[key].is_array() && in[key].size() >= n) {
      for (size_t i = 0; i < n; ++i) v.push_back(in[key][i].get<std::string>());
    }
    return v;
  };
  std::set<std::string> used;
  std::vector<Param> inputs, state, init;
  std::vector<std::string> fwd_names = names_or("forward_params", in["inputs"].size());
  for (size_t i = 0; i < in["inputs"].size(); ++i) {
    const Json& a = in["inputs"][i];
    inputs.push_back({KernelBenchCppType(a), CppName(fwd_names.empty() ? "input" + std::to_string(i) : fwd_names[i], &used),
                      "get_inputs()[" + std::to_string(i) + "]: " + Describe(a)});
  }
  for (const Json& s : in["state"]) {
    Json t = s;
    t["kind"] = "tensor";
    state.push_back({"torch::Tensor", CppName(s["name"].get<std::string>(), &used),
                     "state_dict()['" + s["name"].get<std::string>() + "']: " + Describe(t)});
  }
  std::vector<std::string> init_names = names_or("init_params", in["init_inputs"].size());
  for (size_t i = 0; i < in["init_inputs"].size(); ++i) {
    const Json& a = in["init_inputs"][i];
    init.push_back({KernelBenchCppType(a), CppName(init_names.empty() ? "init" + std::to_string(i) : init_names[i], &used),
                    "get_init_inputs()[" + std::to_string(i) + "]: " + Describe(a)});
  }

  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& e : v) s += (s.empty() ? "" : ", ") + e;
    return s;
  };
  std::vector<std::string> params, init_params, init_args, init_py_args, input_args, sig_doc;
  for (const auto* group : {&inputs, &state, &init}) {
    for (const Param& p : *group) {
      params.push_back(p.cpp_type + " " + p.name);
      sig_doc.push_back(fmt::format("//   {} {}  <- {}\n", p.cpp_type, p.name, p.doc));
    }
  }
  for (size_t i = 0; i < init.size(); ++i) {
    const Param& p = init[i];
    init_params.push_back("const " + p.cpp_type + "& " + p.name);
    init_args.push_back(p.name);
    bool list = p.cpp_type.rfind("std::vector", 0) == 0;
    init_py_args.push_back(list ? "py::tuple(py::cast(" + p.name + "))" : p.name);
  }
  for (const Param& p : inputs) input_args.push_back(p.name);

  std::string call;
  if (state.empty()) {
    call = "  return model(" + join(input_args) + ").cast<torch::Tensor>();\n";
  } else {
    call = "  py::dict state;  // the passed tensors replace the Model's parameters and buffers\n";
    for (size_t i = 0; i < state.size(); ++i) {
      call += fmt::format("  state[\"{}\"] = {};\n", in["state"][i]["name"].get<std::string>(), state[i].name);
    }
    // torch.func.functional_call (torch >= 2.0); torch.nn.utils.stateless's is deprecated there, and all 1.13 has.
    // Never freed, like the Model: no Python object may be released after the interpreter.
    call += "  static py::object* functional_call = []() -> py::object* {\n"
            "    try {\n"
            "      return new py::object(py::module_::import(\"torch.func\").attr(\"functional_call\"));\n"
            "    } catch (const py::error_already_set&) {\n"
            "      return new py::object(\n"
            "          py::module_::import(\"torch.nn.utils.stateless\").attr(\"functional_call\"));\n"
            "    }\n"
            "  }();\n";
    call += "  return (*functional_call)(model, state, py::make_tuple(" + join(input_args) + ")).cast<torch::Tensor>();\n";
  }

  std::string sizes;
  for (const KernelBenchSize& s : ListKernelBenchSizes(spec.problem_source)) {
    sizes += (sizes.empty() ? "" : ", ") + s.name + " = " + s.expression;
  }
  std::string sets_doc;
  for (const auto& [n, v] : spec.sets) sets_doc += " --set " + n + "=" + v;
  std::string user_sig = "#   forward(" + join(params) + ")\n";
  const KernelBenchTarget& target = spec.target;
  CheckTarget(target);
  CheckProblemFileName(spec.problem_file, spec.problem_file);
  const std::string kernel_file = target.gpu ? "kernel.cu" : "kernel.cpp";

  std::map<std::string, std::string> values = {
      {"TASK_NAME", spec.task_name},
      {"PROBLEM_FILE", spec.problem_file},
      {"SIGNATURE_DOC", "// Here:\n" + [&] {
         std::string s;
         for (const std::string& l : sig_doc) s += l;
         return s;
       }()},
      {"PARAMS", join(params)},
      {"INIT_PARAMS", join(init_params)},
      {"INIT_ARGS", join(init_args)},
      {"INIT_PY_ARGS", join(init_py_args)},
      {"CALL", call},
      {"SIZES", sizes.empty() ? "none" : sizes},
      {"USER_SIGNATURE", user_sig},
      {"SETS_DOC", sets_doc.empty() ? std::string() : " with" + sets_doc},
      {"KERNEL_FILE", kernel_file},
      // On a GPU the Model's tensors that are not in its state_dict (plain attributes) must be there too.
      {"MODEL_TO", target.gpu ? ".attr(\"to\")(\"cuda\")" : ""},
      {"DEVICE", target.gpu ? "cuda" : "cpu"},
      {"LANGUAGE", target.gpu ? "cuda" : "cpp"},
      {"GPU_ARCH", target.gpu ? "\"" + target.gpu_arch + "\"" : "cpu"},
      {"EXTENSION_KIND", target.gpu ? "CUDA torch extension" : "C++ CPU torch extension"},
      {"CANDIDATE_DOC", target.gpu ? "the CUDA torch extension in kernel.cu (nvcc)"
                                   : "the C++ CPU torch extension in kernel.cpp (OpenMP)"},
      {"EVOLVE_HINT", target.gpu ? "CUDA kernels launched on torch's current stream"
                                 : "a native C++ / OpenMP implementation"},
      {"TENSOR_CONTRACT", target.gpu ? "Tensors are contiguous CUDA tensors\n# on the current device; launch work "
                                       "on torch's current stream (c10::cuda::getCurrentCUDAStream())."
                                     : "Tensors are contiguous CPU tensors;\n# OpenMP is available (-fopenmp)."},
  };
  std::map<std::string, std::string> files;
  files["problem.py"] = fmt::format(
      "# KernelBench {} (ScalingIntelligence/KernelBench, MIT licence), imported by `kf import-kernelbench`{}.\n"
      "# [REFERENCE_START]\n{}{}# [REFERENCE_END]\n",
      spec.problem_file, values["SETS_DOC"], spec.problem_source,
      (spec.problem_source.empty() || spec.problem_source.back() == '\n') ? "" : "\n");
  files[kernel_file] = kernelbench::SubstituteTemplate(kernelbench::kKernelCpp, values);
  files["task.py"] = kernelbench::SubstituteTemplate(kernelbench::kTaskPy, values);
  files["config.yaml"] = kernelbench::SubstituteTemplate(kernelbench::kConfigYaml, values);
  files["conftest.py"] = std::string(kernelbench::kConftestPy);
  files["sides.py"] = kernelbench::SubstituteTemplate(kernelbench::kSidesPy, values);
  return files;
}

KernelBenchImportResult ImportKernelBench(const KernelBenchImportOptions& o) {
  std::string file = o.problem.string();
  std::error_code ec;
  if (!fs::is_regular_file(o.problem, ec)) throw Error(ErrorKind::kNotFound, "problem file not found", file);
  std::optional<std::string> read = ReadFileBytes(o.problem);
  if (!read) throw Error(ErrorKind::kIO, "cannot read the problem file", file);
  std::string source = std::move(*read);
  if (source.find("class Model") == std::string::npos || source.find("def get_inputs") == std::string::npos ||
      source.find("def get_init_inputs") == std::string::npos) {
    throw Error(ErrorKind::kInvalidArgument,
                "not a KernelBench problem: expected `class Model`, `def get_inputs` and `def get_init_inputs`", file);
  }
  std::string task_name = o.task_name.empty() ? KernelBenchTaskName(o.problem) : o.task_name;
  if (task_name.empty() || !IsIdentStart(task_name[0]) ||
      !std::all_of(task_name.begin(), task_name.end(), [](char c) { return IsIdentChar(c) || c == '-'; })) {
    throw Error(ErrorKind::kInvalidArgument, "task name '" + task_name + "' must be a letter or '_' followed by "
                "letters, digits, '_' or '-'", "", "--name");
  }
  if (o.output_dir.empty()) throw Error(ErrorKind::kInvalidArgument, "no output folder given", "", "-o");
  if (fs::exists(o.output_dir, ec) && !fs::is_empty(o.output_dir, ec) && !o.overwrite) {
    throw Error(ErrorKind::kInvalidArgument, "output folder is not empty (use --force to overwrite)",
                o.output_dir.string(), "-o");
  }
  std::string sized = ApplyKernelBenchSizes(source, o.sets, file);
  KernelBenchPackageSpec spec;
  spec.task_name = task_name;
  fs::path parent = o.problem.parent_path().filename();
  spec.problem_file = (parent.empty() ? o.problem.filename() : parent / o.problem.filename()).string();
  CheckTarget(o.target);  // before the introspection's seconds
  CheckProblemFileName(spec.problem_file, file);
  spec.problem_source = sized;
  spec.sets = o.sets;
  spec.target = o.target;
  spec.introspection = IntrospectKernelBenchProblem(sized, file, o.python, o.introspect_timeout);
  std::map<std::string, std::string> files = RenderKernelBenchPackage(spec);

  // MemoryFileMap::ToDisk checks every path before writing and never follows a link: with --force a symlink
  // planted as config.yaml made the import write through it outside the folder (stranger test, 2026-12-07).
  MemoryFileMap package;
  KernelBenchImportResult result;
  for (const auto& [rel, content] : files) {
    package.Set(rel, content);
    result.files.push_back(rel);
  }
  package.ToDisk(o.output_dir);
  result.task_name = task_name;
  result.output_dir = o.output_dir;
  result.introspection = spec.introspection;
  return result;
}

}  // namespace kf
