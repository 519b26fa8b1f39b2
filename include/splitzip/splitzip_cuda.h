/*
 * splitzip_cuda.h — the CUDA codec: the same frames as splitzip.h (docs/FORMAT.md), byte for byte, on a GPU.
 *
 * Conventions (in addition to splitzip.h):
 *   - Pointers named d_* are device memory; h_* are host memory (pinned when an asynchronous copy targets them).
 *   - Every call is enqueued on the given stream and returns at once: nothing here allocates memory or
 *     synchronises the host. Host-side argument checks (NULL pointers, sizes, codebook, capacity below the bound)
 *     return their status immediately and enqueue nothing.
 *   - Errors found on the device (a corrupt frame) are written as an sz_status (int32) to d_status; read it after the
 *     stream has reached that point. The decoder never reads or writes outside the buffers given, whatever the frame.
 *   - Workspace: call the *_workspace_size query, allocate at least that many device bytes and zero-fill them ONCE,
 *     before the first call that uses them (cudaMemset at allocation). Every call leaves its workspace ready for the
 *     next call, so calls need no memset and may be captured in a CUDA graph and replayed. A workspace may be reused
 *     by any later call (compress or decompress, any size it is large enough for) on the same stream, in stream
 *     order; calls that may run at the same time (different streams) need their own. A call given a workspace that
 *     was never zero-filled changes nothing and reports it on the device: *d_frame_size = 0 (compress) or
 *     *d_status = SZ_ERROR_INVALID_ARGUMENT (decompress).
 *   - One kernel launch per call: nothing else is enqueued (but the optional pinned copy of the frame size), and the
 *     host does no work beyond the argument checks and the launch. The kernel is launched with programmatic stream
 *     serialization (programmatic dependent launch, sm_90): it may become resident while the stream's previous
 *     kernel finishes, but reads and writes no global memory before that kernel has completed, so stream order holds
 *     as for any launch; it lets the stream's next kernel start early likewise (a kernel of another library that
 *     does so must wait for it with cudaGridDependencySynchronize before reading this call's output).
 *   - In a build without CUDA every function returns SZ_ERROR_NOT_SUPPORTED and sz_cuda_available() returns 0.
 *   - Kernels: one family for every frame (docs/FORMAT.md; src/cuda): a warp per chunk, every dtype, chunk size,
 *     code width, checksums on or off, contiguous or paged, any alignment; frames byte-identical to the CPU codec.
 */
#ifndef SPLITZIP_SPLITZIP_CUDA_H
#define SPLITZIP_SPLITZIP_CUDA_H

#include "splitzip.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The runtime's stream handle, declared here so that this header does not need cuda_runtime.h. */
typedef struct CUstream_st* sz_cuda_stream;

/** 1 if the library was built with CUDA and a CUDA device is visible, else 0. */
SZ_API int sz_cuda_available(void);

/** Device bytes of workspace that sz_cuda_compress() needs for n values (64 + 16 per chunk, rounded up). */
SZ_API sz_status sz_cuda_compress_workspace_size(uint64_t n_values, sz_dtype dtype, const sz_params* params,
                                                 size_t* workspace_size);

/** Compresses n values at d_src into the frame at d_dst, in one pass over the input.
 *  dst_capacity must be at least sz_compress_bound(n, dtype) (checked on the host: SZ_ERROR_DST_TOO_SMALL).
 *  codebook / params: as sz_compress(); params->threads is ignored.
 *  The frame size is written to *d_frame_size (device, required) and, if h_frame_size is not NULL, also copied
 *  asynchronously to *h_frame_size (pinned host memory; valid once the stream reaches that point). */
SZ_API sz_status sz_cuda_compress(const void* d_src, uint64_t n_values, sz_dtype dtype, const sz_codebook* codebook,
                                  const sz_params* params, void* d_dst, size_t dst_capacity, void* d_workspace,
                                  size_t workspace_size, uint64_t* d_frame_size, uint64_t* h_frame_size,
                                  sz_cuda_stream stream);

/** Device bytes of workspace that sz_cuda_decompress() and sz_cuda_decompress_pages() need (256 today: the call's
 *  error and completion count; query it anyway). */
SZ_API sz_status sz_cuda_decompress_workspace_size(size_t src_size, size_t dst_capacity, size_t* workspace_size);

/** Decompresses the frame at d_src (src_size bytes) into d_dst, in one pass, validating everything it reads.
 *  *d_status receives SZ_OK or the error (SZ_ERROR_DST_TOO_SMALL if dst_capacity < the frame's decompressed size);
 *  if d_dst_size is not NULL it receives the number of bytes written (0 on error).
 *  src_size may exceed the frame (docs/FORMAT.md §4.1 step 7 rejects only a buffer shorter than the frame; the frame's
 *  size is in its header): a receive buffer of sz_compress_bound() bytes decodes as it is, with the frame's size never
 *  known to the host. The bytes past the frame are not read. */
SZ_API sz_status sz_cuda_decompress(const void* d_src, size_t src_size, void* d_dst, size_t dst_capacity,
                                    void* d_workspace, size_t workspace_size, int32_t* d_status, uint64_t* d_dst_size,
                                    sz_cuda_stream stream);

/* ---------------------------------------------------------------------------------------------------------------
 * Paged KV: a serving engine's KV cache is a set of equal-size pages (blocks). These calls compress the pages of
 * one request straight from the cache into one frame, and scatter a frame straight into the pages of another
 * cache, in one launch each. The frame is exactly the frame of the concatenation of the pages, in list order.
 * ------------------------------------------------------------------------------------------------------------- */

/** Workspace for sz_cuda_compress_pages (same as sz_cuda_compress for n_pages * page_values values). */
SZ_API sz_status sz_cuda_compress_pages_workspace_size(uint32_t n_pages, uint64_t page_values, sz_dtype dtype,
                                                       const sz_params* params, size_t* workspace_size);

/** d_pages: device array of n_pages device pointers, each to page_values values. */
SZ_API sz_status sz_cuda_compress_pages(const void* const* d_pages, uint32_t n_pages, uint64_t page_values,
                                        sz_dtype dtype, const sz_codebook* codebook, const sz_params* params,
                                        void* d_dst, size_t dst_capacity, void* d_workspace, size_t workspace_size,
                                        uint64_t* d_frame_size, uint64_t* h_frame_size, sz_cuda_stream stream);

/** d_pages: device array of n_pages device pointers, each with room for page_values values. The frame must hold
 *  exactly n_pages * page_values values (else SZ_ERROR_DST_TOO_SMALL / SZ_ERROR_INVALID_ARGUMENT in *d_status). */
SZ_API sz_status sz_cuda_decompress_pages(const void* d_src, size_t src_size, void* const* d_pages, uint32_t n_pages,
                                          uint64_t page_values, void* d_workspace, size_t workspace_size,
                                          int32_t* d_status, sz_cuda_stream stream);

/* ---------------------------------------------------------------------------------------------------------------
 * Channel windows (version 2 frames, docs/FORMAT.md §4.9). In these calls the sz_channel_book's `bases` point to
 * DEVICE memory (a copy of the host bases, tensors * period bytes); its other fields, and its id, are those that
 * sz_channel_book_init computed on the host copy. Workspaces and sizes are those of the calls above.
 * ------------------------------------------------------------------------------------------------------------- */

/** Compresses n values of tensor `tensor` of the book into a version 2 frame, like sz_cuda_compress. */
SZ_API sz_status sz_cuda_compress_channels(const void* d_src, uint64_t n_values, sz_dtype dtype,
                                           const sz_channel_book* book, uint32_t tensor, const sz_params* params,
                                           void* d_dst, size_t dst_capacity, void* d_workspace, size_t workspace_size,
                                           uint64_t* d_frame_size, uint64_t* h_frame_size, sz_cuda_stream stream);
/** The paged form (the frame of the pages' concatenation, in list order). */
SZ_API sz_status sz_cuda_compress_pages_channels(const void* const* d_pages, uint32_t n_pages, uint64_t page_values,
                                                 sz_dtype dtype, const sz_channel_book* book, uint32_t tensor,
                                                 const sz_params* params, void* d_dst, size_t dst_capacity,
                                                 void* d_workspace, size_t workspace_size, uint64_t* d_frame_size,
                                                 uint64_t* h_frame_size, sz_cuda_stream stream);
/** Decompresses any frame like sz_cuda_decompress; version 2 frames with `book` (may be NULL for version 1 only:
 *  a version 2 frame then gives SZ_ERROR_BOOK_MISMATCH in *d_status). */
SZ_API sz_status sz_cuda_decompress_book(const void* d_src, size_t src_size, const sz_channel_book* book, void* d_dst,
                                         size_t dst_capacity, void* d_workspace, size_t workspace_size,
                                         int32_t* d_status, uint64_t* d_dst_size, sz_cuda_stream stream);
SZ_API sz_status sz_cuda_decompress_pages_book(const void* d_src, size_t src_size, const sz_channel_book* book,
                                               void* const* d_pages, uint32_t n_pages, uint64_t page_values,
                                               void* d_workspace, size_t workspace_size, int32_t* d_status,
                                               sz_cuda_stream stream);

/* ---------------------------------------------------------------------------------------------------------------
 * Entropy-coded frames (version 3, docs/FORMAT.md §4.10). The coder reads the symbol table from a device image
 * that the host builds once per table (these two calls are host code, in every build, CUDA or not; the image
 * holds what the kernels look up, laid out for them: it is the library's in-memory form, never stored) and the
 * caller copies to device memory (cudaMemcpy; 16-byte aligned). A warp codes a chunk (its 32 rANS lanes are the
 * warp's lanes), so speed grows with the chunks in flight: 2^16-value chunks (the recommended size) give 2048 per
 * 256 MiB of BF16; smaller chunks code faster on the GPU for smaller calls, at 132 bytes of state per chunk.
 * ------------------------------------------------------------------------------------------------------------- */

/** Bytes of the device image of a valid symbol table (parsed or filled in; prepared or not); 0 if not valid. */
SZ_API size_t sz_cuda_symbol_table_image_size(const sz_symbol_table* table);
/** Writes the table's device image into host memory dst (a set-up call: it allocates working memory; *image_size,
 *  if not NULL, receives the size). SZ_ERROR_BAD_CODEBOOK for an invalid table. */
SZ_API sz_status sz_cuda_symbol_table_image(const sz_symbol_table* table, void* dst, size_t dst_capacity,
                                            size_t* image_size);
/** Device bytes of workspace that sz_cuda_compress_entropy() needs for n values (params as there: NULL gives
 *  sz_entropy_chunk_log2(n)): 64 + 16 per chunk, rounded up, plus a staging slot of a chunk's raw symbol bytes
 *  (2^chunk_log2 * B / 8 bytes and 16: 64 KiB for 2^16 BF16 values) for each warp the call can use, at most one per
 *  chunk and at most 2112 whatever n (132 MiB for 2^16-value BF16 chunks, 8.3 MiB for 2^12). */
SZ_API sz_status sz_cuda_compress_entropy_workspace_size(uint64_t n_values, sz_dtype dtype, const sz_params* params,
                                                         size_t* workspace_size);
/** Compresses n values at d_src (any alignment) of tensor `tensor` of a symbol table into a version 3 frame at d_dst,
 *  byte for byte the frame of sz_compress_entropy() with the same arguments, in one pass over the input.
 *  d_image / image_size: the table's device image (sz_cuda_symbol_table_image, 16-byte aligned). params: as
 *  sz_compress_entropy (NULL: sz_entropy_chunk_log2(n) and the default flags; threads ignored). dst_capacity must be at
 *  least sz_compress_bound(n, dtype) (checked on the host: SZ_ERROR_DST_TOO_SMALL); the workspace, 16-byte aligned,
 *  at least sz_cuda_compress_entropy_workspace_size() bytes, zero-filled once (see above). The frame size is written
 *  to *d_frame_size and, if h_frame_size is not NULL, copied asynchronously to *h_frame_size, as sz_cuda_compress.
 *  The host cannot read the image: an image that is not a valid image of a table of this dtype with more than
 *  `tensor` tensors is found by the kernel, which then writes *d_frame_size = 0 and nothing else (as for a workspace
 *  that was never zero-filled). */
SZ_API sz_status sz_cuda_compress_entropy(const void* d_src, uint64_t n_values, sz_dtype dtype, const void* d_image,
                                          size_t image_size, uint32_t tensor, const sz_params* params, void* d_dst,
                                          size_t dst_capacity, void* d_workspace, size_t workspace_size,
                                          uint64_t* d_frame_size, uint64_t* h_frame_size, sz_cuda_stream stream);
/** Decompresses a version 3 frame in device memory with the device image of its table (d_image, image_size bytes)
 *  into a contiguous output, as sz_cuda_decompress does for the other versions: the workspace of
 *  sz_cuda_decompress_workspace_size, *d_status and *d_dst_size written by the kernel; a frame of another version
 *  gives SZ_ERROR_INVALID_ARGUMENT in *d_status (as sz_decompress_entropy returns), an
 *  image of another table SZ_ERROR_BOOK_MISMATCH. Version 3 frames only: versions 1 and 2 decode with
 *  sz_cuda_decompress(_book). Paired frames (FP8 with a row map, §4.10.6) are coded and decoded on the CPU only:
 *  here they give SZ_ERROR_BOOK_MISMATCH (the kernels take no row map), as the CPU does without the map. */
SZ_API sz_status sz_cuda_decompress_entropy(const void* d_src, size_t src_size, const void* d_image,
                                            size_t image_size, void* d_dst, size_t dst_capacity, void* d_workspace,
                                            size_t workspace_size, int32_t* d_status, uint64_t* d_dst_size,
                                            sz_cuda_stream stream);

/* ---------------------------------------------------------------------------------------------------------------
 * Stream-ordered hand-off between GPUs of one node (or streams of one GPU). A sender encodes into a buffer that
 * lives in the receiver's memory (CUDA IPC or peer access), then signals a flag; the receiver's stream waits for the
 * flag, then decodes. Sizes stay in device memory (the decoder reads the frame size from the frame: see
 * sz_cuda_decompress); the host only enqueues. Flags are 8-byte aligned uint64 words in device memory (the caller's,
 * a peer's, or pinned mapped host memory) that only grow: a flag holds the count of what it announces (frames
 * written into a slot, slots freed), so a wait for `value` is satisfied by any later signal too.
 * Each call enqueues one one-thread kernel, launched as an ordinary kernel (not a programmatic dependent): it
 * starts after everything earlier in the stream has completed, and nothing later in the stream starts before it has
 * completed, whatever those kernels' launch attributes. Both are graph-capturable (a kernel node each).
 * A wait whose value never comes holds its stream (and its kernel one thread slot of one SM) until it does: the
 * caller's protocol must guarantee the signal, and a caller that needs a timeout watches the stream from the host.
 * ------------------------------------------------------------------------------------------------------------- */

/** After all earlier work of `stream`, makes that work's memory writes (including writes into a peer's memory)
 *  visible system-wide (a system-scope fence), then stores value to *d_flag with a system-scope release store.
 *  d_flag may be in a peer's memory. SZ_ERROR_INVALID_ARGUMENT: d_flag NULL or not 8-byte aligned (nothing
 *  enqueued); SZ_ERROR_CUDA: the launch failed. */
SZ_API sz_status sz_cuda_signal(uint64_t* d_flag, uint64_t value, sz_cuda_stream stream);

/** Later work of `stream` starts only once *d_flag >= value (unsigned): a one-thread kernel polls the flag with
 *  system-scope acquire loads (exponential __nanosleep backoff up to 1 us between loads), so what the signalling
 *  side wrote before its sz_cuda_signal is visible to everything after the wait. d_flag may be in a peer's memory.
 *  Errors as sz_cuda_signal. */
SZ_API sz_status sz_cuda_wait(const uint64_t* d_flag, uint64_t value, sz_cuda_stream stream);

/** A set-up call (not stream-ordered, not capturable; it changes the current device's context): lets kernels of the
 *  current device read and write memory of peer_device (cudaDeviceEnablePeerAccess; memory this process imported by
 *  CUDA IPC under peer_device, as torch does, is meant to be covered too: not yet confirmed on a two-GPU machine).
 *  SZ_OK if peer_device is the current device or access is already
 *  enabled; SZ_ERROR_INVALID_ARGUMENT for a device ordinal that does not exist; SZ_ERROR_NOT_SUPPORTED if the two
 *  devices cannot access each other (no NVLink or PCIe peer path). */
SZ_API sz_status sz_cuda_enable_peer_access(int peer_device);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPLITZIP_SPLITZIP_CUDA_H */
