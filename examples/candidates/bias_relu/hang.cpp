// Never returns: spins forever; the pipeline must stop it at its timeout and leave nothing running.
#include <atomic>
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    static std::atomic<long> spin{0};
    for (;;) spin.fetch_add(1, std::memory_order_relaxed);
}
