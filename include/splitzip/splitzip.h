/*
 * splitzip.h — bit-exact lossless compression of floating-point tensors (LLM KV caches).
 *
 * SplitZip splits every value into its exponent and the rest (sign and mantissa). The rest is stored raw, packed;
 * the exponent is replaced by a k-bit code from a small codebook calibrated offline, and exponents outside the
 * codebook go to a sparse per-chunk escape list. Fixed-length codes keep encode and decode regular, so they run at
 * memory speed on CPUs and GPUs. The byte layout is specified in docs/FORMAT.md (format version 1; version 2 adds
 * per-channel windows from a channel book, version 3 entropy-coded frames with a symbol table, the "max" mode).
 *
 * Conventions of this API
 *   - Every function returns an sz_status; SZ_OK (0) is success, anything else an error whose name
 *     sz_status_name() gives. No function aborts, throws or prints.
 *   - The caller owns all memory. Every size can be queried up front: sz_compress_bound() for the output of
 *     sz_compress(), sz_frame_info_get() for the output of sz_decompress(), sz_cuda_*_workspace_size() for GPU
 *     scratch. Two conveniences allocate and say so: the one-shot sz_compress() takes its escape scratch (3 bytes a
 *     value of one chunk, per thread) from the heap, and both one-shot calls start their threads for the call (only
 *     for inputs of at least 1 MiB a thread). A context (sz_cctx, sz_dctx) does both once, at its creation.
 *   - An output buffer that is too small yields exactly SZ_ERROR_DST_TOO_SMALL.
 *   - Bad input yields an error and never a read or write outside the buffers given.
 *   - Thread safety: all functions are reentrant; none keeps global mutable state.
 *
 * The CUDA entry points (sz_cuda_*) are declared in splitzip_cuda.h.
 */
#ifndef SPLITZIP_SPLITZIP_H
#define SPLITZIP_SPLITZIP_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && defined(SPLITZIP_SHARED)
#  if defined(SPLITZIP_BUILDING)
#    define SZ_API __declspec(dllexport)
#  else
#    define SZ_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define SZ_API __attribute__((visibility("default")))
#else
#  define SZ_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------------------------------- */

#define SZ_VERSION_MAJOR 1
#define SZ_VERSION_MINOR 0
#define SZ_VERSION_PATCH 0
#define SZ_VERSION_NUMBER (SZ_VERSION_MAJOR * 10000 + SZ_VERSION_MINOR * 100 + SZ_VERSION_PATCH)
/** Frame format versions: 1 for frames with a codebook, 2 for frames with channel windows (docs/FORMAT.md §4.9). */
#define SZ_FORMAT_VERSION 1
#define SZ_FORMAT_VERSION_CHANNELS 2
/** Format version of entropy-coded frames (docs/FORMAT.md §4.10): the "max" mode. */
#define SZ_FORMAT_VERSION_ENTROPY 3

/** Library version as SZ_VERSION_NUMBER, of the library actually linked. */
SZ_API unsigned sz_version_number(void);
/** Library version as a string, "1.0.0". */
SZ_API const char* sz_version_string(void);

/* ---------------------------------------------------------------------------------------------------------------
 * Status codes. The numbers are pinned: they never change meaning, new ones are only appended.
 * ------------------------------------------------------------------------------------------------------------- */

typedef enum sz_status {
  SZ_OK = 0,
  SZ_ERROR_INVALID_ARGUMENT = 1,     /* a NULL pointer, an out-of-range parameter, an unknown dtype argument */
  SZ_ERROR_DST_TOO_SMALL = 2,        /* the output buffer cannot hold the result; nothing valid was written */
  SZ_ERROR_SRC_TRUNCATED = 3,        /* the input ends before the frame, codebook or container does */
  SZ_ERROR_BAD_MAGIC = 4,            /* the input is not a SplitZip frame / container / codebook */
  SZ_ERROR_UNSUPPORTED_VERSION = 5,  /* a format version this library does not know */
  SZ_ERROR_UNSUPPORTED_DTYPE = 6,    /* a dtype id this library does not know */
  SZ_ERROR_CORRUPT = 7,              /* a structural check of docs/FORMAT.md failed */
  SZ_ERROR_CHECKSUM = 8,             /* a header, chunk, index or codebook checksum does not match */
  SZ_ERROR_BAD_CODEBOOK = 9,         /* a codebook argument is invalid for the dtype */
  SZ_ERROR_OUT_OF_MEMORY = 10,       /* the library could not get memory it needs (only helpers that say so allocate) */
  SZ_ERROR_IO = 11,                  /* a file could not be read or written */
  SZ_ERROR_NOT_FOUND = 12,           /* a named item is not in the container */
  SZ_ERROR_CUDA = 13,                /* a CUDA runtime call failed */
  SZ_ERROR_NOT_SUPPORTED = 14,       /* the feature is not compiled in (for example CUDA in a CPU-only build) */
  SZ_ERROR_WORKSPACE_TOO_SMALL = 15, /* the GPU workspace is smaller than the size query returned */
  SZ_ERROR_INTERNAL = 16,            /* a bug: please report it */
  SZ_ERROR_BOOK_MISMATCH = 17        /* a channel-window frame without its channel book, or with another one; an
                                        entropy-coded frame without its symbol table, or with another one */
} sz_status;

/** A static, NUL-terminated name such as "SZ_ERROR_CORRUPT"; "SZ_ERROR_UNKNOWN" for numbers not listed above. */
SZ_API const char* sz_status_name(sz_status status);
/** A one-line English description of the status. */
SZ_API const char* sz_status_message(sz_status status);

/* ---------------------------------------------------------------------------------------------------------------
 * Data types (docs/FORMAT.md §2). The numbers are the dtype ids of the format.
 * ------------------------------------------------------------------------------------------------------------- */

typedef enum sz_dtype {
  SZ_DTYPE_BF16 = 1,
  SZ_DTYPE_FP16 = 2,
  SZ_DTYPE_FP32 = 3,
  SZ_DTYPE_FP8_E4M3 = 4,
  SZ_DTYPE_FP8_E5M2 = 5
} sz_dtype;

/** Bytes per value of a dtype (2, 2, 4, 1, 1), or 0 for an unknown dtype. */
SZ_API size_t sz_dtype_size(sz_dtype dtype);
/** Width of the exponent field (8, 5, 8, 4, 5), or 0 for an unknown dtype. */
SZ_API unsigned sz_dtype_exponent_bits(sz_dtype dtype);
/** Short name as the CLI spells it: "bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2"; NULL for unknown. */
SZ_API const char* sz_dtype_name(sz_dtype dtype);
/** Parses a name as above (also "float8_e4m3fn", "e4m3", "bfloat16", "float16", "float32", "half", "float", ...);
 *  returns SZ_ERROR_UNSUPPORTED_DTYPE for anything else. */
SZ_API sz_status sz_dtype_from_name(const char* name, sz_dtype* dtype);

/* ---------------------------------------------------------------------------------------------------------------
 * Codebooks (docs/FORMAT.md §4.1, §5)
 * ------------------------------------------------------------------------------------------------------------- */

#define SZ_MAX_CODEBOOK 16
#define SZ_CODEBOOK_FILE_SIZE 32

/** A codebook: code i stands for exponent field values[i]. Entries count..15 must be zero. */
typedef struct sz_codebook {
  uint8_t dtype;                    /* sz_dtype */
  uint8_t code_bits;                /* k: 1..4, and k < exponent bits of the dtype */
  uint8_t count;                    /* 1..2^k entries in use */
  uint8_t values[SZ_MAX_CODEBOOK];  /* distinct exponent field values, each < 2^E */
} sz_codebook;

/** Checks a codebook: SZ_OK or SZ_ERROR_BAD_CODEBOOK (SZ_ERROR_UNSUPPORTED_DTYPE for an unknown dtype). */
SZ_API sz_status sz_codebook_validate(const sz_codebook* codebook);

/** What a default codebook was calibrated for. */
typedef enum sz_tensor_kind {
  SZ_KIND_GENERIC = 0, /* K and V together */
  SZ_KIND_KEY = 1,
  SZ_KIND_VALUE = 2
} sz_tensor_kind;

/** The codebook shipped with the library for a dtype and tensor kind, calibrated on real KV caches
 *  (docs/BENCHMARKS.md says on what). */
SZ_API sz_status sz_default_codebook(sz_dtype dtype, sz_tensor_kind kind, sz_codebook* out);

/** Exponent histogram used by calibration: counts[e] = number of values whose exponent field is e. */
typedef struct sz_histogram {
  uint8_t dtype;
  uint64_t counts[256];
} sz_histogram;

/** Sets *hist to an empty histogram for dtype. */
SZ_API sz_status sz_histogram_init(sz_histogram* hist, sz_dtype dtype);
/** Adds n values (little-endian, of the histogram's dtype) to the histogram. */
SZ_API sz_status sz_histogram_add(sz_histogram* hist, const void* values, size_t n);

/** Builds the codebook that minimises the expected compressed size of data distributed like the histogram:
 *  for every code width k the top-2^k exponents (ties: smaller exponent first), costing each value k bits plus
 *  3 bytes per escape, and falling back to raw exponents (E bits) where that is smaller; the cheapest k wins
 *  (ties: smaller k). Entries are ordered by decreasing count. An empty histogram gives SZ_ERROR_INVALID_ARGUMENT.
 *  If expected_bits_per_value is not NULL it receives the predicted size of the exponent stream in bits per value. */
SZ_API sz_status sz_calibrate(const sz_histogram* hist, sz_codebook* out, double* expected_bits_per_value);

/** Serialises a codebook into the 32-byte file layout of docs/FORMAT.md §5. */
SZ_API sz_status sz_codebook_serialize(const sz_codebook* codebook, void* dst, size_t dst_capacity);
/** Parses the 32-byte layout; the errors of docs/FORMAT.md §5. */
SZ_API sz_status sz_codebook_deserialize(const void* src, size_t src_size, sz_codebook* out);
/** Writes / reads a codebook file (the serialised layout). Errors: SZ_ERROR_IO and those above. */
SZ_API sz_status sz_codebook_save(const sz_codebook* codebook, const char* path);
SZ_API sz_status sz_codebook_load(const char* path, sz_codebook* out);

/* ---------------------------------------------------------------------------------------------------------------
 * Channel books (docs/FORMAT.md §4.9, §5.2). KV exponents depend on the channel (layer, K/V, kv_head, dim): a
 * channel book gives every channel of every tensor of a model a window of 2^k consecutive exponents, calibrated
 * offline; a version 2 frame codes each value against its channel's window and names the book by its identifier.
 * A frame holds whole tokens of one tensor: value i belongs to channel i mod period.
 * ------------------------------------------------------------------------------------------------------------- */

#define SZ_CHANNEL_BOOK_HEADER 16
#define SZ_MAX_PERIOD (1u << 24)
#define SZ_MAX_TENSORS (1u << 16)

/** A channel book: `tensors` tensors of `period` channels, each with a base exponent (its window is
 *  base .. base + 2^code_bits - 1). The bases (tensors * period bytes, tensor by tensor) are the caller's. */
typedef struct sz_channel_book {
  uint8_t dtype;        /* sz_dtype */
  uint8_t code_bits;    /* k: 1..4, k < exponent bits */
  uint8_t reserved[2];  /* 0 */
  uint32_t period;      /* channels per tensor, 1..SZ_MAX_PERIOD (a KV tensor [tokens][kv_heads][head_dim]: kv_heads*head_dim) */
  uint32_t tensors;     /* 1..SZ_MAX_TENSORS (a KV cache: layers * 2, K then V of each layer) */
  uint64_t id;          /* XXH3-64 of the book file without its checksum: what frames refer to (set by _init/_parse) */
  const uint8_t* bases; /* tensors * period bytes, each < 2^E */
} sz_channel_book;

/** Fills *book from its parts and computes its id. tensors * period must be at most 2^26. */
SZ_API sz_status sz_channel_book_init(sz_channel_book* book, sz_dtype dtype, unsigned code_bits, uint32_t period,
                                      uint32_t tensors, const uint8_t* bases);
/** Checks a book (fields in range, bases < 2^E, id matching the bases): SZ_OK or SZ_ERROR_BAD_CODEBOOK. */
SZ_API sz_status sz_channel_book_validate(const sz_channel_book* book);
/** Bytes of the book's file (§5.2): 20 + tensors * period. */
SZ_API size_t sz_channel_book_file_size(const sz_channel_book* book);
SZ_API sz_status sz_channel_book_serialize(const sz_channel_book* book, void* dst, size_t dst_capacity,
                                           size_t* dst_size);
/** Parses a book file; book->bases then points into src (which must outlive the book). The errors of §5.2. */
SZ_API sz_status sz_channel_book_parse(const void* src, size_t src_size, sz_channel_book* book);

/** Calibration: per-channel exponent histograms in caller-owned memory of sz_channel_histogram_size() bytes, zeroed
 *  by the caller, filled by _add from sample KV laid out as `tensors` tensors of `tokens` tokens of `period` values
 *  (a file [layers][2][tokens][kv_heads][head_dim]: tensors = 2 * layers, period = kv_heads * head_dim). */
SZ_API size_t sz_channel_histogram_size(sz_dtype dtype, uint32_t tensors, uint32_t period);
SZ_API sz_status sz_channel_histogram_add(uint32_t* counts, sz_dtype dtype, uint32_t tensors, uint32_t period,
                                          const void* values, uint64_t tokens);
/** Picks every channel's window (the 2^k consecutive exponents holding the most values; ties: the lower base) and,
 *  with code_bits 0, the width k with the smallest expected size (k bits per value plus 3 bytes per escape, the same
 *  cost model as sz_calibrate). bases_out: tensors * period bytes. *code_bits_out and *bits_per_value may be NULL. */
SZ_API sz_status sz_channel_calibrate(const uint32_t* counts, sz_dtype dtype, uint32_t tensors, uint32_t period,
                                      unsigned code_bits, uint8_t* bases_out, unsigned* code_bits_out,
                                      double* bits_per_value);

/* ---------------------------------------------------------------------------------------------------------------
 * Frames: compress and decompress one tensor
 * ------------------------------------------------------------------------------------------------------------- */

#define SZ_DEFAULT_CHUNK_LOG2 12 /* 4096 values a chunk */
#define SZ_MIN_CHUNK_LOG2 8
#define SZ_MAX_CHUNK_LOG2 16
#define SZ_FRAME_HEADER_SIZE 64

/** Frame flag: per-chunk checksums of the uncompressed data (docs/FORMAT.md §4.6): H32 (XXH3), or LH32 with
 *  SZ_FLAG_LANE_HASH. */
#define SZ_FLAG_CHECKSUMS 1u
/** Frame flag, only with SZ_FLAG_CHECKSUMS: the chunk checksums are LH32 (§4.6.1), a lane-parallel hash that the GPU
 *  computes from the registers its kernels hold anyway, instead of H32. */
#define SZ_FLAG_LANE_HASH 8u
/** Frame flag set in exactly the version 2 frames (channel windows, §4.9); written by the codec, never passed in
 *  sz_params.flags. */
#define SZ_FLAG_CHANNELS 2u
/** Frame flag set in exactly the version 3 frames (entropy-coded, §4.10); written by the codec, never passed in. */
#define SZ_FLAG_ENTROPY 4u
/** Frame flag of version 3 FP8 frames with paired rows (§4.10.6, a row map); written by the codec, never passed in. */
#define SZ_FLAG_PAIRED 16u

/** Upper bound of a frame's size for n values (docs/FORMAT.md §4.8), valid for every chunk size >= 2^8.
 *  Also a macro for static buffers (valid for n < 2^48). Returns 0 for an unknown dtype and for n >= 2^48, a
 *  count no frame holds (sz_compress() rejects it with SZ_ERROR_INVALID_ARGUMENT). */
#define SZ_COMPRESS_BOUND(n, value_bytes) \
  (64u + 12u * (((uint64_t)(n) + 255u) >> 8) + (((uint64_t)(n) + 7u) >> 3) * 8u * (uint64_t)(value_bytes))
SZ_API uint64_t sz_compress_bound(uint64_t n_values, sz_dtype dtype);

/** Parameters of sz_compress(). Start from sz_params_default(): a zeroed struct is not valid. */
typedef struct sz_params {
  uint32_t chunk_log2; /* SZ_MIN_CHUNK_LOG2..SZ_MAX_CHUNK_LOG2; default SZ_DEFAULT_CHUNK_LOG2 (entropy-coded
                          frames: 0 = sz_entropy_chunk_log2() of the call) */
  uint32_t flags;      /* SZ_FLAG_*; default SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH */
  uint32_t threads;    /* CPU threads; 0 = one per hardware thread; default 1. Never changes the output bytes. */
  uint32_t reserved;   /* must be 0 */
} sz_params;

SZ_API sz_params sz_params_default(void);

/** Compresses n values of dtype (little-endian, src needs n * sz_dtype_size(dtype) bytes) into dst.
 *  codebook: NULL picks sz_default_codebook(dtype, SZ_KIND_GENERIC); its dtype must equal dtype.
 *  params: NULL picks sz_params_default().
 *  On success *dst_size is the frame size, at most sz_compress_bound(n, dtype). The output bytes depend only on
 *  (input, dtype, codebook, chunk_log2, flags), never on threads or the implementation. */
SZ_API sz_status sz_compress(const void* src, uint64_t n_values, sz_dtype dtype, const sz_codebook* codebook,
                             const sz_params* params, void* dst, size_t dst_capacity, size_t* dst_size);

/** The same frame as sz_compress(), computed by the scalar reference codec: slow, simple, the oracle that every
 *  other implementation is tested against. Ignores params->threads. */
SZ_API sz_status sz_compress_reference(const void* src, uint64_t n_values, sz_dtype dtype,
                                       const sz_codebook* codebook, const sz_params* params, void* dst,
                                       size_t dst_capacity, size_t* dst_size);

/** Decompresses a frame into dst, which must hold n_values * value size bytes (see sz_frame_info).
 *  threads: 0 = one per hardware thread. On success *dst_size is the number of bytes written.
 *  The whole frame is validated (docs/FORMAT.md §4); on any error the status says why. */
SZ_API sz_status sz_decompress(const void* src, size_t src_size, void* dst, size_t dst_capacity, size_t* dst_size,
                               unsigned threads);

/** The scalar reference decoder (the oracle). */
SZ_API sz_status sz_decompress_reference(const void* src, size_t src_size, void* dst, size_t dst_capacity,
                                         size_t* dst_size);

/** Compresses n values of tensor `tensor` of a channel book into a version 2 frame (§4.9): value i is coded
 *  against the window of channel i mod book->period. Same sizes, params and output rules as sz_compress. */
SZ_API sz_status sz_compress_channels(const void* src, uint64_t n_values, sz_dtype dtype,
                                      const sz_channel_book* book, uint32_t tensor, const sz_params* params,
                                      void* dst, size_t dst_capacity, size_t* dst_size);
SZ_API sz_status sz_compress_channels_reference(const void* src, uint64_t n_values, sz_dtype dtype,
                                                const sz_channel_book* book, uint32_t tensor,
                                                const sz_params* params, void* dst, size_t dst_capacity,
                                                size_t* dst_size);
/** Decompresses any frame: version 1 as sz_decompress; version 2 with its channel book (book may be NULL for
 *  version 1 frames; a version 2 frame without its book gives SZ_ERROR_BOOK_MISMATCH, as sz_decompress does). */
SZ_API sz_status sz_decompress_book(const void* src, size_t src_size, const sz_channel_book* book, void* dst,
                                    size_t dst_capacity, size_t* dst_size, unsigned threads);
SZ_API sz_status sz_decompress_book_reference(const void* src, size_t src_size, const sz_channel_book* book,
                                              void* dst, size_t dst_capacity, size_t* dst_size);
/** The channel book reference of a version 2 frame (header only): SZ_ERROR_INVALID_ARGUMENT for version 1 frames. */
SZ_API sz_status sz_frame_book_ref(const void* src, size_t src_size, uint64_t* book_id, uint32_t* tensor,
                                   uint32_t* period);

/* ---------------------------------------------------------------------------------------------------------------
 * Entropy-coded frames, the "max" mode (docs/FORMAT.md §4.10, §5.3). Each value's symbol (the exponent; for FP8
 * the whole byte) is coded by a 32-lane interleaved rANS coder with static 12-bit probability tables, one per
 * group of channels; sign and mantissa of the wider types stay raw. The tables are calibrated offline from sample
 * KV and shipped once as a symbol table file; a version 3 frame names its table by identifier and holds whole
 * tokens of one tensor (value i belongs to channel i mod period). Chunks that would not shrink are stored raw, so
 * frames obey sz_compress_bound() like the others. Slower than the fixed-length modes and closer to the entropy
 * bound: bench/ratio_max.py measures both on real KV.
 * ------------------------------------------------------------------------------------------------------------- */

#define SZ_SYMBOL_TABLE_HEADER 24
#define SZ_MAX_GROUPS 4096u
#define SZ_ENTROPY_LANES 32
/** The default chunk of entropy-coded frames of large calls (each coded chunk carries 132 bytes of coder state:
 *  0.1% of BF16 KV at 2^16 values); smaller calls get smaller chunks, see sz_entropy_chunk_log2(). */
#define SZ_ENTROPY_CHUNK_LOG2 16

/** A symbol table (a parsed file, §5.3): `tensors` tensors of `period` channels, each channel mapped to one of
 *  `groups` probability tables. The pointers point into the caller's file bytes. */
typedef struct sz_symbol_table {
  uint8_t dtype;          /* sz_dtype */
  uint8_t symbol_bits;    /* B: 8, or 5 for fp16 */
  uint8_t reserved[2];    /* 0 */
  uint32_t period;        /* channels per tensor */
  uint32_t tensors;       /* tensors (a KV cache: layers * 2, K then V of each layer) */
  uint32_t groups;        /* probability tables, 1..SZ_MAX_GROUPS */
  uint64_t id;            /* XXH3-64 of the file without its checksum: what frames refer to */
  const uint8_t* group_of; /* 2 * tensors * period bytes: the u16 (little-endian) group of each channel */
  const uint8_t* freq;    /* 2 * groups * (2^B + 1) bytes: u16 frequencies, the escape's last, summing to 4096 */
  const void* prepared;   /* NULL, or the decoding and encoding tables of sz_symbol_table_prepare() */
} sz_symbol_table;

/** Bytes of a symbol table file (§5.3) of this shape; 0 when the shape is out of range. */
SZ_API size_t sz_symbol_table_file_size(sz_dtype dtype, uint32_t tensors, uint32_t period, uint32_t groups);
/** Parses and checks a table file (the errors of §5.3); the table then points into src (which must outlive it),
 *  prepared = NULL. Bytes after the table are not read: compare sz_symbol_table_file_size() for exact sizes. */
SZ_API sz_status sz_symbol_table_parse(const void* src, size_t src_size, sz_symbol_table* table);
/** Bytes of caller memory that sz_symbol_table_prepare() needs for this table (about 17 KiB per group and 12 bytes
 *  per channel). */
SZ_API size_t sz_symbol_table_workspace_size(const sz_symbol_table* table);
/** Derives the lookup tables of the fast codec into the caller's workspace (any alignment) and sets
 *  table->prepared. The workspace must outlive the table's use and not move. sz_compress_entropy() and
 *  sz_decompress_entropy() need a prepared table; the reference functions take either. */
SZ_API sz_status sz_symbol_table_prepare(sz_symbol_table* table, void* workspace, size_t workspace_size);

/** Calibration: per-channel symbol histograms (u32 counts, 2^B per channel) in caller memory of
 *  sz_symbol_histogram_size() bytes, zeroed by the caller, filled by _add from sample KV laid out as `tensors`
 *  tensors of `tokens` tokens of `period` values, as sz_channel_histogram_add(). */
SZ_API size_t sz_symbol_histogram_size(sz_dtype dtype, uint32_t tensors, uint32_t period);
SZ_API sz_status sz_symbol_histogram_add(uint32_t* counts, sz_dtype dtype, uint32_t tensors, uint32_t period,
                                         const void* values, uint64_t tokens);
/** Clusters the channels into at most `groups` groups (k-means under the coded size: each channel joins the group
 *  whose distribution codes its histogram in the fewest bits), quantises each group's distribution to 12 bits with
 *  an escape frequency from the group's rare symbols, and writes the table file into dst
 *  (sz_symbol_table_file_size(dtype, tensors, period, groups) bytes suffice; *dst_size receives the size). A
 *  calibration helper, not a codec call: it allocates its working memory (SZ_ERROR_OUT_OF_MEMORY if it cannot).
 *  If bits_per_value is not NULL it receives the predicted symbol bits per value on the samples. */
SZ_API sz_status sz_symbol_calibrate(const uint32_t* counts, sz_dtype dtype, uint32_t tensors, uint32_t period,
                                     uint32_t groups, void* dst, size_t dst_capacity, size_t* dst_size,
                                     double* bits_per_value);

/** The default chunk (log2 of values) of an entropy-coded call of n values, what a NULL params or a chunk_log2 of 0
 *  gives the compress calls on the CPU and the GPU alike: SZ_ENTROPY_CHUNK_LOG2, unless that leaves the call fewer
 *  than 8192 chunks; then the largest chunk that gives it that many, but at least 2^12 values. A GPU codes and
 *  decodes a chunk per warp, so a call needs a few chunks per warp to run at speed (16 MiB of BF16 in chunks of 2^16
 *  decode about 8x slower than in chunks of 2^12); larger chunks shrink the coder state a frame carries (2^12: about
 *  1.6% of BF16 KV). A function of n alone, so every implementation writes the same frame. */
SZ_API uint32_t sz_entropy_chunk_log2(uint64_t n_values);

/** Compresses n values of tensor `tensor` of a symbol table into a version 3 frame (§4.10). params: NULL gives
 *  chunk_log2 = sz_entropy_chunk_log2(n) and checksums (a chunk_log2 of 0: that chunk with the params' flags);
 *  params->threads is ignored (one thread). The table must be
 *  prepared. No allocation: *dst_size is at most sz_compress_bound(n, dtype). The output bytes depend only on
 *  (input, dtype, table, tensor, chunk_log2, flags). */
SZ_API sz_status sz_compress_entropy(const void* src, uint64_t n_values, sz_dtype dtype,
                                     const sz_symbol_table* table, uint32_t tensor, const sz_params* params,
                                     void* dst, size_t dst_capacity, size_t* dst_size);
/** The same frame by the scalar reference coder (the oracle); the table need not be prepared. */
SZ_API sz_status sz_compress_entropy_reference(const void* src, uint64_t n_values, sz_dtype dtype,
                                               const sz_symbol_table* table, uint32_t tensor,
                                               const sz_params* params, void* dst, size_t dst_capacity,
                                               size_t* dst_size);
/** Decompresses a version 3 frame with its (prepared) symbol table; the whole frame is validated (§4.10) and
 *  nothing is allocated. A frame of another version gives SZ_ERROR_INVALID_ARGUMENT; a table that is not the
 *  frame's, SZ_ERROR_BOOK_MISMATCH. threads: 0 = one per hardware thread (threads are started for the call, for
 *  frames of at least 1 MiB of output a thread); the output never depends on it. */
SZ_API sz_status sz_decompress_entropy(const void* src, size_t src_size, const sz_symbol_table* table, void* dst,
                                       size_t dst_capacity, size_t* dst_size, unsigned threads);
SZ_API sz_status sz_decompress_entropy_reference(const void* src, size_t src_size, const sz_symbol_table* table,
                                                 void* dst, size_t dst_capacity, size_t* dst_size);
/* Paired rows (docs/FORMAT.md §4.10.6, §5.4). Where a token occurs again, the early layers' rows of FP8 KV repeat
 * much of the row of its previous occurrence (the first layer's V row is a function of the token). A row map gives
 * each row (`period` values: one token of the tensor) either no pair or an earlier row; a paired FP8 frame codes a
 * value equal to the paired row's value in the same column as one reserved symbol (0x7F, a NaN in both FP8 formats),
 * which the tables give its measured frequency. Both ends build the same map (from the request's token ids, which
 * the decode side has too) or ship it once; frames name it by identifier. The map costs nothing in the frames. */

/** A row map (a parsed file, §5.4); the pointer points into the caller's file bytes. */
typedef struct sz_row_map {
  uint32_t rows;       /* R: the map serves frames of up to R * period values */
  uint32_t reserved;   /* 0 */
  uint64_t id;         /* XXH3-64 of the file without its checksum: what frames refer to */
  const uint8_t* pair; /* 4 * rows bytes: u32 (little-endian) each, 0 = no pair, else the paired row + 1 (<= r) */
} sz_row_map;

/** Bytes of a row map file of `rows` rows; 0 when rows is 0 or above 2^28. */
SZ_API size_t sz_row_map_file_size(uint64_t rows);
/** Parses and checks a row map file (the errors of §5.4); the map then points into src, which must outlive it. */
SZ_API sz_status sz_row_map_parse(const void* src, size_t src_size, sz_row_map* map);
/** Bytes of caller memory that the builders below need for `rows` rows (a hash table: 24 to 48 bytes a row). */
SZ_API size_t sz_row_map_workspace_size(uint64_t rows);
/** Writes the row map file that pairs each row with the previous row of the same token id (tokens[r]: the token of
 *  row r), into dst (sz_row_map_file_size(rows) bytes suffice; *dst_size receives the size). No allocation. */
SZ_API sz_status sz_row_map_from_tokens(const uint32_t* tokens, uint64_t rows, void* workspace,
                                        size_t workspace_size, void* dst, size_t dst_capacity, size_t* dst_size);
/** The same from a tensor whose rows identify the token (the first layer's V: rows of row_bytes bytes each,
 *  back to back): each row is paired with the previous row of the same bytes. For callers without token ids. */
SZ_API sz_status sz_row_map_from_rows(const void* values, uint64_t rows, size_t row_bytes, void* workspace,
                                      size_t workspace_size, void* dst, size_t dst_capacity, size_t* dst_size);

/** sz_compress_entropy() with a row map: for FP8 dtypes a paired frame (§4.10.6) whose rows are `period` values of
 *  the table; the map must have at least ceil(n / period) rows. A NULL map gives sz_compress_entropy()'s frame;
 *  a map with another dtype, SZ_ERROR_INVALID_ARGUMENT. The output bytes depend only on (input, dtype, table,
 *  tensor, map, chunk_log2, flags). */
SZ_API sz_status sz_compress_entropy_paired(const void* src, uint64_t n_values, sz_dtype dtype,
                                            const sz_symbol_table* table, uint32_t tensor, const sz_row_map* map,
                                            const sz_params* params, void* dst, size_t dst_capacity,
                                            size_t* dst_size);
SZ_API sz_status sz_compress_entropy_paired_reference(const void* src, uint64_t n_values, sz_dtype dtype,
                                                      const sz_symbol_table* table, uint32_t tensor,
                                                      const sz_row_map* map, const sz_params* params, void* dst,
                                                      size_t dst_capacity, size_t* dst_size);
/** sz_decompress_entropy() of any version 3 frame with its row map (NULL for frames without pairs; a paired frame
 *  without its map, or with another one, gives SZ_ERROR_BOOK_MISMATCH, as sz_decompress_entropy() does). */
SZ_API sz_status sz_decompress_entropy_paired(const void* src, size_t src_size, const sz_symbol_table* table,
                                              const sz_row_map* map, void* dst, size_t dst_capacity,
                                              size_t* dst_size, unsigned threads);
SZ_API sz_status sz_decompress_entropy_paired_reference(const void* src, size_t src_size,
                                                        const sz_symbol_table* table, const sz_row_map* map,
                                                        void* dst, size_t dst_capacity, size_t* dst_size);
/** sz_symbol_histogram_add() of the symbols of paired frames: `tokens` rows of each tensor paired by `map` (which
 *  needs at least `tokens` rows; FP8 only). Tables for paired frames are calibrated on these. */
SZ_API sz_status sz_symbol_histogram_add_paired(uint32_t* counts, sz_dtype dtype, uint32_t tensors, uint32_t period,
                                                const void* values, uint64_t tokens, const sz_row_map* map);
/** The row map identifier of a paired frame (header only): 0 in *row_map_id for a frame without pairs. */
SZ_API sz_status sz_frame_row_map_ref(const void* src, size_t src_size, uint64_t* row_map_id);

/** The symbol table reference of a version 3 frame (header only): SZ_ERROR_INVALID_ARGUMENT for other versions. */
SZ_API sz_status sz_frame_table_ref(const void* src, size_t src_size, uint64_t* table_id, uint32_t* tensor,
                                    uint32_t* period);

/** What a frame holds. */
typedef struct sz_frame_info {
  uint8_t version;
  uint8_t dtype;             /* sz_dtype */
  uint8_t chunk_log2;
  uint8_t reserved0;
  uint32_t flags;
  sz_codebook codebook;
  uint64_t n_values;
  uint64_t decompressed_size; /* n_values * value size */
  uint64_t frame_size;        /* total bytes of the frame */
  uint64_t n_chunks;
  /* Filled only when the whole frame was given (stats_valid = 1); otherwise 0. */
  uint32_t stats_valid;
  uint32_t reserved1;
  uint64_t coded_chunks;
  uint64_t raw_chunks;
  uint64_t escapes;           /* total escape records in coded chunks */
} sz_frame_info;

/** Parses a frame header (needs at least SZ_FRAME_HEADER_SIZE bytes) and, when src_size covers the whole frame,
 *  its chunk index (structure only; the chunk checksums are checked by decompression). */
SZ_API sz_status sz_frame_info_get(const void* src, size_t src_size, sz_frame_info* info);

/* ---------------------------------------------------------------------------------------------------------------
 * Frame layout and frames in pieces (docs/FORMAT.md §4, §4.2, §4.3)
 *
 * Every chunk of a frame is coded on its own, and the sections of a frame are laid out by its header alone, so a
 * frame too large to hold in memory can be written from the frames of its pieces and read as frames of its pieces:
 *   - writing: compress the values piece by piece (each piece a whole number of chunks, but the last; all with the
 *     same dtype, codebook or book reference, chunk size and flags: give version 3 pieces their chunk_log2, since
 *     the default one depends on a call's size); sz_frame_builder_add() says where each section
 *     of each piece frame goes in the whole frame and rebases its chunk index; sz_frame_builder_finish() gives the
 *     whole frame's header. The result is byte for byte the frame that one call over all the values gives.
 *   - reading: sz_frame_slice_locate() says which bytes of a large frame a range of its chunks needs;
 *     sz_frame_slice() turns them into a frame of its own (header and rebased chunk index), which the decoders take.
 * Versions 1, 2 and 3 alike; in versions 2 and 3 (value i belongs to channel i mod period) every piece begins at a
 * multiple of the period. Nothing here allocates, and an error changes no output nor the builder.
 * ------------------------------------------------------------------------------------------------------------- */

/** Where the sections of a frame lie, in bytes from its first byte. Sections without bytes have size 0. */
typedef struct sz_frame_layout {
  uint64_t n_values;
  uint64_t n_chunks;
  uint64_t index_offset;     /* chunk index: 8 bytes a chunk (always SZ_FRAME_HEADER_SIZE) */
  uint64_t index_size;
  uint64_t checksums_offset; /* chunk checksums: 4 bytes a chunk with SZ_FLAG_CHECKSUMS, else none */
  uint64_t checksums_size;
  uint64_t rest_offset;      /* rest section (version 3: raw section) */
  uint64_t rest_size;
  uint64_t exponents_offset; /* exponent section (version 3: symbol section) */
  uint64_t exponents_size;
  uint64_t frame_size;       /* total bytes of the frame */
} sz_frame_layout;

/** The layout of a frame from its header (SZ_FRAME_HEADER_SIZE bytes suffice; the header is checked as the
 *  decoders check it, docs/FORMAT.md §4.1 steps 1-6, and its errors returned). */
SZ_API sz_status sz_frame_layout_get(const void* src, size_t src_size, sz_frame_layout* layout);

/** One section of a piece: at frame_offset in the whole frame, at piece_offset in the piece's own frame. */
typedef struct sz_frame_span {
  uint64_t frame_offset;
  uint64_t piece_offset;
  uint64_t size;
} sz_frame_span;

/** A piece of a frame: values [first_value, first_value + n_values), chunks [first_chunk, first_chunk + n_chunks),
 *  and where its sections lie in the whole frame and in the piece's own frame of frame_size bytes. */
typedef struct sz_frame_piece {
  uint64_t first_value;
  uint64_t n_values;
  uint64_t first_chunk;
  uint64_t n_chunks;
  uint64_t frame_size;   /* bytes of the piece's own frame */
  sz_frame_span index;   /* see sz_frame_builder_add() and sz_frame_slice_locate() */
  sz_frame_span checksums;
  sz_frame_span rest;
  sz_frame_span exponents;
} sz_frame_piece;

/** The state of a frame built from pieces: caller memory (any storage duration), set up by
 *  sz_frame_builder_begin(); its contents are private. */
typedef struct sz_frame_builder {
  uint64_t state[16];
} sz_frame_builder;

/** Starts a frame of n_values values (n_values < 2^48, else SZ_ERROR_INVALID_ARGUMENT). */
SZ_API sz_status sz_frame_builder_begin(sz_frame_builder* builder, uint64_t n_values);
/** Adds the next piece: `piece` is a whole frame (piece_size bytes, fully checked: header, chunk index; an error of
 *  the frame is returned as the decoders return it) of the values that follow those added so far. It must have the
 *  first piece's version, dtype, codebook or book reference, chunk size and flags, hold a whole number of chunks
 *  unless it ends the frame, at least one value unless the frame is empty, no more values than remain, and, in
 *  versions 2 and 3, begin at a multiple of the period: else SZ_ERROR_INVALID_ARGUMENT. *placement receives where
 *  the piece's sections go in the whole frame. Its chunk index is the one section not copied as it is: its entries
 *  are rebased onto the whole frame and written to index_out (placement->index.size bytes, else
 *  SZ_ERROR_DST_TOO_SMALL), which may be exactly the piece's own chunk index (rebased in place) but must not
 *  overlap it otherwise. The caller copies the other sections from the piece to the whole frame. */
SZ_API sz_status sz_frame_builder_add(sz_frame_builder* builder, const void* piece, size_t piece_size,
                                      void* index_out, size_t index_capacity, sz_frame_piece* placement);
/** Writes the whole frame's header (SZ_FRAME_HEADER_SIZE bytes at its offset 0, header checksum included) into
 *  header_out and its size into *frame_size (may be NULL), once pieces of all n_values values were added (else
 *  SZ_ERROR_INVALID_ARGUMENT). The builder is not changed: finish may be called again. */
SZ_API sz_status sz_frame_builder_finish(const sz_frame_builder* builder, void* header_out, size_t header_capacity,
                                         uint64_t* frame_size);

/** Where the piece of values [first_value, first_value + n_values) of a frame lies, from the frame's header
 *  (SZ_FRAME_HEADER_SIZE bytes suffice; checked as sz_frame_layout_get() does). The piece must be a whole number
 *  of chunks from a chunk boundary (the last chunk may be short), at least one value unless the frame is empty, and
 *  in versions 2 and 3 begin at a multiple of the period (a paired frame: at its start): else
 *  SZ_ERROR_INVALID_ARGUMENT. piece->index.frame_offset
 *  and .size give the bytes of the frame's chunk index that sz_frame_slice() takes: the piece's entries, preceded by
 *  the entry of the chunk before it when there is one. The checksum and rest spans are complete; the exponent span
 *  (frame_offset, size) and frame_size are known only from the index: sz_frame_slice() fills them. */
SZ_API sz_status sz_frame_slice_locate(const void* header, size_t header_size, uint64_t first_value,
                                       uint64_t n_values, sz_frame_piece* piece);
/** Writes the head of the piece's own frame (header and rebased chunk index, piece->checksums.piece_offset bytes)
 *  into dst and fills *piece completely; the caller then copies the checksum, rest and exponent spans from the
 *  frame to dst, and decodes dst as a frame of piece->frame_size bytes (at most sz_compress_bound(n_values, dtype)).
 *  `index` holds exactly the bytes that sz_frame_slice_locate() names (else SZ_ERROR_INVALID_ARGUMENT); entries
 *  that break §4.3 (or the record sizes of §4.5, §4.10.3 that the index alone shows) give SZ_ERROR_CORRUPT; dst
 *  must hold the whole piece frame (dst_capacity >= piece->frame_size, else SZ_ERROR_DST_TOO_SMALL). */
SZ_API sz_status sz_frame_slice(const void* header, size_t header_size, uint64_t first_value, uint64_t n_values,
                                const void* index, size_t index_size, void* dst, size_t dst_capacity,
                                sz_frame_piece* piece);

/* ---------------------------------------------------------------------------------------------------------------
 * CPU kernel sets. The fast codec picks, at each one-shot call and at each context's creation, the fastest kernel set
 * for this CPU among those compiled in: "avx512" (BF16), "avx2" or "portable" (the richest set the CPU runs, except
 * that AMD Zen 1 and 2, where pdep/pext are microcode, get "portable"). Every set writes the same frames; naming a
 * set is for tests and benchmarks that compare them.
 * ------------------------------------------------------------------------------------------------------------- */

/** The kernel set calls made now use: "portable", "avx2" or "avx512". */
SZ_API const char* sz_cpu_isa(void);
/** Makes this process use the kernel set `name` ("portable", "avx2", "avx512"; on a CPU without it, the richest set
 *  below it that the CPU runs); NULL or "best" returns to the fastest set for this CPU. Thread-safe; calls already
 *  running and existing contexts keep their set. SZ_ERROR_INVALID_ARGUMENT for another name (the choice is then
 *  unchanged). */
SZ_API sz_status sz_set_cpu_isa(const char* name);

/* ---------------------------------------------------------------------------------------------------------------
 * Contexts: the CPU codec without allocation or thread start per call
 *
 * A context holds what the one-shot calls get for each call: escape scratch (compression) and worker threads,
 * started at creation and parked between calls, and the CPU kernels chosen at creation. Its calls give exactly the
 * frames and statuses of sz_compress() / sz_decompress(), allocate nothing and start no thread. A context serves
 * one call at a time; use one per calling thread. Creating one is the only allocating call here: NULL when memory
 * or threads cannot be had.
 * ------------------------------------------------------------------------------------------------------------- */

typedef struct sz_cctx sz_cctx;
typedef struct sz_dctx sz_dctx;

/** A compression context for up to `threads` threads (0 = one per hardware thread; at most 256), including the
 *  calling thread: it holds about 192 KiB of scratch per thread. */
SZ_API sz_cctx* sz_cctx_create(unsigned threads);
/** Stops the context's threads and frees it; NULL is ignored. */
SZ_API void sz_cctx_free(sz_cctx* cctx);
/** The number of threads the context was made for (0 for NULL). */
SZ_API unsigned sz_cctx_threads(const sz_cctx* cctx);
/** sz_compress() on the context: the same frame for the same arguments. params->threads is ignored: a call uses
 *  the context's threads (at most one per MiB of input, as sz_compress()). */
SZ_API sz_status sz_compress_cctx(sz_cctx* cctx, const void* src, uint64_t n_values, sz_dtype dtype,
                                  const sz_codebook* codebook, const sz_params* params, void* dst,
                                  size_t dst_capacity, size_t* dst_size);

/** A decompression context for up to `threads` threads (0 = one per hardware thread; at most 256). */
SZ_API sz_dctx* sz_dctx_create(unsigned threads);
SZ_API void sz_dctx_free(sz_dctx* dctx);
SZ_API unsigned sz_dctx_threads(const sz_dctx* dctx);
/** sz_decompress() on the context, with its threads. */
SZ_API sz_status sz_decompress_dctx(sz_dctx* dctx, const void* src, size_t src_size, void* dst, size_t dst_capacity,
                                    size_t* dst_size);

/* ---------------------------------------------------------------------------------------------------------------
 * Containers: many named items in one buffer (docs/FORMAT.md §6). Parsing allocates nothing: names point into
 * the container buffer.
 * ------------------------------------------------------------------------------------------------------------- */

#define SZ_CONTAINER_HEADER_SIZE 16
#define SZ_CONTAINER_FOOTER_SIZE 32
#define SZ_CONTAINER_ALIGN 64
#define SZ_MAX_NDIM 8
#define SZ_MAX_NAME 4096

/** FRAME: a frame of the original file's values; STORED: original bytes kept as they are; BOOK: a channel book
 *  file (§5.2) that later version 2 frames of the container refer to (not part of the original file); TABLE: a
 *  symbol table file (§5.3) for version 3 frames, likewise. */
typedef enum sz_item_kind {
  SZ_ITEM_FRAME = 1,
  SZ_ITEM_STORED = 2,
  SZ_ITEM_BOOK = 3,
  SZ_ITEM_TABLE = 4,
  SZ_ITEM_ROW_MAP = 5
} sz_item_kind;

typedef struct sz_item {
  uint8_t kind;  /* sz_item_kind */
  uint8_t dtype; /* kind FRAME: the frame's dtype; STORED, BOOK: 0 */
  uint8_t ndim;
  uint8_t reserved;
  uint16_t name_size;
  const char* name; /* name_size bytes, not NUL-terminated */
  uint64_t shape[SZ_MAX_NDIM];
  uint64_t original_offset;
  uint64_t original_size;
  uint64_t data_offset;
  uint64_t data_size;
} sz_item;

/** Is this buffer a container (by its magic)? Returns 1 or 0. Needs 4 bytes. */
SZ_API int sz_is_container(const void* src, size_t src_size);
/** Is this buffer a frame (by its magic)? Returns 1 or 0. Needs 4 bytes. */
SZ_API int sz_is_frame(const void* src, size_t src_size);

/** Validates header, footer and the whole index (docs/FORMAT.md §6); *count receives the number of items.
 *  Needs no memory, so the checks across items take time quadratic in the number of items unless the index is
 *  sorted by data offset, original offset and name; sz_container_items() takes O(n log n) in every case. */
SZ_API sz_status sz_container_open(const void* src, size_t src_size, uint32_t* count);
/** Validates the container exactly as sz_container_open() does and fills items[0..*count) in index order, in
 *  O(n log n) time for n items, using the caller's array as its only scratch memory. With items == NULL (and
 *  capacity 0) it checks only header, footer and index checksum and sets *count: the size to allocate. A capacity
 *  below the item count gives SZ_ERROR_DST_TOO_SMALL (with *count set). On any error the array's contents are
 *  unspecified. The way to read every item of a large container. */
SZ_API sz_status sz_container_items(const void* src, size_t src_size, sz_item* items, uint32_t capacity,
                                    uint32_t* count);
/** Item i (0-based) of a container that sz_container_open accepted. Walks the index up to i and checks the index
 *  checksum, so each call costs O(index size): to read every item, use sz_container_items(). */
SZ_API sz_status sz_container_item(const void* src, size_t src_size, uint32_t index, sz_item* item);
/** Finds an item by name (name_size bytes). SZ_ERROR_NOT_FOUND if absent. */
SZ_API sz_status sz_container_find(const void* src, size_t src_size, const char* name, size_t name_size,
                                   uint32_t* index);

/* Reading a container from a seekable file in bounded memory: read the file's last SZ_CONTAINER_FOOTER_SIZE bytes,
 * sz_container_locate_index() says where its index lies, read those bytes, and sz_container_index_items() gives the
 * items; then read the items' bytes where they say. The index is validated exactly as sz_container_items() does,
 * but for the checks that need the header or the items' bytes, so a container whose index is accepted here may
 * still be rejected by sz_container_items() over the whole file. */

/** Where the index of a container of file_size bytes lies, from the file's last tail_size bytes (tail: at least
 *  the footer, SZ_CONTAINER_FOOTER_SIZE bytes; the last ones are used). Checks the footer's magic and checksum and
 *  that the index lies between the header and the footer. *index_offset receives where the index starts and
 *  *index_size the bytes from there to the end of the file: index and footer, the bytes sz_container_index_items()
 *  takes. SZ_ERROR_SRC_TRUNCATED if the file or the tail is too short to hold them; SZ_ERROR_INVALID_ARGUMENT if
 *  tail_size exceeds file_size. Nothing is written on error. */
SZ_API sz_status sz_container_locate_index(const void* tail, size_t tail_size, uint64_t file_size,
                                           uint64_t* index_offset, uint64_t* index_size);
/** The items of a container of file_size bytes from its index alone: index holds the file's last index_size bytes
 *  (index and footer, as sz_container_locate_index() gives them). Validates footer, index checksum and every
 *  entry as sz_container_items() does (each item lies between the header and the index, so within the file), and
 *  fills items[0..*count) in index order; names point into index. Nothing reads the header or the items' bytes.
 *  With items == NULL (and capacity 0) it checks only the footer and index checksum and sets *count; a capacity
 *  below the item count gives SZ_ERROR_DST_TOO_SMALL (with *count set). On any other error *count is unchanged and
 *  the array's contents, its scratch memory, unspecified. */
SZ_API sz_status sz_container_index_items(const void* index, size_t index_size, uint64_t file_size, sz_item* items,
                                          uint32_t capacity, uint32_t* count);

/** Size of the index plus footer that sz_container_write_index() writes for these items. */
SZ_API sz_status sz_container_index_size(const sz_item* items, uint32_t count, uint64_t* size);
/** Writes the container header (16 bytes) into dst. Items then follow, each at a 64-byte-aligned data_offset. */
SZ_API sz_status sz_container_write_header(void* dst, size_t dst_capacity);
/** Writes index and footer into dst; index_offset is where dst will sit in the container (after the last item,
 *  not before its end). Validates the items as a reader would, in O(n log n) time for n items (dst serves as
 *  scratch memory until the index is written). */
SZ_API sz_status sz_container_write_index(const sz_item* items, uint32_t count, uint64_t index_offset, void* dst,
                                          size_t dst_capacity, size_t* written);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPLITZIP_SPLITZIP_H */
