# The CUDA codec (src/cuda), included by src/CMakeLists.txt when SPLITZIP_ENABLE_CUDA is ON.
target_sources(splitzip PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/api.cu
  ${CMAKE_CURRENT_LIST_DIR}/encode.cu
  ${CMAKE_CURRENT_LIST_DIR}/decode.cu)
target_compile_definitions(splitzip PUBLIC SPLITZIP_HAS_CUDA=1)
target_compile_options(splitzip PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
target_link_libraries(splitzip PUBLIC CUDA::cudart_static)
