// TextTable (see text_table.hpp).
#include "cli/text_table.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kf::cli {

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render() const {
  std::vector<size_t> width(columns_.size());
  for (size_t i = 0; i < columns_.size(); ++i) {
    width[i] = columns_[i].header.size();
    for (const auto& row : rows_) width[i] = std::max(width[i], row[i].size());
  }
  auto line = [&](const auto& cell_of) {
    std::string out;
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (i) out += "  ";
      const std::string& cell = cell_of(i);
      out += columns_[i].align == Align::kRight ? fmt::format("{:>{}}", cell, width[i])
                                                : fmt::format("{:<{}}", cell, width[i]);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string text = line([&](size_t i) -> const std::string& { return columns_[i].header; });
  for (const auto& row : rows_) text += line([&](size_t i) -> const std::string& { return row[i]; });
  return text;
}

}  // namespace kf::cli
