// Direct SQLite access for store tests: reads what the SQLite store wrote (or tampers with a file) without
// going through the code under test.
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace kf::testing {

/// Runs `sql` on the database file and returns every row as text cells ("NULL" for SQL NULL).
inline std::vector<std::vector<std::string>> Sql(const std::filesystem::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  if (sqlite3_open(db.c_str(), &h) != SQLITE_OK) throw std::runtime_error("cannot open " + db.string());
  sqlite3_busy_timeout(h, 10000);
  std::vector<std::vector<std::string>> rows;
  auto cb = [](void* out, int n, char** values, char**) {
    auto* r = static_cast<std::vector<std::vector<std::string>>*>(out);
    r->emplace_back();
    for (int i = 0; i < n; ++i) r->back().emplace_back(values[i] != nullptr ? values[i] : "NULL");
    return 0;
  };
  char* err = nullptr;
  int rc = sqlite3_exec(h, sql.c_str(), cb, &rows, &err);
  std::string msg = err != nullptr ? err : "";
  sqlite3_free(err);
  sqlite3_close(h);
  if (rc != SQLITE_OK) throw std::runtime_error("SQL failed: " + msg + " in: " + sql);
  return rows;
}

/// The single value of a one-row, one-column query.
inline std::string SqlValue(const std::filesystem::path& db, const std::string& sql) {
  auto rows = Sql(db, sql);
  if (rows.size() != 1 || rows[0].size() != 1) throw std::runtime_error("expected one value from: " + sql);
  return rows[0][0];
}

}  // namespace kf::testing
