// Helpers shared by the exec tests.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernelfoundry/process.hpp"

namespace kf::exec_test {

/// /usr/bin/python3 (has no third-party needs here; the PATH python may be a different one).
inline const char* kPython = "/usr/bin/python3";

/// True while a process with this pid exists and is not a zombie.
inline bool PidAlive(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return false;
  std::string line;
  std::getline(in, line);
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

/// Numbers following `key` + " " in the text ("child 123" -> 123), in order.
inline std::vector<int> PidsAfter(const std::string& text, const std::string& key) {
  std::vector<int> pids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    if (word == key) {
      int pid = 0;
      if (in >> pid) pids.push_back(pid);
    }
  }
  return pids;
}

/// Options with a safety wall timeout.
inline ProcessOptions Cmd(std::vector<std::string> argv) {
  ProcessOptions o;
  o.argv = std::move(argv);
  o.wall_timeout = std::chrono::seconds(20);
  return o;
}

inline ProcessOptions Sh(const std::string& script) { return Cmd({"/bin/sh", "-c", script}); }

inline ProcessOptions Py(const std::string& script) { return Cmd({kPython, "-c", script}); }

}  // namespace kf::exec_test
