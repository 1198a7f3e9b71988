// OpenCL helpers for native task test programs (header-only; include after kernelfoundry/sdk/task_sdk.hpp).
//
// What every OpenCL task needs and should not rewrite: one context + in-order queue on the first device of
// the first platform (KF_SKIP when there is none, so a machine without OpenCL reports "skipped" instead of
// failing), a program built from a .cl file whose build log ends up in the failure message, readable error
// names (CL_INVALID_WORK_GROUP_SIZE rather than -54), and RAII buffers. OpenCL C 1.2 API only (PoCL's CPU
// device on the development machines; any GPU driver elsewhere). Link with -lOpenCL.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernelfoundry/sdk/task_sdk.hpp"

namespace kf::sdk::ocl {

/// The symbolic name of an OpenCL error code (e.g. -54 -> "CL_INVALID_WORK_GROUP_SIZE"); "CL_ERROR(<n>)" for
/// codes outside the OpenCL 1.2 list (names from the Khronos cl.h of OpenCL 1.2).
inline std::string ErrorName(cl_int err) {
  switch (err) {
#define KF_CL_ERR(name) \
  case name: return #name;
    KF_CL_ERR(CL_SUCCESS) KF_CL_ERR(CL_DEVICE_NOT_FOUND) KF_CL_ERR(CL_DEVICE_NOT_AVAILABLE)
    KF_CL_ERR(CL_COMPILER_NOT_AVAILABLE) KF_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE) KF_CL_ERR(CL_OUT_OF_RESOURCES)
    KF_CL_ERR(CL_OUT_OF_HOST_MEMORY) KF_CL_ERR(CL_BUILD_PROGRAM_FAILURE) KF_CL_ERR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    KF_CL_ERR(CL_INVALID_VALUE) KF_CL_ERR(CL_INVALID_DEVICE_TYPE) KF_CL_ERR(CL_INVALID_PLATFORM)
    KF_CL_ERR(CL_INVALID_DEVICE) KF_CL_ERR(CL_INVALID_CONTEXT) KF_CL_ERR(CL_INVALID_COMMAND_QUEUE)
    KF_CL_ERR(CL_INVALID_HOST_PTR) KF_CL_ERR(CL_INVALID_MEM_OBJECT) KF_CL_ERR(CL_INVALID_BINARY)
    KF_CL_ERR(CL_INVALID_BUILD_OPTIONS) KF_CL_ERR(CL_INVALID_PROGRAM) KF_CL_ERR(CL_INVALID_PROGRAM_EXECUTABLE)
    KF_CL_ERR(CL_INVALID_KERNEL_NAME) KF_CL_ERR(CL_INVALID_KERNEL_DEFINITION) KF_CL_ERR(CL_INVALID_KERNEL)
    KF_CL_ERR(CL_INVALID_ARG_INDEX) KF_CL_ERR(CL_INVALID_ARG_VALUE) KF_CL_ERR(CL_INVALID_ARG_SIZE)
    KF_CL_ERR(CL_INVALID_KERNEL_ARGS) KF_CL_ERR(CL_INVALID_WORK_DIMENSION) KF_CL_ERR(CL_INVALID_WORK_GROUP_SIZE)
    KF_CL_ERR(CL_INVALID_WORK_ITEM_SIZE) KF_CL_ERR(CL_INVALID_GLOBAL_OFFSET) KF_CL_ERR(CL_INVALID_EVENT_WAIT_LIST)
    KF_CL_ERR(CL_INVALID_OPERATION) KF_CL_ERR(CL_INVALID_BUFFER_SIZE) KF_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE)
#undef KF_CL_ERR
    default: return "CL_ERROR(" + std::to_string(err) + ")";
  }
}

/// Throws std::runtime_error "<what> failed: CL_..." unless `err` is CL_SUCCESS (the test is reported "error").
inline void Check(cl_int err, const std::string& what) {
  if (err != CL_SUCCESS) throw std::runtime_error(what + " failed: " + ErrorName(err));
}

/// One context and in-order command queue on the first device of the first platform, made on first use
/// and kept for the whole run (never released: the process ends right after the tests).
struct Device {
  cl_device_id id = nullptr;
  cl_context ctx = nullptr;
  cl_command_queue queue = nullptr;
  std::string name;
};

/// The run's device. KF_SKIPs the calling test when no OpenCL platform or device exists.
inline Device& GetDevice() {
  static Device* dev = [] {
    cl_platform_id platform = nullptr;
    cl_uint count = 0;
    if (clGetPlatformIDs(1, &platform, &count) != CL_SUCCESS || count == 0) KF_SKIP("no OpenCL platform");
    auto* d = new Device;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &d->id, &count) != CL_SUCCESS || count == 0) {
      delete d;
      KF_SKIP("no OpenCL device");
    }
    char name[256] = {0};
    clGetDeviceInfo(d->id, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
    d->name = name;
    cl_int err = CL_SUCCESS;
    d->ctx = clCreateContext(nullptr, 1, &d->id, nullptr, nullptr, &err);
    Check(err, "clCreateContext");
    d->queue = clCreateCommandQueue(d->ctx, d->id, 0, &err);
    Check(err, "clCreateCommandQueue");
    return d;
  }();
  return *dev;
}

/// Reads `path` (relative to the task directory, the test program's cwd) and builds it for the run's device
/// with `options` (e.g. "-cl-std=CL1.2"). Throws kf::sdk::BuildFailure when the source does not compile (a
/// candidate problem, scored build_error): what() names the file, the OpenCL error and the compiler's first
/// error; the whole build log travels in BuildFailure::log. std::runtime_error when the file cannot be read.
inline cl_program BuildProgramFromFile(const std::string& path, const std::string& options = "-cl-std=CL1.2") {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string src = ss.str();
  const char* text = src.c_str();
  Device& dev = GetDevice();
  cl_int err = CL_SUCCESS;
  cl_program prog = clCreateProgramWithSource(dev.ctx, 1, &text, nullptr, &err);
  Check(err, "clCreateProgramWithSource(" + path + ")");
  err = clBuildProgram(prog, 1, &dev.id, options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    size_t len = 0;
    clGetProgramBuildInfo(prog, dev.id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &len);
    std::string log(len, '\0');
    if (len) clGetProgramBuildInfo(prog, dev.id, CL_PROGRAM_BUILD_LOG, len, log.data(), nullptr);
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    std::string first = FirstCompilerError(log);
    throw BuildFailure("OpenCL build of " + path + " failed (" + ErrorName(err) + ")" +
                           (first.empty() ? std::string(" (the build log names no error)") : "; first error: " + first),
                       log);
  }
  return prog;
}

/// The kernel `name` of `prog`; throws Failure naming the kernel when the program has none by that name.
inline cl_kernel MakeKernel(cl_program prog, const char* name) {
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(prog, name, &err);
  if (err != CL_SUCCESS) throw Failure(std::string("kernel `") + name + "` not found in the program: " + ErrorName(err));
  return k;
}

/// A device buffer of `count` floats, optionally initialised from host data; released on destruction.
class Buffer {
 public:
  Buffer(size_t count, cl_mem_flags flags, const float* host = nullptr) : count_(count) {
    cl_int err = CL_SUCCESS;
    if (host) flags |= CL_MEM_COPY_HOST_PTR;
    mem_ = clCreateBuffer(GetDevice().ctx, flags, count * sizeof(float), const_cast<float*>(host), &err);
    Check(err, "clCreateBuffer(" + std::to_string(count * sizeof(float)) + " bytes)");
  }
  explicit Buffer(const std::vector<float>& host, cl_mem_flags flags = CL_MEM_READ_ONLY)
      : Buffer(host.size(), flags, host.data()) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { clReleaseMemObject(mem_); }
  /// The cl_mem handle (pass its address to clSetKernelArg).
  const cl_mem& mem() const { return mem_; }
  /// Blocking read of the whole buffer.
  std::vector<float> Read() const {
    std::vector<float> out(count_);
    Check(clEnqueueReadBuffer(GetDevice().queue, mem_, CL_TRUE, 0, count_ * sizeof(float), out.data(), 0, nullptr,
                              nullptr),
          "clEnqueueReadBuffer");
    return out;
  }

 private:
  size_t count_;
  cl_mem mem_ = nullptr;
};

/// Waits for everything queued on the run's device (the measure_runtime sync hook).
inline void Finish() { Check(clFinish(GetDevice().queue), "clFinish"); }

}  // namespace kf::sdk::ocl
