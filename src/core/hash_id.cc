// Task hash id (reference spec §3.4 generate_hash_id) and the SHA-256 helper behind it.
//
// The reference hashes, for a dict input, the UTF-8 bytes of the base64 text of each entry's content, in
// sorted key order, skipping exactly the keys "config.yaml" and "config.yml"; paths, modes and mtimes are
// not hashed. A string input is hashed directly. Ids are 64 lower-case hex characters.
#include <openssl/evp.h>

#include <algorithm>
#include <vector>

#include "core/sha256.hpp"
#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/task.hpp"

namespace kf {
namespace internal {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  if (ctx_->md == nullptr || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1)
    throw Error(ErrorKind::kInternal, "OpenSSL SHA-256 initialisation failed");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_->md); }

void Sha256::Update(std::string_view bytes) {
  if (!bytes.empty() && EVP_DigestUpdate(ctx_->md, bytes.data(), bytes.size()) != 1)
    throw Error(ErrorKind::kInternal, "OpenSSL SHA-256 update failed");
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_->md, digest, &len) != 1)
    throw Error(ErrorKind::kInternal, "OpenSSL SHA-256 finalisation failed");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

std::string Sha256Hex(std::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.HexDigest();
}

}  // namespace internal

namespace {
bool SkippedByHash(const std::string& key) { return key == "config.yaml" || key == "config.yml"; }
}  // namespace

std::string GenerateHashId(const Json& encoded_task_data) {
  if (encoded_task_data.is_string()) return internal::Sha256Hex(encoded_task_data.get_ref<const std::string&>());
  if (!encoded_task_data.is_object())
    throw Error(ErrorKind::kInvalidArgument, "hash input must be an encoded file map (object) or a string", "",
                "task_data");
  std::vector<std::string> keys;
  for (const auto& item : encoded_task_data.items()) keys.push_back(item.key());
  std::sort(keys.begin(), keys.end());
  internal::Sha256 h;
  for (const std::string& key : keys) {
    if (SkippedByHash(key)) continue;
    const Json& entry = encoded_task_data[key];
    const Json* content = entry.is_object() && entry.contains("content") ? &entry["content"] : &entry;
    if (!content->is_string())
      throw Error(ErrorKind::kInvalidArgument, "file entry has no base64 'content' string", "", key);
    h.Update(content->get_ref<const std::string&>());
  }
  return h.HexDigest();
}

std::string Task::HashId() const {
  // Same bytes as GenerateHashId(task_data.Encode()) without building the JSON.
  std::vector<std::string> keys = task_data.ListFiles();
  std::sort(keys.begin(), keys.end());
  internal::Sha256 h;
  for (const std::string& key : keys) {
    if (SkippedByHash(key)) continue;
    h.Update(Base64Encode(*task_data.Find(key)));
  }
  return h.HexDigest();
}

}  // namespace kf
