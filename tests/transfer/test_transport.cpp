// test_transport.cpp — the contract of the data transport interface (transfer/src/transport/transport.h) that the
// sessions rely on, checked for every transport through the interface alone, on loopback (UCX_TLS set by ctest):
// a message arrives whole with its length, only into a receive of its tag, in any receive of that tag; a longer
// message truncates the receive instead of overrunning it; a cancelled receive is released and can be posted again;
// wake() and the watched fd end a wait(); after a forced close, cancelling a send does not wait for the peer.
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "transport/transport.h"

namespace tr = splitzip::transfer;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (uint8_t)(seed + i * 131 + (i >> 8));
  return v;
}

// A receiving and a sending endpoint of one transport, connected as the sessions connect them.
struct Pair {
  std::unique_ptr<tr::Endpoint> rx, tx;
  std::string why;

  // The receiver posts its receives (post) before handing out its address, as receiver.cpp does.
  template <class Post>
  void open(const tr::Transport& t, size_t requests, Post post) {
    tr::EndpointConfig c;
    c.net_device = "lo";
    c.requests = requests;
    ASSERT_EQ(t.open(c, &rx, &why), SZ_OK) << why;
    post(rx.get());
    std::vector<uint8_t> address;
    ASSERT_EQ(rx->local_address(&address, &why), SZ_OK) << why;
    ASSERT_FALSE(address.empty());
    ASSERT_EQ(t.open(c, &tx, &why), SZ_OK) << why;
    ASSERT_EQ(tx->connect(address, &why), SZ_OK) << why;
  }
  // Progresses both ends until request id of `ep` completed or `seconds` passed.
  tr::Completion await(tr::Endpoint* ep, size_t id, size_t* length, std::string* failure, double seconds = 10) {
    const double deadline = now_s() + seconds;
    for (;;) {
      rx->progress();
      tx->progress();
      const tr::Completion c = ep->test(id, length, failure);
      if (c != tr::Completion::kPending || now_s() > deadline) return c;
      ep->wait(0.001);
    }
  }
};

class Transport : public ::testing::TestWithParam<const tr::Transport*> {};

TEST_P(Transport, AMessageArrivesWholeWithItsLength) {
  const tr::Transport& t = *GetParam();
  const uint64_t tag = (uint64_t)3 << 56 | 7;
  std::vector<uint8_t> in(1 << 20, 0);
  const std::vector<uint8_t> out = pattern(300001, 1);
  Pair p;
  p.open(t, 1, [&](tr::Endpoint* rx) {
    ASSERT_EQ(rx->register_memory(in.data(), in.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
    ASSERT_EQ(rx->post_recv(0, tag, in.data(), in.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  });
  ASSERT_EQ(p.tx->post_send(0, tag, out.data(), out.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  size_t length = 0;
  std::string failure;
  EXPECT_EQ(p.await(p.tx.get(), 0, nullptr, &failure), tr::Completion::kOk) << failure;
  ASSERT_EQ(p.await(p.rx.get(), 0, &length, &failure), tr::Completion::kOk) << failure;
  ASSERT_EQ(length, out.size());
  EXPECT_EQ(memcmp(in.data(), out.data(), out.size()), 0);
  EXPECT_FALSE(p.tx->failed(nullptr));
  p.tx->close(false, 0.5);
}

TEST_P(Transport, AReceiveTakesOnlyItsTagAndAnyMessageOfIt) {
  const tr::Transport& t = *GetParam();
  const uint64_t mine = (uint64_t)3 << 56 | 1, other = (uint64_t)3 << 56 | 2;
  std::vector<std::vector<uint8_t>> in(2, std::vector<uint8_t>(4096, 0));
  const std::vector<uint8_t> a = pattern(1000, 10), b = pattern(2000, 20), c = pattern(3000, 30);
  Pair p;
  p.open(t, 3, [&](tr::Endpoint* rx) {
    for (size_t i = 0; i < 2; ++i)
      ASSERT_EQ(rx->post_recv(i, mine, in[i].data(), in[i].size(), tr::MemoryType::kHost, &p.why), SZ_OK);
  });
  ASSERT_EQ(p.tx->post_send(0, other, a.data(), a.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  ASSERT_EQ(p.tx->post_send(1, mine, b.data(), b.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  ASSERT_EQ(p.tx->post_send(2, mine, c.data(), c.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  std::string failure;
  std::vector<size_t> lengths(2, 0);
  for (size_t i = 0; i < 2; ++i)
    ASSERT_EQ(p.await(p.rx.get(), i, &lengths[i], &failure), tr::Completion::kOk) << failure;
  // Both messages of the receives' tag arrived, one in each receive, whichever took which; the other tag's did not.
  std::vector<uint8_t> got_b = lengths[0] == b.size() ? in[0] : in[1];
  std::vector<uint8_t> got_c = lengths[0] == b.size() ? in[1] : in[0];
  EXPECT_EQ(lengths[0] + lengths[1], b.size() + c.size());
  EXPECT_EQ(memcmp(got_b.data(), b.data(), b.size()), 0);
  EXPECT_EQ(memcmp(got_c.data(), c.data(), c.size()), 0);
  // The other tag's message waited for a receive of its own.
  std::vector<uint8_t> got_a(4096, 0);
  size_t length = 0;
  ASSERT_EQ(p.rx->post_recv(2, other, got_a.data(), got_a.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  ASSERT_EQ(p.await(p.rx.get(), 2, &length, &failure), tr::Completion::kOk) << failure;
  EXPECT_EQ(length, a.size());
  EXPECT_EQ(memcmp(got_a.data(), a.data(), a.size()), 0);
  for (size_t i = 0; i < 3; ++i) p.await(p.tx.get(), i, nullptr, &failure, 2);
  p.tx->close(false, 0.5);
}

TEST_P(Transport, ALongerMessageTruncatesTheReceiveWithoutOverrunningIt) {
  const tr::Transport& t = *GetParam();
  const uint64_t tag = (uint64_t)3 << 56 | 9;
  std::vector<uint8_t> in(4096 + 64, 0xEE);  // 64 guard bytes past the receive's capacity
  const std::vector<uint8_t> out = pattern(100000, 3);
  Pair p;
  p.open(t, 1, [&](tr::Endpoint* rx) {
    ASSERT_EQ(rx->post_recv(0, tag, in.data(), 4096, tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  });
  ASSERT_EQ(p.tx->post_send(0, tag, out.data(), out.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  std::string failure;
  EXPECT_EQ(p.await(p.rx.get(), 0, nullptr, &failure), tr::Completion::kTruncated) << failure;
  for (size_t i = 4096; i < in.size(); ++i) ASSERT_EQ(in[i], 0xEE) << "written past the receive at " << i;
  p.await(p.tx.get(), 0, nullptr, &failure, 2);
  p.tx->close(false, 0.5);
}

TEST_P(Transport, ACancelledReceiveIsReleasedAndCanBePostedAgain) {
  const tr::Transport& t = *GetParam();
  const uint64_t tag = (uint64_t)3 << 56 | 11;
  std::vector<uint8_t> in(4096, 0);
  const std::vector<uint8_t> out = pattern(777, 5);
  Pair p;
  p.open(t, 1, [&](tr::Endpoint* rx) {
    ASSERT_EQ(rx->post_recv(0, tag, in.data(), in.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  });
  p.rx->cancel(0);
  p.rx->cancel(0);  // nothing in flight: nothing to do
  ASSERT_EQ(p.rx->post_recv(0, tag, in.data(), in.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  ASSERT_EQ(p.tx->post_send(0, tag, out.data(), out.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  size_t length = 0;
  std::string failure;
  ASSERT_EQ(p.await(p.rx.get(), 0, &length, &failure), tr::Completion::kOk) << failure;
  EXPECT_EQ(length, out.size());
  EXPECT_EQ(memcmp(in.data(), out.data(), out.size()), 0);
  p.await(p.tx.get(), 0, nullptr, &failure, 2);
  p.tx->close(false, 0.5);
}

TEST_P(Transport, WakeAndTheWatchedFdEndAWait) {
  const tr::Transport& t = *GetParam();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  tr::EndpointConfig c;
  c.net_device = "lo";
  c.watch_fd = fds[0];
  c.requests = 1;
  std::unique_ptr<tr::Endpoint> ep;
  std::string why;
  ASSERT_EQ(t.open(c, &ep, &why), SZ_OK) << why;
  ep->progress();
  double t0 = now_s();
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ep->wake();
  });
  ep->wait(10);
  waker.join();
  EXPECT_LT(now_s() - t0, 5.0) << "wake() did not end the wait";
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  t0 = now_s();
  ep->wait(10);
  EXPECT_LT(now_s() - t0, 5.0) << "a readable watched fd did not end the wait";
  close(fds[0]);
  close(fds[1]);
}

TEST_P(Transport, AfterAForcedCloseCancelDoesNotWaitForThePeer) {
  const tr::Transport& t = *GetParam();
  const uint64_t tag = (uint64_t)3 << 56 | 13;
  const std::vector<uint8_t> out = pattern(8 << 20, 7);
  Pair p;
  p.open(t, 1, [](tr::Endpoint*) {});  // no receive is posted: the peer does not take the message
  ASSERT_EQ(p.tx->post_send(0, tag, out.data(), out.size(), tr::MemoryType::kHost, &p.why), SZ_OK) << p.why;
  p.tx->progress();
  // What the sender does on an error (sender.cpp, cleanup(false)): a forced close, then cancel of every slot.
  const double t0 = now_s();
  p.tx->close(false, 0.5);
  p.tx->cancel(0);
  EXPECT_LT(now_s() - t0, 1.0);
}

std::vector<const tr::Transport*> transports() { return {&tr::ucx_transport()}; }

INSTANTIATE_TEST_SUITE_P(All, Transport, ::testing::ValuesIn(transports()),
                         [](const ::testing::TestParamInfo<const tr::Transport*>& i) {
                           return std::string(i.param->name());
                         });

}  // namespace
