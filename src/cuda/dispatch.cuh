// dispatch.cuh — the dispatch level of the CUDA codec: which kernel serves a call, and its arguments resolved and
// checked on the host. Shared by the launches (api.cu) and the emulator tests, so both run the same kernels on the
// same arguments.
//
// Encoder kernels are keyed by (dtype, code width k): the code width shapes the packing, everything else (chunk size,
// checksums, contiguous or paged input, any alignment) is a run-time parameter of the same kernel, uniform per call.
// The decoder is one kernel: the host does not read the frame, so every CTA parses the header and dispatches on its
// (dtype, k) to the same per-(dtype, k) chunk code (agent/decode.cuh).
#pragma once

#include "cuda/agent/decode.cuh"
#include "cuda/agent/encode.cuh"
#include "internal.h"
#include "layout.h"

// X(dtype, k) for every encoder kernel: k = 1..4 and k < E.
#define SZ_CUDA_ENCODE_KERNELS(X) \
  X(1, 1) X(1, 2) X(1, 3) X(1, 4) \
  X(2, 1) X(2, 2) X(2, 3) X(2, 4) \
  X(3, 1) X(3, 2) X(3, 3) X(3, 4) \
  X(4, 1) X(4, 2) X(4, 3)         \
  X(5, 1) X(5, 2) X(5, 3) X(5, 4)

namespace splitzip {
namespace cuda {

constexpr int kEncodeKernels = 19;
// Index of the (dtype, k) encoder in SZ_CUDA_ENCODE_KERNELS order, or -1.
inline int encode_kernel_index(unsigned dtype, unsigned k) {
  int i = 0;
#define SZ_X(D, K)                        \
  if (dtype == (D) && k == (K)) return i; \
  ++i;
  SZ_CUDA_ENCODE_KERNELS(SZ_X)
#undef SZ_X
  return -1;
}
inline size_t encode_kernel_smem(int index) {
  int i = 0;
#define SZ_X(D, K)                                         \
  if (index == i) return encode_smem_bytes<D, K>(); \
  ++i;
  SZ_CUDA_ENCODE_KERNELS(SZ_X)
#undef SZ_X
  return 0;
}

// A Span over one buffer or over pages of page_bytes each.
inline Span make_span(const void* base, const void* const* pages, uint64_t page_bytes) {
  Span s{};
  s.base = (uint8_t*)base;
  if (pages) s.set_pages((void* const*)pages, page_bytes);
  return s;
}

// Resolves a compress call (contiguous: d_pages == nullptr). Host checks only; nothing is enqueued.
// The fields of a channel book whose bases are in device memory (those cannot be read on the host: the id is the
// caller's, computed from its host copy by sz_channel_book_init).
inline bool device_book_ok(const sz_channel_book* b) {
  if (!b || !b->bases || !layout::dtype_known(b->dtype)) return false;
  const unsigned E = layout::dtype_traits(b->dtype).exponent_bits;
  return b->code_bits >= 1 && b->code_bits <= 4 && b->code_bits < E && b->period >= 1 &&
         b->period <= layout::kMaxPeriod && b->tensors >= 1 && b->tensors <= layout::kMaxTensors &&
         (uint64_t)b->period * b->tensors <= layout::kMaxBookBases;
}

// book: channel windows (bases in device memory) for tensor `tensor`; nullptr: the codebook.
inline sz_status make_encode_args(const void* d_src, const void* const* d_pages, uint64_t page_values, uint64_t n,
                                  sz_dtype dtype, const sz_codebook* codebook, const sz_params* params, void* d_dst,
                                  size_t dst_capacity, void* d_workspace, size_t ws_size, uint64_t* d_frame_size,
                                  EncodeArgs* a, const sz_channel_book* book = nullptr, uint32_t tensor = 0) {
  sz_codebook cb;
  sz_params p;
  const size_t dummy = 0;
  const void* src_check = d_pages ? (const void*)d_pages : d_src;
  sz_status s = detail::check_compress_args(src_check, n, dtype, codebook, params, d_dst, &dummy, &cb, &p);
  if (s != SZ_OK) return s;
  if (book) {
    if (!device_book_ok(book) || book->dtype != (uint8_t)dtype) return SZ_ERROR_BAD_CODEBOOK;
    if (tensor >= book->tensors) return SZ_ERROR_INVALID_ARGUMENT;
  }
  if (!d_frame_size) return SZ_ERROR_INVALID_ARGUMENT;
  if (dst_capacity < sz_compress_bound(n, dtype)) return SZ_ERROR_DST_TOO_SMALL;
  const uint64_t chunks = layout::n_chunks(n, p.chunk_log2);
  if (ws_size < encode_workspace_bytes(chunks)) return SZ_ERROR_WORKSPACE_TOO_SMALL;
  if (!d_workspace) return SZ_ERROR_INVALID_ARGUMENT;
  const layout::DtypeTraits t = layout::dtype_traits((unsigned)dtype);
  const bool checksums = (p.flags & layout::kFlagChecksums) != 0;
  const layout::FrameOffsets o = layout::frame_offsets(n, p.chunk_log2, checksums, t, 0);
  *a = EncodeArgs{};
  a->src = make_span(d_src, d_pages, page_values * (t.value_bits / 8));
  a->dst = (uint8_t*)d_dst;
  a->n = n;
  a->n_chunks = chunks;
  a->index_off = o.index;
  a->checksum_off = o.checksums;
  a->rest_off = o.rest;
  a->exp_off = o.exponents;
  a->dtype = (uint32_t)dtype;
  a->k = book ? book->code_bits : cb.code_bits;
  a->count = book ? 1u << book->code_bits : cb.count;
  if (book) {
    a->ch = Channels{book->bases + (uint64_t)tensor * book->period, book->period};
    a->book_id = book->id;
    a->tensor = tensor;
  } else {
    a->ch = Channels{nullptr, 1};
  }
  a->chunk_log2 = p.chunk_log2;
  a->flags = p.flags;
  a->team = 1;  // the launcher may give few chunks teams of warps (encode_team)
  for (int i = 0; i < 16; ++i) a->codebook[i] = !book && i < cb.count ? cb.values[i] : 0;
  a->ws = (WsHeader*)d_workspace;
  a->frame_size = d_frame_size;
  return SZ_OK;
}

// Resolves a decompress call (contiguous: d_pages == nullptr).
inline sz_status make_decode_args(const void* d_src, size_t src_size, void* d_dst, size_t dst_capacity,
                                  void* const* d_pages, uint32_t n_pages, uint64_t page_values, void* d_workspace,
                                  size_t ws_size, int32_t* d_status, uint64_t* d_dst_size, DecodeArgs* a,
                                  const sz_channel_book* book = nullptr) {
  if (!d_src || !d_status) return SZ_ERROR_INVALID_ARGUMENT;
  if (book && !device_book_ok(book)) return SZ_ERROR_BAD_CODEBOOK;
  if (d_pages == nullptr && d_dst == nullptr && dst_capacity > 0) return SZ_ERROR_INVALID_ARGUMENT;
  if (ws_size < kDecodeWorkspaceBytes) return SZ_ERROR_WORKSPACE_TOO_SMALL;
  if (!d_workspace) return SZ_ERROR_INVALID_ARGUMENT;
  *a = DecodeArgs{};
  a->src = (const uint8_t*)d_src;
  a->src_size = src_size;
  a->dst = (uint8_t*)d_dst;
  a->dst_capacity = dst_capacity;
  a->pages = d_pages;
  a->page_values = page_values;
  a->n_pages = n_pages;
  a->status = d_status;
  a->dst_size = d_dst_size;
  a->ws = (WsHeader*)d_workspace;
  if (book) {
    a->book_bases = book->bases;
    a->book_id = book->id;
    a->book_period = book->period;
    a->book_tensors = book->tensors;
    a->book_dtype = book->dtype;
    a->book_k = book->code_bits;
  }
  return SZ_OK;
}

// Chunks a frame of src_size bytes can hold: every chunk but the last takes at least its 8-byte index entry and
// 256 values' rest fields (>= 96 bytes).
inline uint64_t max_chunks_of(size_t src_size) { return src_size / 104 + 1; }

}  // namespace cuda
}  // namespace splitzip
