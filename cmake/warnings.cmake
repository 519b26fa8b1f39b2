# The project's warning flags for C++ sources, in one place: -Wall -Wextra with GCC and Clang, and -Werror when
# SPLITZIP_WERROR is on (CI). CUDA sources of a target keep nvcc's defaults.
function(splitzip_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra>")
    if(SPLITZIP_WERROR)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
    endif()
  endif()
endfunction()
