// Kernel lineage (KernelLineage, TaskGraph, /api/lineage, /api/graph) over a store holding a small family tree
// written through the Store API: root -> a -> a1, root -> b; plus a kernel whose parent is not stored and a
// parent cycle (which must not loop).
#include <gtest/gtest.h>

#include <set>

#include "kernelfoundry/serve.hpp"
#include "kernelfoundry/store.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

class LineageApi : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenStore((dir_.path() / "k.sqlite3").string());
    auto add = [&](const std::string& uuid, const Json& parent, double speedup, const std::string& status) {
      return store_->InsertKernel({{"uuid", uuid}, {"parent_uuid", parent}, {"task_name", "t"},
                                   {"improve_over_native", speedup}, {"kf_status", status}, {"score", 5}});
    };
    root_ = add("root", nullptr, 1.0, "correct");
    a_ = add("a", "root", 1.5, "correct");
    b_ = add("b", "root", -1, "value_mismatch");
    a1_ = add("a1", "a", 2.0, "noisy");
    orphan_ = add("orphan", "gone", 1.1, "correct");
    add("x", "y", 1, "correct");
    add("y", "x", 1, "correct");
  }
  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  int64_t root_ = 0, a_ = 0, b_ = 0, a1_ = 0, orphan_ = 0;
};

TEST_F(LineageApi, AncestorsRootFirstAndChildren) {
  auto l = KernelLineage(*store_, "a1");
  ASSERT_TRUE(l);
  ASSERT_EQ((*l)["ancestors"].size(), 2u);
  EXPECT_EQ((*l)["ancestors"][0]["uuid"], "root");
  EXPECT_EQ((*l)["ancestors"][1]["uuid"], "a");
  EXPECT_EQ((*l)["kernel"]["id"], a1_);
  EXPECT_EQ((*l)["kernel"]["speedup"], 2.0);
  EXPECT_EQ((*l)["kernel"]["status"], "noisy");
  EXPECT_TRUE((*l)["missing_parent"].is_null());
  auto r = KernelLineage(*store_, "root");
  ASSERT_EQ((*r)["children"].size(), 2u);
  EXPECT_EQ((*r)["children"][1]["uuid"], "b");
  EXPECT_TRUE((*r)["children"][1]["speedup"].is_null());  // -1: not measured
  EXPECT_EQ((*KernelLineage(*store_, "orphan"))["missing_parent"], "gone");
  EXPECT_EQ((*KernelLineage(*store_, "x"))["ancestors"].size(), 1u);  // the cycle x <-> y ends the walk
  EXPECT_FALSE(KernelLineage(*store_, "nope"));
}

TEST_F(LineageApi, TaskGraphEdgesBetweenStoredNodes) {
  Json g = TaskGraph(*store_, "t", 100);
  EXPECT_EQ(g["nodes"].size(), 7u);
  EXPECT_FALSE(g["truncated"].get<bool>());
  std::set<std::pair<int64_t, int64_t>> edges;
  for (const Json& e : g["edges"]) edges.insert({e["parent"].get<int64_t>(), e["child"].get<int64_t>()});
  EXPECT_TRUE(edges.count({root_, a_}));
  EXPECT_TRUE(edges.count({root_, b_}));
  EXPECT_TRUE(edges.count({a_, a1_}));
  EXPECT_EQ(edges.size(), 5u);  // + x <-> y; the orphan's parent is not a node
  Json last = TaskGraph(*store_, "t", 2);
  EXPECT_EQ(last["nodes"].size(), 2u);
  EXPECT_TRUE(last["truncated"].get<bool>());
  // The same through the JSON API.
  ApiResponse api = HandleApiRequest(*store_, "/api/graph", {{"task", "t"}});
  EXPECT_EQ(api.status, 200);
  EXPECT_EQ(ParseJson(api.body, "graph")["edges"].size(), 5u);
  EXPECT_EQ(HandleApiRequest(*store_, "/api/lineage", {{"uuid", "nope"}}).status, 404);
  EXPECT_EQ(HandleApiRequest(*store_, "/api/lineage", {}).status, 400);
  EXPECT_EQ(ParseJson(HandleApiRequest(*store_, "/api/lineage", {{"uuid", "a"}}).body, "l")["children"][0]["uuid"], "a1");
}

}  // namespace
}  // namespace kf
