#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

std::string Render(const std::string& file, const std::string& field, const std::string& message) {
  std::string out;
  if (!file.empty()) out += file + ": ";
  if (!field.empty()) out += field + ": ";
  out += message;
  return out;
}

}  // namespace

std::string_view ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid_argument";
    case ErrorKind::kNotFound: return "not_found";
    case ErrorKind::kParse: return "parse";
    case ErrorKind::kIO: return "io";
    case ErrorKind::kLimit: return "limit";
    case ErrorKind::kUnsafe: return "unsafe";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kInternal: return "internal";
  }
  return "internal";
}

Error::Error(ErrorKind kind, std::string message, std::string file, std::string field)
    : std::runtime_error(Render(file, field, message)),
      kind_(kind),
      file_(std::move(file)),
      field_(std::move(field)),
      message_(std::move(message)) {}

}  // namespace kf
