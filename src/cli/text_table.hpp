// TextTable — the one plain-text table layout of the CLI (kf run's verdict table, kf results): a header row
// and data rows, columns padded to their widest cell and separated by two spaces, text left-aligned and
// numbers right-aligned, trailing blanks trimmed.
#pragma once

#include <string>
#include <vector>

namespace kf::cli {

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };

  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

  /// Appends a row. Missing cells are empty; extra cells are dropped.
  void AddRow(std::vector<std::string> cells);
  /// True when no row was added.
  bool empty() const { return rows_.empty(); }
  /// The header line then one line per row, each ending in "\n". Widths count bytes (cells are ASCII in
  /// practice; wide characters only misalign, they are never cut).
  std::string Render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kf::cli
