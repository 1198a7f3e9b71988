// Internal: incremental SHA-256 over OpenSSL EVP (used by the task hash id and the discovery cache key).
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace kf::internal {

/// Incremental SHA-256. Not thread-safe; one instance per computation.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  /// Feeds bytes.
  void Update(std::string_view bytes);
  /// Returns the digest as 64 lower-case hex characters; the object must not be used afterwards.
  std::string HexDigest();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

/// SHA-256 of `bytes` as lower-case hex.
std::string Sha256Hex(std::string_view bytes);

}  // namespace kf::internal
