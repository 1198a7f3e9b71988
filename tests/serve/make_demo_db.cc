// kf_serve_demo_db DB N — writes N demo evaluations plus the hostile candidate (tests/serve/demo_db.hpp) into
// the SQLite database DB (created), and prints {"tasks", "per_status", "hostile_id", "hostile_task",
// "kernels"} as JSON for the browser test.
#include <cstdio>
#include <string>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "serve/demo_db.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kf_serve_demo_db DB N\n");
    return 2;
  }
  try {
    auto store = kf::OpenStore(argv[1]);
    kf::testing::DemoDb db = kf::testing::FillDemoDb(*store, KF_SOURCE_DIR, std::stoi(argv[2]), true);
    kf::Json j = {{"tasks", db.tasks},
                  {"per_status", db.per_status},
                  {"hostile_id", db.hostile_id},
                  {"hostile_task", db.hostile_task},
                  {"kernels", db.kernel_ids.size()}};
    std::puts(j.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kf_serve_demo_db: %s\n", e.what());
    return 1;
  }
  return 0;
}
