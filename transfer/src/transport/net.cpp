// net.cpp — see net.h.
#include "transport/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <chrono>

namespace splitzip {
namespace transfer {
namespace net {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

int poll_ms(double deadline) {
  const double left = deadline - now_s();
  if (left <= 0) return 0;
  return left > 0.1 ? 100 : (int)(left * 1000) + 1;  // wake every 100 ms to look at a stop flag
}

void set_socket_options(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// The address family and bytes of a socket address, IPv4-mapped IPv6 addresses as IPv4.
bool normalise(const sockaddr* sa, int* family, uint8_t bytes[16]) {
  if (sa->sa_family == AF_INET) {
    *family = AF_INET;
    memcpy(bytes, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
      *family = AF_INET;
      memcpy(bytes, a.s6_addr + 12, 4);
    } else {
      *family = AF_INET6;
      memcpy(bytes, a.s6_addr, 16);
    }
    return true;
  }
  return false;
}

bool interface_of(const sockaddr* sa, std::string* name, std::string* error) {
  int family = 0;
  uint8_t want[16];
  if (!normalise(sa, &family, want)) {
    *error = "not an IP address";
    return false;
  }
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) {
    *error = std::string("getifaddrs: ") + strerror(errno);
    return false;
  }
  bool found = false;
  for (ifaddrs* i = ifs; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    int f = 0;
    uint8_t have[16];
    if (!normalise(i->ifa_addr, &f, have) || f != family) continue;
    if (memcmp(have, want, family == AF_INET ? 4 : 16) == 0) {
      *name = i->ifa_name;
      found = true;
    }
  }
  freeifaddrs(ifs);
  if (!found) *error = "no network interface holds this address";
  return found;
}

}  // namespace

sz_status listen_tcp(const std::string& address, uint16_t port, int* out, uint16_t* bound_port, std::string* error) {
  addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(address.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    *error = "cannot use address '" + address + "': " + gai_strerror(rc);
    return SZ_ERROR_INVALID_ARGUMENT;
  }
  const int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    *error = std::string("socket: ") + strerror(errno);
    return SZ_ERROR_IO;
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (res->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
    *error = "cannot listen on " + address + ":" + std::to_string(port) + ": " + strerror(errno);
    freeaddrinfo(res);
    ::close(fd);
    return SZ_ERROR_IO;
  }
  freeaddrinfo(res);
  sockaddr_storage sa;
  socklen_t len = sizeof sa;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    *error = std::string("getsockname: ") + strerror(errno);
    ::close(fd);
    return SZ_ERROR_IO;
  }
  *bound_port = ntohs(sa.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&sa)->sin_port
                                              : reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port);
  *out = fd;
  return SZ_OK;
}

int accept_tcp(int listen_fd) {
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      set_socket_options(fd);
      return fd;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    return -1;
  }
}

sz_status connect_tcp(const std::string& host, uint16_t port, double timeout_s, int* out, std::string* error) {
  addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    *error = "cannot resolve address '" + host + "': " + gai_strerror(rc);
    return SZ_ERROR_INVALID_ARGUMENT;
  }
  const double deadline = now_s() + timeout_s;
  std::string last = "no address";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last = strerror(errno);
      continue;
    }
    int r = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      pollfd p = {fd, POLLOUT, 0};
      while ((r = poll(&p, 1, poll_ms(deadline))) == 0 && now_s() < deadline) {
      }
      if (r > 0) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        r = err == 0 ? 0 : -1;
        errno = err;
      } else {
        r = -1;
        errno = ETIMEDOUT;
      }
    }
    if (r == 0) {
      set_socket_options(fd);
      freeaddrinfo(res);
      *out = fd;
      return SZ_OK;
    }
    last = strerror(errno);
    ::close(fd);
  }
  freeaddrinfo(res);
  *error = "cannot connect to " + host + ":" + std::to_string(port) + ": " + last;
  return SZ_ERROR_IO;
}

sz_status read_available(int fd, proto::MessageReader* reader, bool* complete, std::string* why) {
  *complete = reader->complete();
  while (!*complete) {
    size_t room = 0;
    uint8_t* dst = reader->buffer(&room);
    const ssize_t n = recv(fd, dst, room, 0);
    if (n == 0) {
      *why = "the peer closed the connection";
      return SZ_ERROR_IO;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return SZ_OK;
      *why = std::string("the connection failed: ") + strerror(errno);
      return SZ_ERROR_IO;
    }
    const sz_status st = reader->commit((size_t)n, why);
    if (st != SZ_OK) return st;
    *complete = reader->complete();
  }
  return SZ_OK;
}

sz_status read_message(int fd, proto::MessageReader* reader, double deadline, const std::atomic<bool>* stop,
                       std::string* why) {
  for (;;) {
    bool complete = false;
    const sz_status st = read_available(fd, reader, &complete, why);
    if (st != SZ_OK || complete) return st;
    if (stop != nullptr && stop->load()) {
      *why = "the server is closing";
      return SZ_ERROR_IO;
    }
    if (now_s() >= deadline) {
      *why = "no complete message in time";
      return SZ_ERROR_IO;
    }
    pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, poll_ms(deadline));
  }
}

sz_status write_all(int fd, const void* data, size_t n, double deadline, std::string* why) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      *why = std::string("the connection failed: ") + strerror(errno);
      return SZ_ERROR_IO;
    }
    if (now_s() >= deadline) {
      *why = "the peer does not read";
      return SZ_ERROR_IO;
    }
    pollfd q = {fd, POLLOUT, 0};
    poll(&q, 1, poll_ms(deadline));
  }
  return SZ_OK;
}

bool peer_closed(int fd, bool* extra) {
  *extra = false;
  uint8_t b;
  const ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  if (n > 0) {
    *extra = true;
    return false;
  }
  return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

void linger(int fd, double linger_s) {
  if (fd < 0) return;
  shutdown(fd, SHUT_WR);
  const double deadline = now_s() + linger_s;
  uint8_t buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
    if (now_s() >= deadline) break;
    if (n < 0) {
      pollfd p = {fd, POLLIN, 0};
      poll(&p, 1, poll_ms(deadline));
    }
  }
}

bool local_interface(int fd, std::string* name, std::string* error) {
  sockaddr_storage sa;
  socklen_t len = sizeof sa;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    *error = std::string("getsockname: ") + strerror(errno);
    return false;
  }
  return interface_of(reinterpret_cast<const sockaddr*>(&sa), name, error);
}

std::string peer_name(int fd) {
  sockaddr_storage sa;
  socklen_t len = sizeof sa;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&sa)->sin_addr, host, sizeof host);
    port = ntohs(reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (sa.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&sa)->sin6_addr, host, sizeof host);
    port = ntohs(reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

}  // namespace net
}  // namespace transfer
}  // namespace splitzip
