// net.h — the control connection of transfer/PROTOCOL.md §1: plain TCP sockets (non-blocking, close-on-exec, no
// SIGPIPE), bounded reads of one message at a time, writes with a deadline, and the network interface that an
// address belongs to (to restrict UCX's devices to it).
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <atomic>
#include <string>

#include "wire/protocol.h"
#include "splitzip/splitzip.h"

namespace splitzip {
namespace transfer {
namespace net {

double now_s();

// Binds and listens on address:port (a numeric address). *bound_port is the port actually bound.
sz_status listen_tcp(const std::string& address, uint16_t port, int* fd, uint16_t* bound_port, std::string* error);
// Accepts one pending connection (non-blocking listener): a connected non-blocking socket, or -1 when none.
int accept_tcp(int listen_fd);
// Connects to host:port within timeout_s (each resolved address in turn).
sz_status connect_tcp(const std::string& host, uint16_t port, double timeout_s, int* fd, std::string* error);

// Reads one message into `reader` (reset first by the caller), blocking in poll until it is complete, the stream
// is invalid, the peer closed, `deadline` (now_s() clock) passed, or *stop became true.
sz_status read_message(int fd, proto::MessageReader* reader, double deadline, const std::atomic<bool>* stop,
                       std::string* why);
// Reads what is available without blocking; *complete tells whether a message is now complete. SZ_ERROR_IO with
// *why when the peer closed or the socket failed, another error when the bytes are not a valid message.
sz_status read_available(int fd, proto::MessageReader* reader, bool* complete, std::string* why);
// Writes all n bytes before `deadline`.
sz_status write_all(int fd, const void* data, size_t n, double deadline, std::string* why);

// True when the peer closed the connection or it failed; *extra is set when it sent bytes instead.
bool peer_closed(int fd, bool* extra);
// Half-closes and waits (at most linger_s) for the peer to close; the caller closes fd.
void linger(int fd, double linger_s);

// The name of the interface that holds the local address of socket fd ("lo", "eth0"), or "" with *error set.
bool local_interface(int fd, std::string* name, std::string* error);
// "address:port" of the peer of fd, for messages.
std::string peer_name(int fd);

}  // namespace net
}  // namespace transfer
}  // namespace splitzip
