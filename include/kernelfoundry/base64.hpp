// Base64 (RFC 4648, standard alphabet, padded) — the encoding of file contents on the wire.
#pragma once

#include <string>
#include <string_view>

namespace kf {

/// Encodes bytes as padded standard base64 (same text as Python's base64.b64encode).
std::string Base64Encode(std::string_view bytes);
/// Decodes padded standard base64. Throws kf::Error(kParse) on invalid characters or length.
std::string Base64Decode(std::string_view text);

}  // namespace kf
