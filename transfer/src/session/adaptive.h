// adaptive.h — the adaptive sender's choice, per message of a compressed session, between a frame and the raw values
// (SendOptions::adaptive, transfer/PROTOCOL.md §4).
//
// The model: a message of R raw bytes costs the codec threads R / E when compressed (E: their encode rate, all
// threads together, raw bytes per second) and R / H when sent raw (H: their rate at copying and hashing), and costs
// the link r R / L or R / L (r: frame bytes per raw byte, L: the link's rate in bytes per second). Sending a
// fraction f of the messages compressed, the pipeline carries R per max(codec, link) time, with
//   codec(f) = f / E + (1 - f) / H,   link(f) = (1 - f (1 - r)) / L   (per raw byte).
// The link's share falls with f and the codec's rises, so the best f is 1 when the codec keeps up with a link that
// carries only frames (1 / E <= r / L), 0 when compressing saves nothing (r >= 1) or the raw path alone already
// takes the codec threads longer than the link (H <= L), and otherwise where the two meet:
//   f = (1 / L - 1 / H) / (1 / E - 1 / H + (1 - r) / L).
// At that f the pipeline carries more than L raw bytes per second (the link's time per raw byte is below 1 / L),
// so a mixed session is never slower than a raw one in this model; it is exactly raw at f = 0. One more condition
// for a mix: messages go out in order, so a compressed message holds back the raw ones behind it for its encode
// time on one thread (threads / E per raw byte), while the link has at most `window` messages ahead of it to
// carry meanwhile (window / L). Where the encode takes longer (threads / E > window / L), each compressed message
// among raw ones would leave the link idle, and f is 0. (With f = 1 every message waits for the codec anyway, and
// the first rule already holds the codec threads together to the link's pace.)
//
// The receiver is a third stage of the same kind: its codec threads take R / D for a frame and R / G for a raw
// message (D, G: their decode and verify rates, all threads together, which its CREDIT messages report), so its
// time per raw byte f / D + (1 - f) / G rises with f like the sender's. The pipeline's time per raw byte is the
// largest of the three; where two rising lines meet the falling link line, the lower crossing binds: f is the
// smaller of the sender's fraction and the same function of the receiver's rates (without the ordering rule,
// which concerns the sender's encode only).
//
// The choice is made by a codec thread as it starts a message, and spreads the compressed ones evenly (an
// accumulator gains f per message and a message is compressed when it reaches 1). Estimates are running averages
// (weight 1/8 for the newest message) of what the codec threads measured: encode and copy times and frame sizes.
// Messages started before any compressed message finished are compressed, to measure E and r (the first message of
// each codec thread); after that, while the link's rate is not known yet, messages go raw (the choice that needs no
// estimate and is never slower than a raw send).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <mutex>

namespace splitzip {
namespace transfer {

// The best fraction of compressed messages for encode rate E (all `threads` together), raw path rate H (0 = not
// measured: free), link rate L (bytes per second), frame bytes per raw byte r and `window` messages in flight
// (threads 0: without the rule on one encode against the window, for the receiver's stage). In [0, 1].
inline double compressed_fraction(double E, double H, double L, double r, unsigned threads, unsigned window) {
  if (!(r < 1) || !(E > 0)) return 0;
  if (!(L > 0)) return 1;
  const double inv_h = H > 0 ? 1 / H : 0;
  if (1 / L <= inv_h) return 0;          // the raw path is codec-bound already: compression only adds to it
  if (1 / E <= r / L) return 1;          // the codec keeps up with a link of frames
  if ((double)threads / E > (double)window / L) return 0;  // one encode outlasts the link's work ahead of it
  const double den = 1 / E - inv_h + (1 - r) / L;
  if (!(den > 0)) return 1;
  return std::min(1.0, std::max(0.0, (1 / L - inv_h) / den));
}

// The running estimates and the choice; thread safe (codec threads choose and report, the session's thread sets the
// link's rate).
class AdaptiveChoice {
 public:
  AdaptiveChoice(unsigned threads, unsigned window) : threads_(threads), window_(window) {}

  // The link's rate in bytes per second (0 = not known yet).
  void set_link_rate(double rate) {
    std::lock_guard<std::mutex> lock(mu_);
    link_rate_ = rate;
  }

  // A codec thread finished a message of `raw_bytes` values' bytes in `seconds`, into `payload` bytes.
  void encoded(bool raw, size_t raw_bytes, size_t payload, double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    seconds = std::max(seconds, 1e-9);
    if (raw) {
      avg(&raw_in_, (double)raw_bytes);
      avg(&raw_s_, seconds);
      ++raw_n_;
    } else {
      avg(&comp_in_, (double)raw_bytes);
      avg(&comp_out_, (double)payload);
      avg(&comp_s_, seconds);
      ++comp_n_;
    }
  }

  // The receiver's codec threads finished frames of frame_bytes values' bytes in frame_s seconds and raw messages of
  // raw_bytes in raw_s (all threads together, since the previous report); zeros where none.
  void received(double frame_bytes, double frame_s, double raw_bytes, double raw_s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (frame_bytes > 0 && frame_s > 0) {
      avg(&rx_frame_in_, frame_bytes);
      avg(&rx_frame_s_, frame_s);
    }
    if (raw_bytes > 0 && raw_s > 0) {
      avg(&rx_raw_in_, raw_bytes);
      avg(&rx_raw_s_, raw_s);
    }
  }

  // Whether the message a codec thread starts now is compressed.
  bool compress() {
    std::lock_guard<std::mutex> lock(mu_);
    if (comp_n_ == 0) return true;
    if (!(link_rate_ > 0)) return false;
    const double link_rate = link_rate_;
    const double E = comp_in_ / comp_s_ * threads_;
    const double H = raw_n_ > 0 ? raw_in_ / raw_s_ * threads_ : 0;
    const double r = comp_in_ > 0 ? comp_out_ / comp_in_ : 1;
    fraction_ = compressed_fraction(E, H, link_rate, r, threads_, window_);
    if (rx_frame_s_ > 0) {  // the receiver's stage, once it reported its decode rate
      const double D = rx_frame_in_ / rx_frame_s_;
      const double G = rx_raw_s_ > 0 ? rx_raw_in_ / rx_raw_s_ : 0;
      fraction_ = std::min(fraction_, compressed_fraction(D, G, link_rate, r, 0, 1));
    }
    credit_ += fraction_;
    if (credit_ >= 1 - 1e-9) {
      credit_ -= 1;
      return true;
    }
    return false;
  }
  double fraction() {
    std::lock_guard<std::mutex> lock(mu_);
    return fraction_;
  }

 private:
  static void avg(double* a, double x) { *a = *a == 0 ? x : *a + (x - *a) / 8; }

  std::mutex mu_;
  unsigned threads_, window_;
  double link_rate_ = 0;
  double comp_in_ = 0, comp_out_ = 0, comp_s_ = 0, raw_in_ = 0, raw_s_ = 0;
  double rx_frame_in_ = 0, rx_frame_s_ = 0, rx_raw_in_ = 0, rx_raw_s_ = 0;
  uint64_t comp_n_ = 0, raw_n_ = 0;
  double credit_ = 0;
  double fraction_ = 1;
};

}  // namespace transfer
}  // namespace splitzip
