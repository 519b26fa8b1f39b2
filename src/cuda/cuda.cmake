# The CUDA codec (src/cuda), included by src/CMakeLists.txt when SPLITZIP_ENABLE_CUDA is ON. The layers are headers:
#   simt.cuh (primitives) -> dtype.cuh (a lane's values) -> warp/ (I/O, look-back, checksum)
#   -> agent/ (a chunk: encode.cuh, decode.cuh, entropy_decode.cuh, entropy_encode.cuh, header.cuh)
#   -> dispatch.cuh (which kernel, its arguments)
#   -> kernels.cuh (entry points; kernels_*.cu instantiate them, one TU per dtype) -> api.cu (the C ABI, launches)
# handoff.cu stands alone: the stream-ordered flags of a GPU-to-GPU hand-off (sz_cuda_signal / sz_cuda_wait).
target_sources(splitzip PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/api.cu
  ${CMAKE_CURRENT_LIST_DIR}/handoff.cu
  ${CMAKE_CURRENT_LIST_DIR}/kernels_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/kernels_fp16.cu
  ${CMAKE_CURRENT_LIST_DIR}/kernels_fp32.cu
  ${CMAKE_CURRENT_LIST_DIR}/kernels_fp8_e4m3.cu
  ${CMAKE_CURRENT_LIST_DIR}/kernels_fp8_e5m2.cu
  ${CMAKE_CURRENT_LIST_DIR}/kernels_decode.cu
  ${CMAKE_CURRENT_LIST_DIR}/kernels_entropy.cu
  ${CMAKE_CURRENT_LIST_DIR}/kernels_entropy_encode.cu)
target_compile_definitions(splitzip PUBLIC SPLITZIP_HAS_CUDA=1)
target_compile_options(splitzip PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
target_link_libraries(splitzip PUBLIC CUDA::cudart_static)
