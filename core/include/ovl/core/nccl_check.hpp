// OVL_NCCL_CHECK(call): throws ovl::Error("nccl", ...) unless an NCCL call returns ncclSuccess (or ncclInProgress,
// which a non-blocking communicator returns while it finishes the call). The message carries ncclGetErrorString
// and, where NCCL recorded one, ncclGetLastError.
#pragma once

#include <nccl.h>

#include <string>

#include "ovl/error.hpp"

namespace ovl::detail {

[[noreturn]] inline void throw_nccl(const char* file, int line, const char* call, ncclResult_t result) {
  const char* last = ncclGetLastError(nullptr);
  std::string message = fmt::format("{} ({})", ncclGetErrorString(result), int(result));
  if (last != nullptr && last[0] != '\0') message += fmt::format(": {}", last);
  throw Error("nccl", call, std::string(basename(file)), line, std::move(message));
}

}  // namespace ovl::detail

#define OVL_NCCL_CHECK(call)                                                                  \
  do {                                                                                        \
    const ncclResult_t ovl_nccl_res_ = (call);                                                \
    if (ovl_nccl_res_ != ncclSuccess && ovl_nccl_res_ != ncclInProgress)                      \
      ::ovl::detail::throw_nccl(__FILE__, __LINE__, #call, ovl_nccl_res_);                    \
  } while (0)

namespace ovl::detail {

// ncclGroupStart() on construction; end() closes the group (and checks it). If an exception leaves the scope
// first, the destructor still closes the group, so the thread is never left inside one.
class NcclGroup {
 public:
  NcclGroup() { OVL_NCCL_CHECK(ncclGroupStart()); }
  void end() {
    open_ = false;
    OVL_NCCL_CHECK(ncclGroupEnd());
  }
  ~NcclGroup() {
    if (open_) (void)ncclGroupEnd();
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

 private:
  bool open_ = true;
};

}  // namespace ovl::detail
