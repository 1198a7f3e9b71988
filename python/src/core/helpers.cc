// The C++ functions behind kernelfoundry.eval_pipeline.utils.custom_task_helper (blocks, config, test
// discovery — reference spec §1.4, §1.7, §1.8) and kernelfoundry.eval_pipeline.database (the store's tables,
// the hash id, the default db_user — spec §3.4, §5.6). The Python modules give them the reference's names and
// signatures; the rules live in the C++ core (include/kernelfoundry/blocks.hpp, config.hpp, pytest_collect.hpp,
// task.hpp, store.hpp).
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "convert.hpp"
#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/config.hpp"
#include "kernelfoundry/pytest_collect.hpp"
#include "kernelfoundry/store.hpp"
#include "kernelfoundry/task.hpp"
#include "objects.hpp"

namespace kfpy {
namespace {

py::dict BlockMapToPy(const kf::BlockMap& blocks) {
  py::dict d;
  for (const auto& [path, contents] : blocks) {
    py::list items;
    for (const std::string& c : contents) items.append(Str(c));
    d[Str(path)] = items;
  }
  return d;
}

/// {path: [content, ...]} (a str value counts as one block) -> BlockMap. TypeError for other shapes.
kf::BlockMap BlockMapFromPy(py::handle blocks) {
  if (!py::isinstance<py::dict>(blocks)) throw py::type_error("blocks must be a dict {path: [content, ...]}");
  kf::BlockMap out;
  for (auto [path, contents] : blocks.cast<py::dict>()) {
    std::vector<std::string>& list = out[Utf8(py::str(path), "blocks path")];
    if (py::isinstance<py::str>(contents)) {
      list.push_back(Utf8(contents, "block content"));
      continue;
    }
    for (py::handle c : contents) list.push_back(Utf8(c, "block content"));
  }
  return out;
}

py::dict TestListsToPy(const kf::TestLists& lists) {
  py::list all, correctness, profile;
  for (const std::string& t : lists.correctness) {
    all.append(Str(t));
    correctness.append(Str(t));
  }
  for (const std::string& t : lists.profile) {
    all.append(Str(t));
    profile.append(Str(t));
  }
  py::dict d;
  d["all_tests"] = all;
  d["correctness_tests"] = correctness;
  d["profile_tests"] = profile;
  return d;
}

}  // namespace

void RegisterHelpers(py::module_& m) {
  m.def("block_extensions", &kf::BlockExtensions,
        "The file extensions scanned for blocks, in the reference's order (allowed_text_file_extensions).");
  m.def("is_block_file", [](const std::string& path) { return kf::IsBlockFile(path); }, py::arg("path"),
        "True when blocks are looked for in this path (its name ends with a block extension).");
  m.def("blocks_get", [](const PyFileMap& files, const std::string& key) {
    return BlockMapToPy(kf::GetBlock(*files.ref, key));
  }, py::arg("files"), py::arg("key"),
        "{path: [content, ...]} of every `key` block (kf::GetBlock). Raises ParseError (a ValueError) for "
        "malformed markers or a scanned file that is not UTF-8.");
  m.def("blocks_update", [](const PyFileMap& files, const std::string& key, py::handle path, const std::string& content,
                            size_t block_index) {
    kf::UpdateBlock(*files.ref, key, Utf8(py::str(path), "path"), content, block_index);
  }, py::arg("files"), py::arg("key"), py::arg("path"), py::arg("content"), py::arg("block_index") = 0,
        "Replaces block `block_index` of `key` in `path` in place (kf::UpdateBlock: mode kept, mtime now). "
        "Raises NotFoundError (FileNotFoundError/KeyError/AssertionError) for a missing file, key or index, "
        "ParseError (ValueError) for malformed markers, InvalidArgumentError when content holds a marker.");
  m.def("blocks_to_str", [](py::handle blocks) { return kf::BlocksToStr(BlockMapFromPy(blocks)); },
        py::arg("blocks"), "One key's blocks as one string (kf::BlocksToStr), paths in sorted order.");
  m.def("config_find", [](const PyFileMap& files, const std::string& stem) -> py::object {
    std::optional<std::string> found = kf::FindTopLevelConfig(*files.ref, stem);
    return found ? py::object(Str(*found)) : py::object(py::none());
  }, py::arg("files"), py::arg("stem"),
        "The top-level '<stem>.yaml' or '<stem>.yml' of the map, or None. Raises InvalidArgumentError (a "
        "ValueError) when both exist.");
  m.def("config_load_text", [](const std::string& text, const std::string& source) {
    return ToPy(kf::LoadConfigText(text, source));
  }, py::arg("text"), py::arg("source"),
        "A config's YAML text as a dict, typed and resolved as OmegaConf does (kf::LoadConfigText). Raises "
        "ParseError naming `source`.");
  m.def("dump_yaml", [](py::handle data) { return kf::DumpYaml(ToJson(data)); }, py::arg("data"),
        "Block-style YAML of a JSON-like value, keys in their order (kf::DumpYaml).");
  m.def("collect_tests", [](py::handle task_root) {
    const std::string root = FsPath(task_root, "task_root");
    kf::TestLists lists;
    {
      py::gil_scoped_release release;
      lists = kf::CollectPytestTests(root);
    }
    return TestListsToPy(lists);
  }, py::arg("task_root"),
        "The task's pytest tests from one collection (kf::CollectPytestTests): {'all_tests' (the correctness "
        "tests, then the profile tests), 'correctness_tests', 'profile_tests'}. Raises InvalidArgumentError naming "
        "the collector's error.");
  m.def("generate_hash_id", [](py::handle data) {
    return kf::GenerateHashId(py::isinstance<py::str>(data) ? kf::Json(Utf8(data, "data")) : ToJson(data));
  }, py::arg("data"),
        "The reference's tasks.id: SHA-256 over an encoded task_data dict (base64 contents in sorted path "
        "order, config.yaml/.yml skipped) or of a str (kf::GenerateHashId).");
  m.def("store_schema", [] { return ToPy(kf::StoreSchema()); },
        "The store's tables as data (kf::StoreSchema): [{'name', 'columns': [{'name', 'type', 'length', "
        "'not_null', 'primary_key', 'server_now', 'autoincrement', 'kf_own'}]}].");
  m.def("default_db_user", &kf::DefaultDbUser,
        "The default of kernels.db_user: the OS user as getpass.getuser() finds it (kf::DefaultDbUser).");
}

}  // namespace kfpy
