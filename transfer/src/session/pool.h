// pool.h — the codec threads of a pipeline: jobs are slot numbers, results go to a done queue that the (single)
// session thread drains after being woken.
#pragma once

#include <time.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace splitzip {
namespace transfer {

inline double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

class CodecPool {
 public:
  // work(worker, slot) runs on a codec thread; notify() is called after each job (thread safe on the caller's side).
  CodecPool(unsigned threads, std::function<void(unsigned, int)> work, std::function<void()> notify)
      : work_(std::move(work)), notify_(std::move(notify)), cpu_(threads, 0.0) {
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this, i] { run(i); });
  }
  ~CodecPool() { stop(); }

  void submit(int slot) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      todo_.push_back(slot);
    }
    cv_.notify_one();
  }
  bool pop_done(int* slot) {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.empty()) return false;
    *slot = done_.front();
    done_.pop_front();
    return true;
  }
  // Lets running jobs finish, drops queued ones, joins the threads.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      todo_.clear();
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  double cpu_seconds() {
    std::lock_guard<std::mutex> lock(mu_);
    double s = 0;
    for (double c : cpu_) s += c;
    return s;
  }

 private:
  void run(unsigned id) {
    for (;;) {
      int slot;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !todo_.empty(); });
        if (stop_) return;
        slot = todo_.front();
        todo_.pop_front();
      }
      const double t0 = thread_cpu_seconds();
      work_(id, slot);
      const double dt = thread_cpu_seconds() - t0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        cpu_[id] += dt;
        done_.push_back(slot);
      }
      notify_();
    }
  }

  std::function<void(unsigned, int)> work_;
  std::function<void()> notify_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> todo_, done_;
  std::vector<double> cpu_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

}  // namespace transfer
}  // namespace splitzip
