// Base64 (include/kernelfoundry/base64.hpp): sizes, decoding into caller storage, and the batch decoder
// Base64DecodeAll on one thread and on several (>= kBase64ParallelBytes of text), including which error it
// reports when more than one text is invalid.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/error.hpp"

namespace kf {
namespace {

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

TEST(Base64, DecodedSizeCountsThePadding) {
  EXPECT_EQ(Base64DecodedSize(""), 0u);
  EXPECT_EQ(Base64DecodedSize("YQ=="), 1u);
  EXPECT_EQ(Base64DecodedSize("YWI="), 2u);
  EXPECT_EQ(Base64DecodedSize("YWJj"), 3u);
  EXPECT_THROW(Base64DecodedSize("YWJ"), Error);
  std::string out(3, '\0');
  Base64DecodeTo("YWJj", out.data());
  EXPECT_EQ(out, "abc");
  EXPECT_THROW(Base64DecodeTo("YW!j", out.data()), Error);
}

// Jobs of random files whose texts add up to `total` bytes or more.
struct Batch {
  std::vector<std::string> bytes, texts, outs;
  std::vector<Base64Job> jobs;
};
Batch MakeBatch(size_t files, size_t each, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Batch b;
  for (size_t i = 0; i < files; ++i) {
    b.bytes.push_back(RandomBytes(rng, each + rng() % 7));  // every padding length
    b.texts.push_back(Base64Encode(b.bytes.back()));
  }
  b.outs.assign(files, "stale");
  for (size_t i = 0; i < files; ++i) b.jobs.push_back({b.texts[i], &b.outs[i]});
  return b;
}

TEST(Base64DecodeAll, SmallBatchDecodesEveryJob) {
  Batch b = MakeBatch(9, 100, 1);
  EXPECT_FALSE(Base64DecodeAll(b.jobs).has_value());
  EXPECT_EQ(b.outs, b.bytes);
  EXPECT_FALSE(Base64DecodeAll({}).has_value());
}

TEST(Base64DecodeAll, BigBatchOnSeveralThreadsDecodesEveryJob) {
  Batch b = MakeBatch(200, 60000, 2);  // ~16 MB of text: over kBase64ParallelBytes
  size_t text = 0;
  for (const std::string& t : b.texts) text += t.size();
  ASSERT_GE(text, kBase64ParallelBytes);
  EXPECT_FALSE(Base64DecodeAll(b.jobs).has_value());
  EXPECT_EQ(b.outs, b.bytes);
}

TEST(Base64DecodeAll, ReportsTheFirstInvalidJobInJobOrder) {
  Batch b = MakeBatch(200, 60000, 3);
  b.texts[197][40] = '!';  // in the last thread's range
  b.texts[57][8] = '*';    // in the first or second range
  b.texts[120].pop_back();  // a bad length in between
  for (size_t i = 0; i < b.jobs.size(); ++i) b.jobs[i].text = b.texts[i];
  const auto failure = Base64DecodeAll(b.jobs);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->first, 57u);
  EXPECT_EQ(failure->second.kind(), ErrorKind::kParse);
  EXPECT_EQ(failure->second.field(), "base64");
  EXPECT_NE(failure->second.message().find("near offset 8"), std::string::npos) << failure->second.message();
  // Jobs before the first failure are decoded.
  for (size_t i = 0; i < 57; ++i) EXPECT_EQ(b.outs[i], b.bytes[i]) << i;
}

}  // namespace
}  // namespace kf
