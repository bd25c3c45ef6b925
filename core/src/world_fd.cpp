// The file-descriptor exchange of the multi-process symmetric buffers (cuMem handles shared between the processes
// of an MPI or NCCL-id World).
#include <cuda_runtime_api.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <span>

#include "ovl/cuda_check.hpp"
#include "world_internal.hpp"

namespace ovl::detail {

namespace {

struct FdMessage {
  int rank;
};

sockaddr_un socket_address(unsigned long long tag, int rank, socklen_t& length) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Abstract namespace (leading NUL): nothing to clean up in the file system.
  const int n = std::snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 2, "ovl-symm-%llx-%d", tag, rank);
  length = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + n);
  return addr;
}

}  // namespace

std::vector<int> exchange_fds(const World& world, int my_fd) {
  const int me = world.rank(), n = world.size();
  std::vector<int> fds(n, -1);
  fds[me] = my_fd;
  if (n == 1) return fds;
  // Rank 0's tag names every socket of this exchange.
  unsigned long long tag = 0;
  if (me == 0) tag = (std::random_device{}() * 0x9E3779B97F4A7C15ull) ^ (unsigned long long)getpid();
  std::memcpy(&tag, world.all_gather(std::as_bytes(std::span(&tag, 1)))[0].data(), sizeof(tag));

  const int sock = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  OVL_CHECK(sock >= 0, "socket(AF_UNIX) failed: {}", std::strerror(errno));
  socklen_t len = 0;
  sockaddr_un self = socket_address(tag, me, len);
  if (::bind(sock, reinterpret_cast<sockaddr*>(&self), len) != 0) {
    const int err = errno;
    ::close(sock);
    OVL_FAIL("bind of the fd-exchange socket of rank {} failed: {}", me, std::strerror(err));
  }
  world.barrier();  // every socket is bound before anyone sends
  for (int i = 1; i < n; ++i) {
    const int peer = (me + i) % n;
    sockaddr_un to = socket_address(tag, peer, len);
    FdMessage payload{me};
    iovec iov{&payload, sizeof(payload)};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_name = &to;
    msg.msg_namelen = len;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &my_fd, sizeof(int));
    if (::sendmsg(sock, &msg, 0) < 0) {
      const int err = errno;
      ::close(sock);
      OVL_FAIL("sendmsg of a buffer handle from rank {} to rank {} failed: {}", me, peer, std::strerror(err));
    }
  }
  for (int i = 1; i < n; ++i) {
    FdMessage payload{-1};
    iovec iov{&payload, sizeof(payload)};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    if (::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) < 0) {
      const int err = errno;
      ::close(sock);
      OVL_FAIL("recvmsg of a buffer handle on rank {} failed: {}", me, std::strerror(err));
    }
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    OVL_CHECK(c != nullptr && c->cmsg_type == SCM_RIGHTS && payload.rank >= 0 && payload.rank < n,
              "rank {} received a malformed buffer-handle message (rank {})", me, payload.rank);
    std::memcpy(&fds[payload.rank], CMSG_DATA(c), sizeof(int));
  }
  ::close(sock);
  world.barrier();
  return fds;
}
}  // namespace ovl::detail
