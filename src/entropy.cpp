// entropy.cpp — entropy-coded frames (docs/FORMAT.md §4.10) and symbol tables (§5.3): parsing and checking tables,
// calibrating them from per-channel symbol histograms, the scalar reference coder (the oracle: reads the table file
// directly, one symbol at a time, exactly as the spec's pseudo-code) and the fast CPU coder: lookup tables derived by
// sz_symbol_table_prepare into caller memory (per channel its group and first escape slot, and where its group's rows
// of the next two tables start; per group and slot the decoded symbol, frequency and offset; per group and symbol the
// encoder's frequency and cumulative frequency), the values of a chunk split into symbol bytes and raw parts before
// coding and joined after decoding, the rANS lanes run by the AVX-512 or AVX2 kernels of entropy_avx512.cpp /
// entropy_avx2.cpp (as selected_isa allows; sz_set_cpu_isa) a step of 32 values at a time (the decoders step
// through up to three (AVX-512) or two (AVX2) chunks together) and by resumable scalar loops for the rest and for
// the portable build, and chunk-parallel decoding. The frames are the reference coder's, byte for byte, and both
// decoders give the same status on any input.
#include <math.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <thread>
#include <vector>

#include "entropy_image.h"
#include "entropy_kernels.h"
#include "internal.h"
#include "kernels.h"
#include "splitzip/splitzip_cuda.h"

using namespace splitzip;
using namespace splitzip::layout;
using splitzip::kernels::RansDecodeState;
using splitzip::kernels::RansEncodeState;
using splitzip::kernels::RansTables;

namespace {

// ---- symbol tables (§5.3) ------------------------------------------------------------------------------------

bool table_shape_ok(unsigned dtype, uint64_t tensors, uint64_t period, uint64_t groups) {
  if (!dtype_known(dtype)) return false;
  if (period < 1 || period > kMaxPeriod || tensors < 1 || tensors > kMaxTensors) return false;
  if (period * tensors > kMaxBookBases) return false;
  return groups >= 1 && groups <= kMaxGroups;
}

// Bytes of a table file; computed in 128 bits since the fields of an untrusted file may be anything.
unsigned __int128 table_bytes(unsigned B, uint64_t tensors, uint64_t period, uint64_t groups) {
  return (unsigned __int128)kSymbolTableHeader + (unsigned __int128)2 * tensors * period +
         (unsigned __int128)2 * groups * ((1u << B) + 1) + 4;
}

// The frequency of symbol index s (0..A, A = the escape) of group g, read from the file bytes.
inline uint32_t file_freq(const sz_symbol_table& t, uint32_t g, uint32_t s) {
  return load_u16(t.freq + 2 * ((uint64_t)g * ((1u << t.symbol_bits) + 1) + s));
}
inline uint32_t file_group(const sz_symbol_table& t, uint64_t channel) { return load_u16(t.group_of + 2 * channel); }

// The derived tables of the fast coder (in the caller's workspace).
struct Prepared {
  uint64_t id;
  uint32_t groups, a1;  // a1 = A + 1 symbol indices per group
  uint64_t channels;
  const uint32_t* enc;   // [g][s]: freq | cum << 16 (freq 0: the symbol is escaped)
  const uint32_t* dec;   // [g][slot]: s | (F_g[s] - 1) << 8 | (slot - Cum_g[s]) << 20 for the symbol index s whose
                         // range holds the slot, with s = 0 in the escape's slots: one lookup decodes a value
  const uint32_t* chan;  // [tensor * period + channel]: its group g | (4096 - F_g[A]) << 16, the escape's first slot
  const uint32_t* chan_dec;  // [tensor * period + channel]: g * 4096 + 4096 - F_g[A], the entry of dec of the
                             // group's first escape slot
  const uint32_t* chan_enc;  // [tensor * period + channel]: g * a1, the group's first entry of enc
};

constexpr size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

size_t workspace_bytes(uint32_t groups, unsigned B, uint64_t channels) {
  const size_t a1 = (1u << B) + 1;
  return 64 + align64(sizeof(Prepared)) + align64(4 * (size_t)groups * a1) +
         align64(4 * (size_t)groups * kRansProbTotal) + 3 * align64(4 * channels);
}

const Prepared* prepared_of(const sz_symbol_table* t) {
  const Prepared* p = (const Prepared*)t->prepared;
  if (p == nullptr || p->id != t->id || p->groups != t->groups || p->channels != (uint64_t)t->tensors * t->period)
    return nullptr;
  return p;
}

// ---- bit packing (§3), generic --------------------------------------------------------------------------------

inline uint32_t get_field(const uint8_t* base, uint64_t j, unsigned b) {
  uint64_t bit = j * b;
  uint32_t v = 0;
  for (unsigned i = 0; i < b; ++i, ++bit) v |= (uint32_t)((base[bit >> 3] >> (bit & 7)) & 1u) << i;
  return v;
}
inline void put_field(uint8_t* base, uint64_t j, unsigned b, uint32_t v) {
  uint64_t bit = j * b;
  for (unsigned i = 0; i < b; ++i, ++bit) {
    const uint8_t m = (uint8_t)(1u << (bit & 7));
    if ((v >> i) & 1u) base[bit >> 3] |= m;
    else base[bit >> 3] &= (uint8_t)~m;
  }
}
// A byte at a time (b <= 24), as layout's load_field reads them: for the fast coder; the destination zeroed first.
inline void or_field(uint8_t* base, uint64_t j, unsigned b, uint32_t v) {
  const uint64_t bit = j * b;
  uint8_t* p = base + (bit >> 3);
  const unsigned sh = (unsigned)(bit & 7), bytes = (sh + b + 7) >> 3;
  const uint64_t x = (uint64_t)v << sh;
  for (unsigned k = 0; k < bytes; ++k) p[k] |= (uint8_t)(x >> (8 * k));
}
// The padding fields after n fields of b bits (up to the group of 8) are all zero.
bool padding_zero(const uint8_t* base, uint64_t n, unsigned b) {
  for (uint64_t j = n; j % 8 != 0; ++j)
    if (get_field(base, j, b) != 0) return false;
  return true;
}

inline uint32_t load_value(const uint8_t* p, uint64_t j, unsigned vb) {
  uint32_t x = 0;
  for (unsigned b = 0; b < vb; ++b) x |= (uint32_t)p[j * vb + b] << (8 * b);
  return x;
}
inline void store_value(uint8_t* p, uint64_t j, unsigned vb, uint32_t x) {
  for (unsigned b = 0; b < vb; ++b) p[j * vb + b] = (uint8_t)(x >> (8 * b));
}

// ---- arguments -------------------------------------------------------------------------------------------------

// The table's frequencies and group ids obey §5.3 (a table filled in by hand must be as valid as a parsed one).
bool table_contents_ok(const sz_symbol_table& t) {
  const uint32_t A = 1u << t.symbol_bits;
  for (uint32_t g = 0; g < t.groups; ++g) {
    uint32_t sum = 0;
    for (uint32_t s = 0; s <= A; ++s) sum += file_freq(t, g, s);
    if (sum != kRansProbTotal || file_freq(t, g, A) == 0) return false;
  }
  for (uint64_t c = 0; c < (uint64_t)t.tensors * t.period; ++c)
    if (file_group(t, c) >= t.groups) return false;
  return true;
}

sz_status check_table_arg(const sz_symbol_table* table, sz_dtype dtype, uint32_t tensor) {
  if (table == nullptr || table->group_of == nullptr || table->freq == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (table->dtype != (uint8_t)dtype) return SZ_ERROR_BAD_CODEBOOK;
  if (!table_shape_ok(table->dtype, table->tensors, table->period, table->groups) ||
      table->symbol_bits != symbol_split(table->dtype).symbol_bits)
    return SZ_ERROR_BAD_CODEBOOK;
  if (tensor >= table->tensors) return SZ_ERROR_INVALID_ARGUMENT;
  return SZ_OK;
}

void write_header(uint8_t* dst, unsigned dtype, unsigned chunk_log2, uint32_t flags, uint64_t n, uint64_t sym_size,
                  uint64_t table_id, uint32_t tensor, uint32_t period, uint64_t row_map_id) {
  memset(dst, 0, kHeaderSize);
  store_u32(dst + kOffMagic, kFrameMagic);
  dst[kOffVersion] = kFormatVersionEntropy;
  dst[kOffDtype] = (uint8_t)dtype;
  dst[kOffChunkLog2] = (uint8_t)chunk_log2;
  store_u32(dst + kOffFlags, flags | kFlagEntropy);
  store_u64(dst + kOffNValues, n);
  store_u64(dst + kOffExpSectionSize, sym_size);
  store_u64(dst + kOffBookId, table_id);
  store_u32(dst + kOffBookTensor, tensor);
  store_u32(dst + kOffBookPeriod, period);
  if (flags & kFlagPaired) store_u64(dst + kOffRowMapId, row_map_id);
  detail::seal_frame_header(dst);
}

// ---- the encoder of one chunk (§4.10.4) -----------------------------------------------------------------------
// Codes the chunk's len symbols into buf[0, raw): states, X, escapes, words. Returns the record size, or 0 when
// the coded record would be larger than raw (the chunk is then stored raw). `lookup(j, symbol, &f, &cum)` gives
// the frequency and cumulative frequency of value j's symbol in its group, f = 0 when it is escaped, and the
// escape's in that case through `esc(j, &f, &cum)`.
template <class Sym, class Lookup, class Esc>
size_t encode_chunk(uint64_t len, size_t raw, Sym symbol, Lookup lookup, Esc esc, uint8_t* buf) {
  if (raw < kRansRecordHeader) return 0;
  uint32_t x[kRansLanes];
  for (unsigned l = 0; l < kRansLanes; ++l) x[l] = kRansLow;
  size_t wpos = raw, epos = kRansRecordHeader;
  for (uint64_t jj = len; jj-- > 0;) {
    const unsigned l = (unsigned)(jj & (kRansLanes - 1));
    const uint32_t v = symbol(jj);
    uint32_t f, cum;
    lookup(jj, v, &f, &cum);
    if (f == 0) {
      if (epos >= wpos) return 0;
      buf[epos++] = (uint8_t)v;
      esc(jj, &f, &cum);
    }
    uint32_t s = x[l];
    // Renormalisation without a branch (taken at random): the low word is stored in any case and kept if needed.
    const uint32_t need = rans_enc_renorm(s, f);
    if (wpos < epos + 2) {  // the record is full: it only goes on if no word is needed
      if (need) return 0;
    } else {
      store_u16(buf + wpos - 2, (uint16_t)s);
    }
    wpos -= 2 * need;
    s = need ? s >> kRansWordBits : s;
    x[l] = ((s / f) << kRansProbBits) + (s % f) + cum;
  }
  const size_t X = epos - kRansRecordHeader, words = raw - wpos;
  std::reverse(buf + kRansRecordHeader, buf + epos);  // escapes in increasing value order
  memmove(buf + kRansRecordHeader + X, buf + wpos, words);
  for (unsigned l = 0; l < kRansLanes; ++l) store_u32(buf + 4 * l, x[l]);
  store_u32(buf + kRansStatesBytes, (uint32_t)X);
  return kRansRecordHeader + X + words;
}

// ---- the fast coder: resumable scalar loops over a chunk's symbols, the vector kernels in between ----------------
// A chunk's symbols are split from the values (and the raw parts written) first and joined back last, so the rANS
// loops only see bytes; the vector kernels (entropy_avx2.cpp) take whole steps of 32 values, the scalar loops the
// rest, both on the same state (entropy_kernels.h).

RansTables rans_tables(const Prepared& p, uint32_t tensor, uint32_t period) {
  RansTables t;
  t.dec = p.dec;
  t.enc = p.enc;
  t.chan = p.chan + (uint64_t)tensor * period;
  t.chan_dec = p.chan_dec + (uint64_t)tensor * period;
  t.chan_enc = p.chan_enc + (uint64_t)tensor * period;
  t.a1 = p.a1;
  t.period = period;
  return t;
}

// Codes values s->j - 1 down to `stop` (§4.10.4). False when the record would not fit in buf[0, s->wpos).
bool rans_encode_scalar(const RansTables& t, unsigned B, RansEncodeState* s, uint64_t stop) {
  const uint32_t A = 1u << B, P = t.period, a1 = t.a1;
  const uint32_t* __restrict enc = t.enc;
  const uint32_t* __restrict chan = t.chan;
  const uint8_t* __restrict sym = s->sym;
  uint8_t* buf = s->buf;
  size_t epos = s->epos, wpos = s->wpos;
  uint32_t ch = s->ch;
  uint64_t jj = s->j;
  bool ok = true;
  while (jj > stop) {
    --jj;
    const unsigned l = (unsigned)(jj & (kRansLanes - 1));
    const uint32_t v = sym[jj];
    const uint64_t row = (uint64_t)(chan[ch] & 0xFFFFu) * a1;
    ch = ch == 0 ? P - 1 : ch - 1;
    uint32_t e = enc[row + v];
    if ((e & 0xFFFFu) == 0) {
      if (epos >= wpos) {
        ok = false;
        break;
      }
      buf[epos++] = (uint8_t)v;
      e = enc[row + A];
    }
    const uint32_t f = e & 0xFFFFu;
    uint32_t x = s->x[l];
    const uint32_t need = rans_enc_renorm(x, f);
    if (wpos < epos + 2) {
      if (need) {
        ok = false;
        break;
      }
    } else {
      store_u16(buf + wpos - 2, (uint16_t)x);
    }
    wpos -= 2 * need;
    x = need ? x >> kRansWordBits : x;
    s->x[l] = ((x / f) << kRansProbBits) + (x % f) + (e >> 16);
  }
  s->epos = epos;
  s->wpos = wpos;
  s->ch = ch;
  s->j = jj;
  return ok;
}

// The coded record of a chunk's len symbols in buf[0, raw) (as encode_chunk), channel ch0 for value 0; 0 when it
// does not fit.
size_t encode_record_fast(const RansTables& t, unsigned B, detail::Isa isa, const uint8_t* sym, uint64_t len,
                          uint64_t ch0, size_t raw, uint8_t* buf) {
  if (raw < kRansRecordHeader) return 0;
  RansEncodeState s;
  for (unsigned l = 0; l < kRansLanes; ++l) s.x[l] = kRansLow;
  s.buf = buf;
  s.epos = kRansRecordHeader;
  s.wpos = raw;
  s.j = len;
  s.ch = (uint32_t)((ch0 + len - 1) % t.period);
  s.sym = sym;
  if (!rans_encode_scalar(t, B, &s, len & ~(uint64_t)(kRansLanes - 1))) return 0;
#if defined(SPLITZIP_HAVE_AVX512_TU)
  if (isa >= detail::Isa::kAvx512) kernels::avx512::rans_encode_steps(t, B, &s);
  else
#endif
#if defined(SPLITZIP_HAVE_AVX2_TU)
  if (isa >= detail::Isa::kAvx2) kernels::avx2::rans_encode_steps(t, B, &s);
#endif
  (void)isa;
  if (!rans_encode_scalar(t, B, &s, 0)) return 0;
  const size_t X = s.epos - kRansRecordHeader, words = raw - s.wpos;
  std::reverse(buf + kRansRecordHeader, buf + s.epos);  // escapes in increasing value order
  memmove(buf + kRansRecordHeader + X, buf + s.wpos, words);
  for (unsigned l = 0; l < kRansLanes; ++l) store_u32(buf + 4 * l, s.x[l]);
  store_u32(buf + kRansStatesBytes, (uint32_t)X);
  return kRansRecordHeader + X + words;
}

// Decodes values s->j up to s->len (§4.10.3). False when the chunk is corrupt (a word or an escape missing, or an
// invalid escape); the final checks are the caller's.
bool rans_decode_scalar(const RansTables& t, unsigned B, RansDecodeState* s) {
  const uint32_t A = 1u << B, P = t.period, a1 = t.a1;
  const uint32_t* __restrict dec = t.dec;
  const uint32_t* __restrict enc = t.enc;
  const uint32_t* __restrict chan = t.chan;
  uint8_t* __restrict out = s->sym;
  const uint8_t* wp = s->wp;
  const uint8_t* const wend = s->wend;
  uint64_t q = s->q, j = s->j;
  uint32_t ch = s->ch, overrun = 0;
  uint32_t x[kRansLanes];
  memcpy(x, s->x, sizeof x);
  bool ok = true;
  for (; j < s->len; ++j) {
    const unsigned l = (unsigned)(j & (kRansLanes - 1));
    const uint32_t cw = chan[ch];
    ch = ch + 1 == P ? 0 : ch + 1;
    const uint64_t g = cw & 0xFFFFu;
    uint32_t xs = x[l];
    const uint32_t slot = xs & (kRansProbTotal - 1);
    const bool escape = slot >= (cw >> 16);
    const uint32_t d = dec[g * kRansProbTotal + slot];
    uint32_t v = d & 0xFFu;
    xs = (((d >> 8) & 0xFFFu) + 1) * (xs >> kRansProbBits) + (d >> 20);
    // Renormalisation without a branch (it is taken at random): the next word is loaded whenever one is left and
    // taken when the state needs it; needing one when none is left is remembered.
    const uint32_t need = xs < kRansLow, have = wp < wend;
    const uint32_t word = have ? load_u16(wp) : 0u;
    overrun |= need & (have ^ 1u);
    xs = need ? (xs << kRansWordBits) | word : xs;
    wp += 2 * (need & have);
    x[l] = xs;
    if (escape) {
      if (q == s->n_esc) {
        ok = false;
        break;
      }
      v = s->esc[q++];
      if (v >= A || (enc[g * a1 + v] & 0xFFFFu) != 0) {
        ok = false;
        break;
      }
    }
    out[j] = (uint8_t)v;
  }
  memcpy(s->x, x, sizeof x);
  s->wp = wp;
  s->q = q;
  s->j = j;
  s->ch = ch;
  return ok && overrun == 0;
}

// The symbols of a chunk's len values (BF16, FP16, FP32) into sym, and their raw parts into the raw section of the
// frame from value `first` on (a multiple of 256: the chunk's raw parts start at a byte). The padding after the
// frame's last value is zero.
void split_chunk(const uint8_t* values, uint64_t len, uint64_t first, DtypeTraits t, SymbolSplit sp, bool simd,
                 uint8_t* sym, uint8_t* rawsec) {
  const unsigned vb = t.value_bits / 8, R = sp.raw_bits;
  uint8_t* raw = rawsec + first / 8 * R;
  const uint64_t groups = len & ~(uint64_t)7;
  uint64_t done = 0;
#if defined(SPLITZIP_HAVE_AVX2_TU)
  if (simd) {
    if (vb == 2 && R == 8) kernels::avx2::split_bf16(values, (size_t)groups, sym, raw);
    else if (vb == 2) kernels::avx2::split_fp16(values, (size_t)groups, sym, raw);
    else kernels::avx2::split_fp32(values, (size_t)groups, sym, raw);
    done = groups;
  }
#endif
  (void)simd;
  if (done == 0 && R == 8) {
    for (; done < groups; ++done) {
      const uint32_t x = load_u16(values + 2 * done);
      sym[done] = (uint8_t)exponent_of(x, t);
      raw[done] = (uint8_t)rest_of(x, t);
    }
  }
  memset(raw + done / 8 * R, 0, (size_t)packed_bytes(len - done, R));
  for (uint64_t j = done; j < len; ++j) {
    const uint32_t x = load_value(values, j, vb);
    sym[j] = (uint8_t)exponent_of(x, t);
    or_field(raw, j, R, rest_of(x, t));
  }
}

// The inverse of split_chunk: len values from their symbols and the raw section. sym may be the last len bytes of
// out: every pass reads its symbols before it stores values over them, and stores only below the symbols still to
// be read.
void join_chunk(const uint8_t* sym, const uint8_t* rawsec, uint64_t len, uint64_t first, DtypeTraits t,
                SymbolSplit sp, bool simd, uint8_t* out) {
  const unsigned vb = t.value_bits / 8, R = sp.raw_bits;
  const uint8_t* raw = rawsec + first / 8 * R;
  const uint64_t groups = len & ~(uint64_t)7;
  uint64_t done = 0;
#if defined(SPLITZIP_HAVE_AVX2_TU)
  if (simd) {
    if (vb == 2 && R == 8) kernels::avx2::join_bf16(sym, raw, (size_t)groups, out);
    else if (vb == 2) kernels::avx2::join_fp16(sym, raw, (size_t)groups, out);
    else kernels::avx2::join_fp32(sym, raw, (size_t)groups, out);
    done = groups;
  }
#endif
  (void)simd;
  if (done == 0 && R == 8) {
    for (; done < groups; ++done) store_u16(out + 2 * done, (uint16_t)join(sym[done], raw[done], t));
  }
  for (uint64_t j = done; j < len; ++j) store_value(out, j, vb, join(sym[j], load_field(raw, j, R), t));
}

// The checksum of a chunk (H32, or LH32 with kFlagLaneHash in flags) with the build of the selected kernels.
inline uint32_t chunk_h32(detail::Isa isa, uint32_t flags, const void* data, size_t size) {
#if defined(SPLITZIP_HAVE_AVX512_TU)
  if (isa >= detail::Isa::kAvx512)
    return (flags & kFlagLaneHash) ? kernels::avx512::lh32(data, size) : kernels::avx512::h32(data, size);
#endif
#if defined(SPLITZIP_HAVE_AVX2_TU)
  if (isa >= detail::Isa::kAvx2)
    return (flags & kFlagLaneHash) ? kernels::avx2::lh32(data, size) : kernels::avx2::h32(data, size);
#endif
  (void)isa;
  return detail::chunk_checksum(flags, data, size);
}

// ---- paired rows (§4.10.6) ------------------------------------------------------------------------------------
// A row map that the call may use: every row a frame of `rows_needed` rows reaches pairs with an earlier one (the
// parser guarantees it; a map struct built by hand is checked here, so partners never lie outside the frame).
bool map_usable(const sz_row_map* m, uint64_t rows_needed) {
  if (m == nullptr || m->pair == nullptr || m->rows < rows_needed) return false;
  for (uint64_t r = 0; r < rows_needed; ++r)
    if (load_u32(m->pair + 4 * r) > r) return false;
  return true;
}

// Values [first, first + len) of a frame whose rows are P values, a row's piece at a time: `piece(i, run, partner)`
// for values [i, i + run) of one row, `partner` the offset of the paired row's value in the same column as value i
// (or -1 when the row has no pair). Stops at the first piece that returns false; returns whether none did.
template <class Piece>
bool for_each_row_piece(uint64_t first, uint64_t len, uint32_t P, const sz_row_map& m, Piece piece) {
  uint64_t i = first, r = first / P, col = first % P;
  const uint64_t end = first + len;
  while (i < end) {
    const uint64_t run = std::min<uint64_t>(P - col, end - i);
    const uint32_t pr = load_u32(m.pair + 4 * r);
    if (!piece(i, run, pr == 0 ? -1 : (int64_t)((uint64_t)(pr - 1) * P + col))) return false;
    i += run;
    ++r;
    col = 0;
  }
  return true;
}

// The paired symbols of values [first, first + len) of an FP8 frame whose rows are P values into sym; true when
// one of them is the pair symbol without equalling its partner (the chunk must then be stored raw).
bool pair_symbols(const uint8_t* src, uint64_t first, uint64_t len, uint32_t P, const sz_row_map& m, uint8_t* sym) {
  bool literal = false;
  for_each_row_piece(first, len, P, m, [&](uint64_t i, uint64_t run, int64_t partner) {
    const uint8_t* v = src + i;
    uint8_t* o = sym + (i - first);
    if (partner < 0) {
      memcpy(o, v, (size_t)run);
      literal |= memchr(v, (int)kPairSymbol, (size_t)run) != nullptr;
      return true;
    }
    const uint8_t* w = src + partner;
    unsigned lit = 0;
    for (uint64_t j = 0; j < run; ++j) {
      const bool eq = v[j] == w[j];
      o[j] = eq ? (uint8_t)kPairSymbol : v[j];
      lit |= (unsigned)(!eq && v[j] == kPairSymbol);
    }
    literal |= lit != 0;
    return true;
  });
  return literal;
}

// The pairs of a coded chunk's values [first, first + len) of out (a paired frame's output, whose values below
// `first` are final): each pair symbol takes its partner's value, in increasing order. SZ_ERROR_CORRUPT for a pair
// symbol in a row without a pair.
sz_status resolve_pairs(uint8_t* out, uint64_t first, uint64_t len, uint32_t P, const sz_row_map& m) {
  // A row's piece at a time (partners lie in earlier rows, already final): a select the compiler vectorises.
  const bool ok = for_each_row_piece(first, len, P, m, [&](uint64_t i, uint64_t run, int64_t partner) {
    uint8_t* o = out + i;
    if (partner < 0) return memchr(o, (int)kPairSymbol, (size_t)run) == nullptr;
    const uint8_t* w = out + partner;
    // 32 bytes at a time through local copies, so that the compiler sees no aliasing and selects without branches
    // (pair symbols fall at random: a branch per byte mispredicts half the time).
    uint64_t j = 0;
    for (; j + 32 <= run; j += 32) {
      uint8_t a[32], b[32];
      memcpy(a, o + j, 32);
      memcpy(b, w + j, 32);
      for (unsigned k = 0; k < 32; ++k) a[k] = a[k] == kPairSymbol ? b[k] : a[k];
      memcpy(o + j, a, 32);
    }
    for (; j < run; ++j) o[j] = o[j] == kPairSymbol ? w[j] : o[j];
    return true;
  });
  return ok ? SZ_OK : SZ_ERROR_CORRUPT;
}

// ---- compression (reference and fast share the frame layout; they differ in how they look symbols up) ------------

sz_status compress_entropy(const void* src_v, uint64_t n, sz_dtype dtype, const sz_symbol_table* table,
                           uint32_t tensor, const sz_row_map* map, const sz_params* params, void* dst_v,
                           size_t dst_capacity, size_t* dst_size, bool reference) {
  if ((src_v == nullptr && n != 0) || dst_v == nullptr || dst_size == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (!dtype_known((unsigned)dtype) || n >= kMaxValues) return SZ_ERROR_INVALID_ARGUMENT;
  sz_status s = check_table_arg(table, dtype, tensor);
  if (s != SZ_OK) return s;
  const bool paired = map != nullptr;
  if (paired && (!symbol_split((unsigned)dtype).whole || !map_usable(map, ceil_div(n, table->period))))
    return SZ_ERROR_INVALID_ARGUMENT;
  const Prepared* prep = reference ? nullptr : prepared_of(table);
  if (!reference && prep == nullptr) return SZ_ERROR_INVALID_ARGUMENT;  // sz_symbol_table_prepare first
  if (reference && !table_contents_ok(*table)) return SZ_ERROR_BAD_CODEBOOK;
  sz_params p;
  if ((s = detail::resolve_entropy_params(params, n, &p)) != SZ_OK) return s;

  const uint8_t* src = (const uint8_t*)src_v;
  uint8_t* dst = (uint8_t*)dst_v;
  const DtypeTraits t = dtype_traits((unsigned)dtype);
  const SymbolSplit sp = symbol_split((unsigned)dtype);
  const unsigned vb = t.value_bits / 8, B = sp.symbol_bits, A = 1u << B;
  const bool checksums = (p.flags & kFlagChecksums) != 0;
  const FrameOffsets off = entropy_frame_offsets(n, p.chunk_log2, checksums, sp.raw_bits, 0);
  if ((uint64_t)dst_capacity < off.exponents) return SZ_ERROR_DST_TOO_SMALL;
  const uint64_t S = (uint64_t)1 << p.chunk_log2, chunks = n_chunks(n, p.chunk_log2);
  const uint32_t P = table->period;
  const uint64_t ch_base = (uint64_t)tensor * P;

  // Raw section (§4.10.2): the reference writes it here, the fast coder chunk by chunk with the symbols.
  uint8_t* rawsec = dst + off.rest;
  if (reference && sp.raw_bits != 0) {
    memset(rawsec, 0, packed_bytes(n, sp.raw_bits));
    for (uint64_t i = 0; i < n; ++i) put_field(rawsec, i, sp.raw_bits, raw_of(load_value(src, i, vb), t, sp));
  }
  const detail::Isa isa = reference ? detail::Isa::kPortable : detail::selected_isa();
  const bool simd = isa >= detail::Isa::kAvx2;
  const RansTables tables = reference ? RansTables{} : rans_tables(*prep, tensor, P);

  // Chunk records. The reference builds a record in place when the raw size fits in dst, else in `local`; the fast
  // coder always in place, with the space left in dst as its limit when that is less than the raw size (the record
  // fits there exactly when the frame fits), and keeps a chunk's symbols in `local`.
  uint8_t local[(size_t)1 << kMaxChunkLog2];  // the largest raw record: 2^16 symbols of 8 bits
  uint8_t psym[(size_t)1 << kMaxChunkLog2];   // a paired chunk's symbols (FP8: bytes)
  uint64_t pos = 0;  // within the symbol section
  for (uint64_t c = 0; c < chunks; ++c) {
    const uint64_t len = chunk_len(n, p.chunk_log2, c), first = c * S;
    const uint8_t* values = src + first * vb;
    const size_t raw = (size_t)packed_bytes(len, B);
    uint8_t* at = dst + off.exponents + pos;
    const bool in_place = off.exponents + pos + raw <= (uint64_t)dst_capacity;
    uint8_t* buf = in_place || !reference ? at : local;
    const uint64_t ch0 = first % P;
    auto channel = [&](uint64_t j) { return ch_base + (ch0 + j) % P; };
    auto value_symbol = [&](uint64_t j) { return symbol_of(load_value(values, j, vb), t, sp); };
    // A paired chunk codes its paired symbols, unless one of them is a literal pair symbol (then it is raw).
    const bool literal = paired && pair_symbols(src, first, len, P, *map, psym);
    auto symbol = [&](uint64_t j) { return paired ? (uint32_t)psym[j] : value_symbol(j); };
    size_t size = 0;
    if (literal) {
      // stored raw below
    } else if (reference) {
      auto lookup = [&](uint64_t j, uint32_t v, uint32_t* f, uint32_t* cum) {
        const uint32_t g = file_group(*table, channel(j));
        uint32_t cu = 0;
        for (uint32_t q = 0; q < v; ++q) cu += file_freq(*table, g, q);
        *f = file_freq(*table, g, v);
        *cum = cu;
      };
      auto esc = [&](uint64_t j, uint32_t* f, uint32_t* cum) {
        const uint32_t g = file_group(*table, channel(j));
        *f = file_freq(*table, g, A);
        *cum = kRansProbTotal - *f;
      };
      size = encode_chunk(len, raw, symbol, lookup, esc, buf);
    } else {
      const uint8_t* sym = paired ? psym : values;  // FP8: the symbol is the value
      if (!sp.whole) {
        split_chunk(values, len, first, t, sp, simd, local, rawsec);
        sym = local;
      }
      const size_t limit = in_place ? raw : (size_t)(dst_capacity - (off.exponents + pos));
      size = encode_record_fast(tables, B, isa, sym, len, ch0, limit, buf);
    }
    uint64_t mode = kModeCoded;
    if (size == 0) {
      mode = kModeRaw;
      size = raw;
      if (!in_place) return SZ_ERROR_DST_TOO_SMALL;
      memset(at, 0, raw);
      if (B == 8) {
        for (uint64_t j = 0; j < len; ++j) at[j] = (uint8_t)value_symbol(j);
      } else {
        for (uint64_t j = 0; j < len; ++j) put_field(at, j, B, value_symbol(j));
      }
    } else if (!in_place && reference) {
      if (off.exponents + pos + size > (uint64_t)dst_capacity) return SZ_ERROR_DST_TOO_SMALL;
      memcpy(at, local, size);
    }
    pos += size;
    store_u64(dst + off.index + kIndexEntrySize * c, pos | (mode << kIndexModeShift));
    // A paired frame's coded chunks are checked on their symbols (§4.10.6).
    const uint8_t* checked = paired && mode == kModeCoded ? psym : values;
    if (checksums) store_u32(dst + off.checksums + kChecksumEntrySize * c, chunk_h32(isa, p.flags, checked, len * vb));
  }
  write_header(dst, (unsigned)dtype, p.chunk_log2, p.flags | (paired ? kFlagPaired : 0u), n, pos, table->id, tensor,
               P, paired ? map->id : 0);
  *dst_size = (size_t)(off.exponents + pos);
  return SZ_OK;
}

// ---- decompression ---------------------------------------------------------------------------------------------

struct Frame {
  detail::FrameHeader h;
  const uint8_t* src;
  uint8_t* dst;
  const sz_symbol_table* table;
  const sz_row_map* map;  // a paired frame's (§4.10.6), else nullptr
  const Prepared* prep;  // fast coder
  bool simd;             // fast coder: the AVX2 kernels (split, join, checksums; the rANS steps unless AVX-512's)
  detail::Isa isa;       // fast coder: the selected kernel set
};

sz_status open_frame(const void* src_v, size_t src_size, const sz_symbol_table* table, const sz_row_map* map,
                     void* dst_v, size_t dst_capacity, size_t* dst_size, bool reference, Frame* f) {
  if (src_v == nullptr || dst_size == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  f->src = (const uint8_t*)src_v;
  f->dst = (uint8_t*)dst_v;
  sz_status s = detail::parse_frame_header(f->src, src_size, &f->h);
  if (s != SZ_OK) return s;
  const detail::FrameHeader& h = f->h;
  if (!h.entropy) return SZ_ERROR_INVALID_ARGUMENT;  // versions 1 and 2: sz_decompress_book
  // Step 8 (§4.10.1).
  if (table == nullptr || table->id != h.book_id || table->dtype != h.dtype || table->period != h.period ||
      h.tensor >= table->tensors || table->group_of == nullptr || table->freq == nullptr ||
      !table_shape_ok(table->dtype, table->tensors, table->period, table->groups) ||
      table->symbol_bits != h.split.symbol_bits)
    return SZ_ERROR_BOOK_MISMATCH;
  f->map = nullptr;
  if (h.flags & kFlagPaired) {
    const uint64_t rows = ceil_div(h.n, h.period);
    if (map == nullptr || map->id != h.row_map_id || map->rows < rows) return SZ_ERROR_BOOK_MISMATCH;
    if (!map_usable(map, rows)) return SZ_ERROR_INVALID_ARGUMENT;  // a hand-made map struct with a forward pair
    f->map = map;
  }
  f->table = table;
  f->prep = nullptr;
  f->isa = reference ? detail::Isa::kPortable : detail::selected_isa();
  f->simd = f->isa >= detail::Isa::kAvx2;
  if (!reference && (f->prep = prepared_of(table)) == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (reference && !table_contents_ok(*table)) return SZ_ERROR_BOOK_MISMATCH;
  const uint64_t out_size = h.n * (h.t.value_bits / 8);
  if (out_size > (uint64_t)dst_capacity) return SZ_ERROR_DST_TOO_SMALL;
  if (f->dst == nullptr && out_size != 0) return SZ_ERROR_INVALID_ARGUMENT;
  if ((s = detail::check_frame_index(f->src, h)) != SZ_OK) return s;
  // The raw section's padding (only the last group of the frame can have any).
  if (h.split.raw_bits != 0 && !padding_zero(f->src + h.off.rest, h.n, h.split.raw_bits)) return SZ_ERROR_CORRUPT;
  return SZ_OK;
}

inline uint64_t record_begin(const Frame& f, uint64_t c) {
  return c == 0 ? 0 : load_u64(f.src + f.h.off.index + kIndexEntrySize * (c - 1)) & kIndexEndMask;
}

// The reference decoder of chunk c: §4.10.3 step by step, table lookups by scanning the file's frequencies.
sz_status decode_chunk_reference(const Frame& f, uint64_t c) {
  const detail::FrameHeader& h = f.h;
  const sz_symbol_table& tb = *f.table;
  const DtypeTraits t = h.t;
  const SymbolSplit sp = h.split;
  const unsigned vb = t.value_bits / 8, B = sp.symbol_bits, A = 1u << B;
  const uint64_t entry = load_u64(f.src + h.off.index + kIndexEntrySize * c);
  const uint64_t begin = record_begin(f, c), end = entry & kIndexEndMask;
  const uint64_t len = chunk_len(h.n, h.chunk_log2, c), first = c << h.chunk_log2;
  const uint8_t* rec = f.src + h.off.exponents + begin;
  const uint8_t* rawsec = f.src + h.off.rest;
  uint8_t* out = f.dst + first * vb;
  auto raw_part = [&](uint64_t j) { return sp.raw_bits ? get_field(rawsec, first + j, sp.raw_bits) : 0u; };
  if ((entry >> kIndexModeShift) == kModeRaw) {
    if (!padding_zero(rec, len, B)) return SZ_ERROR_CORRUPT;
    for (uint64_t j = 0; j < len; ++j)
      store_value(out, j, vb, join_symbol(get_field(rec, j, B), raw_part(j), t, sp));
  } else {
    uint32_t x[kRansLanes];
    for (unsigned l = 0; l < kRansLanes; ++l) {
      x[l] = load_u32(rec + 4 * l);
      if (x[l] < kRansLow) return SZ_ERROR_CORRUPT;
    }
    const uint64_t X = load_u32(rec + kRansStatesBytes);
    const uint8_t* esc = rec + kRansRecordHeader;
    const uint8_t* words = esc + X;
    const uint64_t w = (end - begin - kRansRecordHeader - X) / 2;
    uint64_t pw = 0, q = 0;
    for (uint64_t j = 0; j < len; ++j) {
      const unsigned l = (unsigned)(j % kRansLanes);
      const uint32_t g = file_group(tb, (uint64_t)h.tensor * h.period + (first + j) % h.period);
      const uint32_t slot = x[l] % kRansProbTotal;
      uint32_t s = 0, cum = 0, fr = file_freq(tb, g, 0);
      while (s < A && !(slot < cum + fr)) {  // the frequencies sum to 2^12 > slot: this ends at s <= A
        cum += fr;
        ++s;
        fr = file_freq(tb, g, s);
      }
      x[l] = fr * (x[l] >> kRansProbBits) + slot - cum;
      if (x[l] < kRansLow) {
        if (pw == w) return SZ_ERROR_CORRUPT;
        x[l] = (x[l] << kRansWordBits) | load_u16(words + 2 * pw);
        ++pw;
      }
      uint32_t sym = s;
      if (s == A) {
        if (q == X) return SZ_ERROR_CORRUPT;
        sym = esc[q++];
        if (sym >= A || file_freq(tb, g, sym) != 0) return SZ_ERROR_CORRUPT;
      }
      store_value(out, j, vb, join_symbol(sym, raw_part(j), t, sp));
    }
    if (pw != w || q != X) return SZ_ERROR_CORRUPT;
    for (unsigned l = 0; l < kRansLanes; ++l)
      if (x[l] != kRansLow) return SZ_ERROR_CORRUPT;
  }
  if (h.checksums &&
      detail::chunk_checksum(h.flags, out, len * vb) != load_u32(f.src + h.off.checksums + kChecksumEntrySize * c))
    return SZ_ERROR_CHECKSUM;
  if (f.map != nullptr && (entry >> kIndexModeShift) != kModeRaw) return resolve_pairs(f.dst, first, len, h.period, *f.map);
  return SZ_OK;
}

// The fast decoder of a chunk in three phases, so that the vector kernels can run several coded chunks side by side:
// chunk_begin checks what it can before decoding and sets up the coded chunk's state, the kernels take whole steps,
// chunk_end decodes the rest with scalar code, makes the final checks, joins the values and checks the checksum.
struct ChunkWork {
  uint64_t len, first;
  uint8_t* out;
  const uint8_t* sym;  // the chunk's symbols once decoded (the values for FP8)
  bool coded;          // a coded record, decoded through s
  bool failed;         // a kernel met an invalid escape
  RansDecodeState s;
};

sz_status chunk_begin(const Frame& f, uint64_t c, ChunkWork* w) {
  const detail::FrameHeader& h = f.h;
  const unsigned vb = h.t.value_bits / 8, B = h.split.symbol_bits;
  const uint64_t entry = load_u64(f.src + h.off.index + kIndexEntrySize * c);
  const uint64_t begin = record_begin(f, c), end = entry & kIndexEndMask;
  const uint64_t len = chunk_len(h.n, h.chunk_log2, c), first = c << h.chunk_log2;
  const uint8_t* rec = f.src + h.off.exponents + begin;
  uint8_t* out = f.dst + first * vb;
  w->len = len;
  w->first = first;
  w->out = out;
  w->failed = false;
  w->coded = (entry >> kIndexModeShift) != kModeRaw;
  if (!w->coded) {
    if (!padding_zero(rec, len, B)) return SZ_ERROR_CORRUPT;
    // FP8: the symbol is the value; the others' symbols go to the last len bytes of the chunk's output (see
    // chunk_end), unpacked there unless they are bytes.
    uint8_t* local = out + len * (vb - 1);
    if (h.split.whole) {
      memcpy(out, rec, (size_t)len);
      w->sym = out;
    } else if (B != 8) {
      for (uint64_t j = 0; j < len; ++j) local[j] = (uint8_t)load_field(rec, j, B);
      w->sym = local;
    } else {
      w->sym = rec;
    }
    return SZ_OK;
  }
  uint8_t* sym = h.split.whole ? out : out + len * (vb - 1);
  w->sym = sym;
  RansDecodeState& s = w->s;
  uint32_t low = 0xFFFFFFFFu;
  for (unsigned l = 0; l < kRansLanes; ++l) {
    s.x[l] = load_u32(rec + 4 * l);
    low = s.x[l] < low ? s.x[l] : low;
  }
  if (low < kRansLow) return SZ_ERROR_CORRUPT;
  s.n_esc = load_u32(rec + kRansStatesBytes);
  s.esc = rec + kRansRecordHeader;
  s.wp = s.esc + s.n_esc;
  s.wend = rec + (end - begin);
  s.q = 0;
  s.j = 0;
  s.len = len;
  s.ch = (uint32_t)(first % h.period);
  s.sym = sym;
  return SZ_OK;
}

// The vector kernels' whole steps of n coded chunks side by side (1 <= n <= the ISA's ways): the mask of the chunks
// with an invalid escape. Without a vector set, none: the scalar code takes the whole chunks.
unsigned lockstep_kernels(const Frame& f, const RansTables& t, RansDecodeState* const* run, unsigned n) {
  const unsigned B = f.h.split.symbol_bits;
#if defined(SPLITZIP_HAVE_AVX512_TU)
  if (f.isa >= detail::Isa::kAvx512) return kernels::avx512::rans_decode_steps_n(t, B, run, n);
#endif
#if defined(SPLITZIP_HAVE_AVX2_TU)
  if (f.isa >= detail::Isa::kAvx2) return kernels::avx2::rans_decode_steps_n(t, B, run, n);
#endif
  (void)t;
  (void)run;
  (void)n;
  (void)B;
  return 0;
}

sz_status chunk_end(const Frame& f, const RansTables& t, uint64_t c, ChunkWork* w) {
  const detail::FrameHeader& h = f.h;
  const unsigned vb = h.t.value_bits / 8;
  if (w->coded) {
    RansDecodeState& s = w->s;
    if (w->failed || !rans_decode_scalar(t, h.split.symbol_bits, &s) || s.wp != s.wend || s.q != s.n_esc)
      return SZ_ERROR_CORRUPT;
    for (unsigned l = 0; l < kRansLanes; ++l)
      if (s.x[l] != kRansLow) return SZ_ERROR_CORRUPT;
  }
  // The values are rebuilt in place from the front: value j's bytes end at or before symbol j's, so no symbol is
  // overwritten before it is read.
  if (!h.split.whole) join_chunk(w->sym, f.src + h.off.rest, w->len, w->first, h.t, h.split, f.simd, w->out);
  if (h.checksums &&
      chunk_h32(f.isa, h.flags, w->out, w->len * vb) != load_u32(f.src + h.off.checksums + kChecksumEntrySize * c))
    return SZ_ERROR_CHECKSUM;
  return SZ_OK;
}

// Decodes chunks lo..hi-1 in order; the first failing chunk's index and status into *fc and *fs.
void decode_chunks_fast(const Frame& f, uint64_t lo, uint64_t hi, uint64_t* fc, sz_status* fs) {
  const RansTables t = rans_tables(*f.prep, f.h.tensor, f.h.period);
  // Chunks side by side in the vector kernels (their steps are independent latency chains). The selected set is
  // always one that is compiled in.
  constexpr unsigned kWays = std::max(kernels::avx2::kDecodeWays, kernels::avx512::kDecodeWays);
  const unsigned ways = f.isa >= detail::Isa::kAvx512 ? kernels::avx512::kDecodeWays
                        : f.isa >= detail::Isa::kAvx2 ? kernels::avx2::kDecodeWays
                                                      : 1;
  ChunkWork w[kWays];
  for (uint64_t c = lo; c < hi;) {
    const unsigned n = (unsigned)std::min<uint64_t>(ways, hi - c);
    sz_status st[kWays];
    RansDecodeState* run[kWays];
    unsigned of[kWays], coded = 0;  // the coded chunks among them: run[i] is chunk c + of[i]'s state
    for (unsigned k = 0; k < n; ++k) {
      st[k] = chunk_begin(f, c + k, &w[k]);
      if (st[k] == SZ_OK && w[k].coded) {
        run[coded] = &w[k].s;
        of[coded++] = k;
      }
    }
    if (coded >= 2) {
      const unsigned failed = lockstep_kernels(f, t, run, coded);
      for (unsigned i = 0; i < coded; ++i) w[of[i]].failed = (failed >> i & 1u) != 0;
    }
    for (unsigned k = 0; k < n; ++k) {
      if (st[k] == SZ_OK && w[k].coded && !w[k].failed) {  // alone (the others' steps ended first, or n = 1)
        RansDecodeState* one[1] = {&w[k].s};
        w[k].failed = lockstep_kernels(f, t, one, 1) != 0;
      }
      if (st[k] == SZ_OK) st[k] = chunk_end(f, t, c + k, &w[k]);
      if (st[k] != SZ_OK) {
        *fc = c + k;
        *fs = st[k];
        return;
      }
    }
    c += n;
  }
}

// The fast decoder's pairs (§4.10.6), after its chunks are decoded: chunks 0..hi-1 in order (partners precede), as
// the reference resolves each chunk after decoding it; the first failing chunk's status.
sz_status resolve_frame_pairs(const Frame& f, uint64_t hi) {
  for (uint64_t c = 0; c < hi; ++c) {
    if ((load_u64(f.src + f.h.off.index + kIndexEntrySize * c) >> kIndexModeShift) == kModeRaw) continue;
    const uint64_t first = c << f.h.chunk_log2;
    const sz_status s = resolve_pairs(f.dst, first, chunk_len(f.h.n, f.h.chunk_log2, c), f.h.period, *f.map);
    if (s != SZ_OK) return s;
  }
  return SZ_OK;
}

sz_status decompress_entropy(const void* src, size_t src_size, const sz_symbol_table* table, const sz_row_map* map,
                             void* dst, size_t dst_capacity, size_t* dst_size, unsigned threads, bool reference) {
  Frame f;
  sz_status s = open_frame(src, src_size, table, map, dst, dst_capacity, dst_size, reference, &f);
  if (s != SZ_OK) return s;
  const uint64_t chunks = f.h.chunks;
  const uint64_t out_size = f.h.n * (f.h.t.value_bits / 8);
  if (reference) {
    for (uint64_t c = 0; c < chunks; ++c)
      if ((s = decode_chunk_reference(f, c)) != SZ_OK) return s;
  } else {
    // Threads: one per MiB of output at most; each takes a contiguous run of chunks; the error of the lowest
    // failing chunk is the call's, as a single thread would report it.
    uint64_t nt = threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads;
    nt = std::min<uint64_t>(std::min<uint64_t>(nt, std::max<uint64_t>(1, out_size >> 20)), std::max<uint64_t>(1, chunks));
    nt = std::min<uint64_t>(nt, 256);
    std::vector<uint64_t> fail_chunk;
    std::vector<sz_status> fail_status;
    auto run = [&](uint64_t lo, uint64_t hi, uint64_t* fc, sz_status* fs) {
      decode_chunks_fast(f, lo, hi, fc, fs);
    };
    uint64_t fc = chunks;  // the first chunk that failed to decode, and its status
    sz_status fs = SZ_OK;
    if (nt <= 1) {
      run(0, chunks, &fc, &fs);
    } else {
      try {
        fail_chunk.assign(nt, chunks);
        fail_status.assign(nt, SZ_OK);
        std::vector<std::thread> pool;
        pool.reserve(nt - 1);
        for (uint64_t i = 1; i < nt; ++i)
          pool.emplace_back(run, chunks * i / nt, chunks * (i + 1) / nt, &fail_chunk[i], &fail_status[i]);
        run(0, chunks / nt, &fail_chunk[0], &fail_status[0]);
        for (auto& th : pool) th.join();
      } catch (...) {
        return SZ_ERROR_OUT_OF_MEMORY;
      }
      for (uint64_t i = 0; i < nt; ++i)
        if (fail_status[i] != SZ_OK && fail_chunk[i] < fc) {
          fc = fail_chunk[i];
          fs = fail_status[i];
        }
    }
    // A pair symbol in an unpaired row before the first failing chunk is the earlier error.
    if (f.map != nullptr && (s = resolve_frame_pairs(f, fc)) != SZ_OK) return s;
    if (fs != SZ_OK) return fs;
  }
  *dst_size = (size_t)out_size;
  return SZ_OK;
}

// ---- calibration ------------------------------------------------------------------------------------------------

// Quantises a group's counts to 12-bit frequencies: the escape gets the Good-Turing estimate of the unseen mass
// (symbols seen once / all, at least 1/4096); every seen symbol at least 1; the rest by the counts, then the sum
// fixed one step at a time where it costs the fewest bits. freq: A + 1 entries.
void quantise(const double* counts, unsigned A, uint32_t* freq) {
  double total = 0, once = 0;
  unsigned seen = 0;
  for (unsigned s = 0; s < A; ++s) {
    total += counts[s];
    if (counts[s] > 0) ++seen;
    if (counts[s] > 0 && counts[s] <= 1.5) once += 1;
  }
  for (unsigned s = 0; s <= A; ++s) freq[s] = 0;
  if (total <= 0) {  // no samples: every symbol escapes
    freq[A] = kRansProbTotal;
    return;
  }
  uint32_t fe = (uint32_t)llround(kRansProbTotal * once / total);
  fe = std::max<uint32_t>(1, std::min<uint32_t>(fe, 64));
  const int64_t target = (int64_t)kRansProbTotal - fe;
  int64_t sum = 0;
  for (unsigned s = 0; s < A; ++s) {
    if (counts[s] <= 0) continue;
    freq[s] = (uint32_t)std::max<int64_t>(1, llround(counts[s] * (double)target / total));
    sum += freq[s];
  }
  (void)seen;
  while (sum != target) {
    unsigned best = A;
    double best_cost = 0;
    for (unsigned s = 0; s < A; ++s) {
      if (freq[s] == 0) continue;
      if (sum > target) {  // take a slot where it costs least
        if (freq[s] <= 1) continue;
        const double cost = counts[s] * log2((double)freq[s] / (freq[s] - 1));
        if (best == A || cost < best_cost) best = s, best_cost = cost;
      } else {  // give a slot where it gains most
        const double gain = counts[s] * log2((double)(freq[s] + 1) / freq[s]);
        if (best == A || gain > best_cost) best = s, best_cost = gain;
      }
    }
    if (sum > target) --freq[best], --sum;
    else ++freq[best], ++sum;
  }
  freq[A] = fe;
}

}  // namespace

// ---- the device image of a table (entropy_image.h), for the CUDA decoder ----------------------------------------

namespace {

// The image's shape: the sum of the tensors' distinct group counts; false if the table is not a valid one.
bool image_shape(const sz_symbol_table* t, uint64_t* lists_total) {
  if (t == nullptr || t->group_of == nullptr || t->freq == nullptr ||
      !table_shape_ok(t->dtype, t->tensors, t->period, t->groups) ||
      t->symbol_bits != symbol_split(t->dtype).symbol_bits || !table_contents_ok(*t))
    return false;
  std::vector<uint32_t> last(t->groups, ~0u);  // the last tensor that used each group
  uint64_t total = 0;
  for (uint32_t k = 0; k < t->tensors; ++k)
    for (uint32_t c = 0; c < t->period; ++c) {
      const uint32_t g = file_group(*t, (uint64_t)k * t->period + c);
      if (last[g] != k) {
        last[g] = k;
        ++total;
      }
    }
  *lists_total = total;
  return true;
}

}  // namespace

extern "C" {

SZ_API size_t sz_symbol_table_file_size(sz_dtype dtype, uint32_t tensors, uint32_t period, uint32_t groups) {
  if (!table_shape_ok((unsigned)dtype, tensors, period, groups)) return 0;
  return (size_t)table_bytes(symbol_split((unsigned)dtype).symbol_bits, tensors, period, groups);
}

SZ_API sz_status sz_symbol_table_parse(const void* src_v, size_t src_size, sz_symbol_table* table) {
  if (src_v == nullptr || table == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* src = (const uint8_t*)src_v;
  if (src_size < kSymbolTableHeader + 4) return SZ_ERROR_SRC_TRUNCATED;
  const uint32_t period = load_u32(src + 8), tensors = load_u32(src + 12), groups = load_u32(src + 16);
  const unsigned dtype = src[5];
  const unsigned B = dtype_known(dtype) ? symbol_split(dtype).symbol_bits : 8;
  const unsigned __int128 size = table_bytes(B, tensors, period, groups);
  if ((unsigned __int128)src_size < size) return SZ_ERROR_SRC_TRUNCATED;
  if (load_u32(src) != kSymbolTableMagic) return SZ_ERROR_BAD_MAGIC;
  if (src[4] != kSymbolTableVersion) return SZ_ERROR_UNSUPPORTED_VERSION;
  const size_t body = (size_t)size - 4;
  const uint64_t id = detail::h64(src, body);
  if (load_u32(src + body) != (uint32_t)id) return SZ_ERROR_CHECKSUM;
  if (!dtype_known(dtype)) return SZ_ERROR_UNSUPPORTED_DTYPE;
  if (!table_shape_ok(dtype, tensors, period, groups) || src[6] != B || src[7] != kRansProbBits ||
      load_u32(src + 20) != 0)
    return SZ_ERROR_CORRUPT;
  sz_symbol_table t;
  memset(&t, 0, sizeof t);
  t.dtype = (uint8_t)dtype;
  t.symbol_bits = (uint8_t)B;
  t.period = period;
  t.tensors = tensors;
  t.groups = groups;
  t.id = id;
  t.group_of = src + kSymbolTableHeader;
  t.freq = t.group_of + 2 * (uint64_t)tensors * period;
  for (uint64_t c = 0; c < (uint64_t)tensors * period; ++c)
    if (file_group(t, c) >= groups) return SZ_ERROR_CORRUPT;
  const uint32_t A = 1u << B;
  for (uint32_t g = 0; g < groups; ++g) {
    uint32_t sum = 0;
    for (uint32_t s = 0; s <= A; ++s) sum += file_freq(t, g, s);
    if (sum != kRansProbTotal || file_freq(t, g, A) == 0) return SZ_ERROR_CORRUPT;
  }
  *table = t;
  return SZ_OK;
}

SZ_API size_t sz_symbol_table_workspace_size(const sz_symbol_table* table) {
  if (table == nullptr || !table_shape_ok(table->dtype, table->tensors, table->period, table->groups)) return 0;
  return workspace_bytes(table->groups, symbol_split(table->dtype).symbol_bits,
                         (uint64_t)table->tensors * table->period);
}

SZ_API sz_status sz_symbol_table_prepare(sz_symbol_table* table, void* workspace, size_t workspace_size) {
  if (table == nullptr || workspace == nullptr || table->group_of == nullptr || table->freq == nullptr)
    return SZ_ERROR_INVALID_ARGUMENT;
  if (!table_shape_ok(table->dtype, table->tensors, table->period, table->groups) ||
      table->symbol_bits != symbol_split(table->dtype).symbol_bits)
    return SZ_ERROR_BAD_CODEBOOK;
  const size_t need = sz_symbol_table_workspace_size(table);
  if (workspace_size < need) return SZ_ERROR_WORKSPACE_TOO_SMALL;
  const uint32_t G = table->groups, A = 1u << table->symbol_bits, a1 = A + 1;
  const uint64_t channels = (uint64_t)table->tensors * table->period;
  if (!table_contents_ok(*table)) return SZ_ERROR_BAD_CODEBOOK;
  uint8_t* base = (uint8_t*)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
  Prepared* p = new (base) Prepared;
  uint8_t* at = base + align64(sizeof(Prepared));
  uint32_t* enc = (uint32_t*)at;
  at += align64(4 * (size_t)G * a1);
  uint32_t* dec = (uint32_t*)at;
  at += align64(4 * (size_t)G * kRansProbTotal);
  uint32_t* chan = (uint32_t*)at;
  at += align64(4 * channels);
  uint32_t* chan_dec = (uint32_t*)at;
  at += align64(4 * channels);
  uint32_t* chan_enc = (uint32_t*)at;
  for (uint32_t g = 0; g < G; ++g) {
    uint32_t cum = 0;
    for (uint32_t s = 0; s <= A; ++s) {
      const uint32_t f = file_freq(*table, g, s);
      enc[(uint64_t)g * a1 + s] = f | (cum << 16);
      const uint32_t sym = s == A ? 0 : s;
      for (uint32_t k = 0; k < f; ++k) dec[(uint64_t)g * kRansProbTotal + cum + k] = sym | (f - 1) << 8 | k << 20;
      cum += f;
    }
  }
  for (uint64_t c = 0; c < channels; ++c) {
    const uint32_t g = file_group(*table, c);
    chan[c] = g | (kRansProbTotal - file_freq(*table, g, A)) << 16;
    chan_dec[c] = g * kRansProbTotal + (chan[c] >> 16);
    chan_enc[c] = g * a1;
  }
  p->id = table->id;
  p->groups = G;
  p->a1 = a1;
  p->channels = channels;
  p->enc = enc;
  p->dec = dec;
  p->chan = chan;
  p->chan_dec = chan_dec;
  p->chan_enc = chan_enc;
  table->prepared = p;
  return SZ_OK;
}

SZ_API size_t sz_symbol_histogram_size(sz_dtype dtype, uint32_t tensors, uint32_t period) {
  if (!table_shape_ok((unsigned)dtype, tensors, period, 1)) return 0;
  return sizeof(uint32_t) * (size_t)tensors * period * ((size_t)1 << symbol_split((unsigned)dtype).symbol_bits);
}

SZ_API sz_status sz_symbol_histogram_add(uint32_t* counts, sz_dtype dtype, uint32_t tensors, uint32_t period,
                                         const void* values_v, uint64_t tokens) {
  if (counts == nullptr || (values_v == nullptr && tokens > 0)) return SZ_ERROR_INVALID_ARGUMENT;
  if (sz_symbol_histogram_size(dtype, tensors, period) == 0) return SZ_ERROR_INVALID_ARGUMENT;
  const DtypeTraits t = dtype_traits((unsigned)dtype);
  const SymbolSplit sp = symbol_split((unsigned)dtype);
  const unsigned vb = t.value_bits / 8, A = 1u << sp.symbol_bits;
  const uint8_t* values = (const uint8_t*)values_v;
  for (uint64_t tz = 0; tz < tensors; ++tz) {
    uint32_t* ct = counts + tz * period * A;
    const uint8_t* v = values + tz * tokens * period * vb;
    uint64_t ch = 0;
    for (uint64_t i = 0; i < tokens * period; ++i) {
      uint32_t& c = ct[ch * A + symbol_of(load_value(v, i, vb), t, sp)];
      if (c != 0xFFFFFFFFu) ++c;  // saturate rather than wrap on huge samples
      ch = ch + 1 == period ? 0 : ch + 1;
    }
  }
  return SZ_OK;
}

SZ_API sz_status sz_symbol_histogram_add_paired(uint32_t* counts, sz_dtype dtype, uint32_t tensors, uint32_t period,
                                                const void* values_v, uint64_t tokens, const sz_row_map* map) {
  if (map == nullptr) return sz_symbol_histogram_add(counts, dtype, tensors, period, values_v, tokens);
  if (counts == nullptr || (values_v == nullptr && tokens > 0)) return SZ_ERROR_INVALID_ARGUMENT;
  if (sz_symbol_histogram_size(dtype, tensors, period) == 0 || !symbol_split((unsigned)dtype).whole ||
      !map_usable(map, tokens))
    return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* values = (const uint8_t*)values_v;
  uint8_t sym[4096];
  for (uint64_t tz = 0; tz < tensors; ++tz) {
    uint32_t* ct = counts + tz * period * 256;
    const uint8_t* v = values + tz * tokens * period;
    for (uint64_t r = 0; r < tokens; ++r) {
      for (uint64_t c0 = 0; c0 < period; c0 += sizeof sym) {
        const uint64_t len = std::min<uint64_t>(sizeof sym, period - c0);
        pair_symbols(v, r * period + c0, len, period, *map, sym);
        for (uint64_t j = 0; j < len; ++j) {
          uint32_t& c = ct[(c0 + j) * 256 + sym[j]];
          if (c != 0xFFFFFFFFu) ++c;
        }
      }
    }
  }
  return SZ_OK;
}

SZ_API sz_status sz_symbol_calibrate(const uint32_t* counts, sz_dtype dtype, uint32_t tensors, uint32_t period,
                                     uint32_t groups, void* dst_v, size_t dst_capacity, size_t* dst_size,
                                     double* bits_per_value) {
  if (counts == nullptr || dst_v == nullptr || dst_size == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (!table_shape_ok((unsigned)dtype, tensors, period, groups)) return SZ_ERROR_INVALID_ARGUMENT;
  const unsigned B = symbol_split((unsigned)dtype).symbol_bits, A = 1u << B;
  const uint64_t C = (uint64_t)tensors * period;
  const uint32_t G = (uint32_t)std::min<uint64_t>(groups, C);
  const size_t size = sz_symbol_table_file_size(dtype, tensors, period, G);
  if (dst_capacity < size) return SZ_ERROR_DST_TOO_SMALL;
  try {
    // Sparse per-channel histograms.
    std::vector<uint64_t> start(C + 1, 0);
    std::vector<uint16_t> sym;
    std::vector<double> cnt;
    std::vector<double> total(C, 0), mean(C, 0);
    for (uint64_t c = 0; c < C; ++c) {
      for (unsigned s = 0; s < A; ++s) {
        const uint32_t k = counts[c * A + s];
        if (k == 0) continue;
        sym.push_back((uint16_t)s);
        cnt.push_back((double)k);
        total[c] += k;
        mean[c] += (double)k * s;
      }
      start[c + 1] = sym.size();
      if (total[c] > 0) mean[c] /= total[c];
    }
    // Initial groups: channels ordered by mean symbol, cut into G runs of equal count.
    std::vector<uint32_t> order(C), assign(C, 0);
    for (uint64_t c = 0; c < C; ++c) order[c] = (uint32_t)c;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return mean[a] < mean[b]; });
    for (uint64_t i = 0; i < C; ++i) assign[order[i]] = (uint32_t)(i * G / C);
    // Lloyd iterations under the coded size: a symbol of a group costs -log2 of its share, one the group never
    // saw costs an escape (12 + B bits).
    const double unseen = kRansProbBits + B;
    std::vector<double> gc((size_t)G * A), cost((size_t)G * A), chan_cost(C);
    for (int iter = 0; iter < 20; ++iter) {
      std::fill(gc.begin(), gc.end(), 0.0);
      for (uint64_t c = 0; c < C; ++c)
        for (uint64_t i = start[c]; i < start[c + 1]; ++i) gc[(size_t)assign[c] * A + sym[i]] += cnt[i];
      for (uint32_t g = 0; g < G; ++g) {
        double tot = 0;
        for (unsigned s = 0; s < A; ++s) tot += gc[(size_t)g * A + s];
        for (unsigned s = 0; s < A; ++s) {
          const double k = gc[(size_t)g * A + s];
          cost[(size_t)g * A + s] = k > 0 ? -log2(k / tot) : unseen;
        }
      }
      bool changed = false;
      std::vector<uint32_t> members(G, 0);
      for (uint64_t c = 0; c < C; ++c) {
        if (total[c] == 0) {
          ++members[assign[c]];
          continue;
        }
        uint32_t best = assign[c];
        double best_cost = 0;
        for (uint64_t i = start[c]; i < start[c + 1]; ++i) best_cost += cnt[i] * cost[(size_t)best * A + sym[i]];
        for (uint32_t g = 0; g < G; ++g) {
          if (g == assign[c]) continue;
          double x = 0;
          for (uint64_t i = start[c]; i < start[c + 1] && x < best_cost; ++i) x += cnt[i] * cost[(size_t)g * A + sym[i]];
          if (x < best_cost) best = g, best_cost = x;
        }
        chan_cost[c] = best_cost;
        if (best != assign[c]) changed = true;
        assign[c] = best;
        ++members[best];
      }
      // An emptied group restarts from the channel that codes worst per value.
      for (uint32_t g = 0; g < G; ++g) {
        if (members[g] != 0) continue;
        uint64_t worst = C;
        double worst_cost = -1;
        for (uint64_t c = 0; c < C; ++c)
          if (total[c] > 0 && members[assign[c]] > 1 && chan_cost[c] / total[c] > worst_cost)
            worst = c, worst_cost = chan_cost[c] / total[c];
        if (worst == C) break;
        --members[assign[worst]];
        assign[worst] = g;
        members[g] = 1;
        changed = true;
      }
      if (!changed) break;
    }
    // The file.
    uint8_t* dst = (uint8_t*)dst_v;
    memset(dst, 0, size);
    store_u32(dst, kSymbolTableMagic);
    dst[4] = kSymbolTableVersion;
    dst[5] = (uint8_t)dtype;
    dst[6] = (uint8_t)B;
    dst[7] = (uint8_t)kRansProbBits;
    store_u32(dst + 8, period);
    store_u32(dst + 12, tensors);
    store_u32(dst + 16, G);
    for (uint64_t c = 0; c < C; ++c) store_u16(dst + kSymbolTableHeader + 2 * c, (uint16_t)assign[c]);
    std::fill(gc.begin(), gc.end(), 0.0);
    for (uint64_t c = 0; c < C; ++c)
      for (uint64_t i = start[c]; i < start[c + 1]; ++i) gc[(size_t)assign[c] * A + sym[i]] += cnt[i];
    uint8_t* fq = dst + kSymbolTableHeader + 2 * C;
    std::vector<uint32_t> freq(A + 1);
    double bits = 0, all = 0;
    for (uint32_t g = 0; g < G; ++g) {
      quantise(&gc[(size_t)g * A], A, freq.data());
      for (unsigned s = 0; s <= A; ++s) store_u16(fq + 2 * ((size_t)g * (A + 1) + s), (uint16_t)freq[s]);
      for (unsigned s = 0; s < A; ++s) {
        const double k = gc[(size_t)g * A + s];
        if (k <= 0) continue;
        all += k;
        bits += k * (freq[s] ? -log2(freq[s] / (double)kRansProbTotal)
                             : -log2(freq[A] / (double)kRansProbTotal) + B);
      }
    }
    store_u32(dst + size - 4, (uint32_t)detail::h64(dst, size - 4));
    *dst_size = size;
    if (bits_per_value) *bits_per_value = all > 0 ? bits / all : 0;
  } catch (const std::bad_alloc&) {
    return SZ_ERROR_OUT_OF_MEMORY;
  }
  return SZ_OK;
}

SZ_API uint32_t sz_entropy_chunk_log2(uint64_t n_values) { return splitzip::layout::entropy_chunk_log2(n_values); }

SZ_API sz_status sz_compress_entropy(const void* src, uint64_t n, sz_dtype dtype, const sz_symbol_table* table,
                                     uint32_t tensor, const sz_params* params, void* dst, size_t dst_capacity,
                                     size_t* dst_size) {
  return compress_entropy(src, n, dtype, table, tensor, nullptr, params, dst, dst_capacity, dst_size, false);
}

SZ_API sz_status sz_compress_entropy_reference(const void* src, uint64_t n, sz_dtype dtype,
                                               const sz_symbol_table* table, uint32_t tensor,
                                               const sz_params* params, void* dst, size_t dst_capacity,
                                               size_t* dst_size) {
  return compress_entropy(src, n, dtype, table, tensor, nullptr, params, dst, dst_capacity, dst_size, true);
}

SZ_API sz_status sz_compress_entropy_paired(const void* src, uint64_t n, sz_dtype dtype, const sz_symbol_table* table,
                                            uint32_t tensor, const sz_row_map* map, const sz_params* params,
                                            void* dst, size_t dst_capacity, size_t* dst_size) {
  return compress_entropy(src, n, dtype, table, tensor, map, params, dst, dst_capacity, dst_size, false);
}

SZ_API sz_status sz_compress_entropy_paired_reference(const void* src, uint64_t n, sz_dtype dtype,
                                                      const sz_symbol_table* table, uint32_t tensor,
                                                      const sz_row_map* map, const sz_params* params, void* dst,
                                                      size_t dst_capacity, size_t* dst_size) {
  return compress_entropy(src, n, dtype, table, tensor, map, params, dst, dst_capacity, dst_size, true);
}

SZ_API sz_status sz_decompress_entropy(const void* src, size_t src_size, const sz_symbol_table* table, void* dst,
                                       size_t dst_capacity, size_t* dst_size, unsigned threads) {
  return decompress_entropy(src, src_size, table, nullptr, dst, dst_capacity, dst_size, threads, false);
}

SZ_API sz_status sz_decompress_entropy_reference(const void* src, size_t src_size, const sz_symbol_table* table,
                                                 void* dst, size_t dst_capacity, size_t* dst_size) {
  return decompress_entropy(src, src_size, table, nullptr, dst, dst_capacity, dst_size, 1, true);
}

SZ_API sz_status sz_decompress_entropy_paired(const void* src, size_t src_size, const sz_symbol_table* table,
                                              const sz_row_map* map, void* dst, size_t dst_capacity,
                                              size_t* dst_size, unsigned threads) {
  return decompress_entropy(src, src_size, table, map, dst, dst_capacity, dst_size, threads, false);
}

SZ_API sz_status sz_decompress_entropy_paired_reference(const void* src, size_t src_size,
                                                        const sz_symbol_table* table, const sz_row_map* map,
                                                        void* dst, size_t dst_capacity, size_t* dst_size) {
  return decompress_entropy(src, src_size, table, map, dst, dst_capacity, dst_size, 1, true);
}

SZ_API sz_status sz_frame_row_map_ref(const void* src, size_t src_size, uint64_t* row_map_id) {
  if (src == nullptr || row_map_id == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  detail::FrameHeader h;
  const sz_status s = detail::parse_frame_header_only((const uint8_t*)src, src_size, &h);
  if (s != SZ_OK) return s;
  *row_map_id = h.row_map_id;
  return SZ_OK;
}

SZ_API size_t sz_cuda_symbol_table_image_size(const sz_symbol_table* table) {
  uint64_t lists = 0;
  try {
    if (!image_shape(table, &lists)) return 0;
  } catch (...) {
    return 0;
  }
  return (size_t)eimg::offsets(table->symbol_bits, table->tensors, table->period, table->groups, lists).end;
}

SZ_API sz_status sz_cuda_symbol_table_image(const sz_symbol_table* table, void* dst, size_t dst_capacity,
                                            size_t* image_size) {
  if (table == nullptr || dst == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  try {
    uint64_t lists_total = 0;
    if (!image_shape(table, &lists_total)) return SZ_ERROR_BAD_CODEBOOK;
    const sz_symbol_table& t = *table;
    const uint32_t A = 1u << t.symbol_bits, stride = A + 2;
    const eimg::Offsets o = eimg::offsets(t.symbol_bits, t.tensors, t.period, t.groups, lists_total);
    if ((uint64_t)dst_capacity < o.end) return SZ_ERROR_DST_TOO_SMALL;
    uint8_t* img = (uint8_t*)dst;
    memset(img, 0, (size_t)o.end);
    eimg::Header h{};
    h.magic = eimg::kMagic;
    h.dtype = t.dtype;
    h.symbol_bits = t.symbol_bits;
    h.period = t.period;
    h.tensors = t.tensors;
    h.groups = t.groups;
    h.sym_stride = stride;
    h.id = t.id;
    h.sym_off = (uint32_t)o.sym;
    h.bucket_off = (uint32_t)o.bucket;
    h.used_off = (uint32_t)o.used;
    h.tensor_off = (uint32_t)o.tensor;
    h.cmap_off = (uint32_t)o.cmap;
    h.enc_off = (uint32_t)o.enc;
    memcpy(img, &h, sizeof h);
    for (uint32_t g = 0; g < t.groups; ++g) {
      uint8_t* sym = img + o.sym + 4ull * stride * g;
      uint8_t* bucket = img + o.bucket + (uint64_t)eimg::kBuckets * g;
      uint8_t* used = img + o.used + 32ull * g;
      uint8_t* enc = img + o.enc + 8ull * (A + 1) * g;
      uint32_t cum = 0, entry = 0;
      const uint32_t fa = file_freq(t, g, A);  // >= 1 (a valid table's)
      const uint32_t esc_word = eimg::enc_word(fa, layout::kRansProbTotal - fa) | eimg::kEncEscaped;
      for (uint32_t s = 0; s <= A; ++s) {
        const uint32_t f = file_freq(t, g, s);
        store_u32(enc + 8 * s, f ? eimg::enc_word(f, cum) : esc_word);
        store_u32(enc + 8 * s + 4, eimg::enc_magic(f ? f : fa));
        if (f == 0) continue;
        if (s < 256) used[s / 8] |= (uint8_t)(1u << (s % 8));
        store_u32(sym + 4 * entry, cum | s << 16);
        for (uint32_t slot = cum; slot < cum + f; ++slot)
          if (slot % (1u << eimg::kBucketShift) == 0)
            bucket[slot >> eimg::kBucketShift] = (uint8_t)(entry < 255 ? entry : 255);
        cum += f;
        ++entry;
      }
      for (; entry < stride; ++entry) store_u32(sym + 4 * entry, eimg::kSentinel);
    }
    std::vector<uint32_t> local(t.groups, ~0u);
    uint64_t first = 0;
    for (uint32_t k = 0; k < t.tensors; ++k) {
      uint32_t count = 0;
      uint8_t* cmap = img + o.cmap + 4ull * t.period * k;
      for (uint32_t c = 0; c < t.period; ++c) {
        const uint32_t g = file_group(t, (uint64_t)k * t.period + c);
        if (local[g] == ~0u) {
          local[g] = count;
          store_u16(img + o.lists + 2 * (first + count), (uint16_t)g);
          ++count;
        }
        store_u32(cmap + 4 * c, local[g] | g << 16);
      }
      for (uint32_t i = 0; i < count; ++i) local[load_u16(img + o.lists + 2 * (first + i))] = ~0u;
      store_u32(img + o.tensor + 8ull * k, count);
      store_u32(img + o.tensor + 8ull * k + 4, (uint32_t)first);
      first += count;
    }
    if (image_size) *image_size = (size_t)o.end;
    return SZ_OK;
  } catch (...) {
    return SZ_ERROR_OUT_OF_MEMORY;
  }
}

SZ_API sz_status sz_frame_table_ref(const void* src, size_t src_size, uint64_t* table_id, uint32_t* tensor,
                                    uint32_t* period) {
  if (src == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  detail::FrameHeader h;
  const sz_status s = detail::parse_frame_header_only((const uint8_t*)src, src_size, &h);
  if (s != SZ_OK) return s;
  if (!h.entropy) return SZ_ERROR_INVALID_ARGUMENT;
  if (table_id) *table_id = h.book_id;
  if (tensor) *tensor = h.tensor;
  if (period) *period = h.period;
  return SZ_OK;
}

}  // extern "C"
