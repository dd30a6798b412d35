# Locates LibTorch and decides whether the CUDA kernels are built.
#
# Order: CMAKE_PREFIX_PATH / Torch_DIR set by the user, then the `torch` wheel of the project's virtual
# environment (.venv) or of CABERT_PYTHON, located with torch.utils.cmake_prefix_path.
#
# A CUDA-enabled LibTorch (the PyPI wheel) makes find_package(Torch) require a CUDA toolkit at configure
# time. Where none is installed, or with -DCABERT_CUDA=OFF, we import only the CPU libraries of that same
# LibTorch (libtorch_cpu + libc10): the binary then runs on CPU and says "built without CUDA" if asked
# for a GPU.

if(NOT DEFINED CABERT_PYTHON)
  if(EXISTS "${CMAKE_SOURCE_DIR}/.venv/bin/python")
    set(CABERT_PYTHON "${CMAKE_SOURCE_DIR}/.venv/bin/python")
  else()
    find_program(CABERT_PYTHON NAMES python3 python)
  endif()
endif()

find_path(_cabert_torch_config TorchConfig.cmake PATH_SUFFIXES share/cmake/Torch lib/cmake/Torch)
set(_cabert_torch_prefix "")
if(_cabert_torch_config)
  get_filename_component(_cabert_torch_prefix "${_cabert_torch_config}/../../.." ABSOLUTE)
elseif(DEFINED Torch_DIR AND EXISTS "${Torch_DIR}/TorchConfig.cmake")
  get_filename_component(_cabert_torch_prefix "${Torch_DIR}/../../.." ABSOLUTE)
elseif(CABERT_PYTHON)
  execute_process(
    COMMAND "${CABERT_PYTHON}" -c "import torch, os; print(os.path.dirname(torch.__file__))"
    OUTPUT_VARIABLE _cabert_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET RESULT_VARIABLE _cabert_py_rc)
  if(NOT _cabert_py_rc EQUAL 0)
    set(_cabert_torch_prefix "")
  endif()
endif()
if(NOT _cabert_torch_prefix OR NOT EXISTS "${_cabert_torch_prefix}/share/cmake/Torch/TorchConfig.cmake")
  message(FATAL_ERROR "LibTorch not found: install the `torch` wheel into .venv (scripts/setup.sh does), "
                      "or pass -DCMAKE_PREFIX_PATH=<libtorch>")
endif()
message(STATUS "cabert: LibTorch at ${_cabert_torch_prefix}")

set(_cabert_torch_has_cuda OFF)
if(EXISTS "${_cabert_torch_prefix}/lib/libtorch_cuda.so")
  set(_cabert_torch_has_cuda ON)
endif()

set(CABERT_WITH_CUDA OFF)
if(NOT CABERT_CUDA STREQUAL "OFF" AND _cabert_torch_has_cuda)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS "/usr/local/cuda/bin/nvcc")
    set(CMAKE_CUDA_COMPILER "/usr/local/cuda/bin/nvcc")
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CABERT_WITH_CUDA ON)
  endif()
endif()
if(CABERT_CUDA STREQUAL "ON" AND NOT CABERT_WITH_CUDA)
  message(FATAL_ERROR "CABERT_CUDA=ON but no CUDA compiler or no CUDA-enabled LibTorch was found")
endif()

add_library(cabert_torch INTERFACE)
add_library(cabert::torch ALIAS cabert_torch)
# The wheel's libtorch_cpu (libtorch in torch 2.11) exports a std::filesystem of its own, unversioned and built
# by another GCC. Where the linker meets it before libstdc++, it binds cabert's std::filesystem calls to it (the
# references lose their GLIBCXX version, and LibTorch's copy serves them at run time): mixed with this compiler's
# inline parts, a remove_all jumped to address 0 (GCC 13.3, torch 2.11).
# libstdc++ is therefore the first shared library the linker meets: the first item of this target's link
# libraries, after the objects and static archives and before LibTorch. A link option (before the objects) did
# it for GNU ld 2.40, but not for Ubuntu 24.04's ld 2.42, which left libstdc++ after LibTorch (probed on the
# H200 machine, 2026-11-29). --no-as-needed keeps it in the list of needed libraries.
target_link_libraries(cabert_torch INTERFACE "-Wl,--push-state,--no-as-needed,-lstdc++,--pop-state")

if(CABERT_WITH_CUDA OR NOT _cabert_torch_has_cuda)
  if(CABERT_WITH_CUDA)
    if(NOT DEFINED TORCH_CUDA_ARCH_LIST)
      set(TORCH_CUDA_ARCH_LIST "7.0;8.0;8.6;8.9;9.0" CACHE STRING "CUDA architectures for cabert kernels")
    endif()
    enable_language(CUDA)
    # LibTorch 2.15's headers need C++20, in .cu files too. CMake 3.25 predates nvcc's C++20 support: teach it
    # the flag (harmless on newer CMake, which already knows it).
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
      set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
    endif()
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${_cabert_torch_prefix}/share/cmake")
  find_package(Torch REQUIRED CONFIG)
  target_link_libraries(cabert_torch INTERFACE ${TORCH_LIBRARIES})
  target_include_directories(cabert_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  separate_arguments(_cabert_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  target_compile_options(cabert_torch INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${_cabert_torch_flags}>)
  # The wheel's libtorch_cuda finds its CUDA libraries through its own RPATH at run time; the linker needs
  # to be told where they are so that it does not pick an older system copy (e.g. NCCL in /usr/local/cuda).
  file(GLOB _cabert_nvidia_dirs LIST_DIRECTORIES true "${_cabert_torch_prefix}/../nvidia/*/lib")
  foreach(_dir IN LISTS _cabert_nvidia_dirs)
    target_link_options(cabert_torch INTERFACE "LINKER:-rpath-link,${_dir}")
  endforeach()
  # Data parallelism on GPUs: ProcessGroupNCCL (in libtorch_cuda) with the wheel's own nccl.h.
  find_path(_cabert_nccl_include nccl.h PATHS "${_cabert_torch_prefix}/../nvidia/nccl/include" NO_DEFAULT_PATH)
  if(CABERT_WITH_CUDA AND _cabert_nccl_include)
    target_include_directories(cabert_torch SYSTEM INTERFACE "${_cabert_nccl_include}")
    target_compile_definitions(cabert_torch INTERFACE CABERT_WITH_NCCL=1)
    message(STATUS "cabert: NCCL for data-parallel training on GPUs (${_cabert_nccl_include})")
  endif()
else()
  message(STATUS "cabert: CUDA-enabled LibTorch without a CUDA toolkit (or CABERT_CUDA=OFF): "
                 "linking its CPU libraries only")
  find_library(_cabert_torch_cpu torch_cpu PATHS "${_cabert_torch_prefix}/lib" NO_DEFAULT_PATH REQUIRED)
  find_library(_cabert_c10 c10 PATHS "${_cabert_torch_prefix}/lib" NO_DEFAULT_PATH REQUIRED)
  target_link_libraries(cabert_torch INTERFACE "${_cabert_torch_cpu}" "${_cabert_c10}" Threads::Threads)
  target_include_directories(cabert_torch SYSTEM INTERFACE
    "${_cabert_torch_prefix}/include" "${_cabert_torch_prefix}/include/torch/csrc/api/include")
  target_compile_options(cabert_torch INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-D_GLIBCXX_USE_CXX11_ABI=1>)
  # c10d's Gloo process group (data parallelism on CPU), as TorchConfig.cmake would declare it.
  target_compile_definitions(cabert_torch INTERFACE USE_DISTRIBUTED USE_C10D_GLOO)
  # Recent LibTorch headers need C++20 (TorchConfig.cmake adds cxx_std_20 to its `torch` target); mirror it.
  file(STRINGS "${_cabert_torch_prefix}/share/cmake/Torch/TorchConfig.cmake" _cabert_torch_cxx20 REGEX "cxx_std_20")
  if(_cabert_torch_cxx20)
    target_compile_features(cabert_torch INTERFACE cxx_std_20)
  endif()
  set_property(TARGET cabert_torch APPEND PROPERTY INTERFACE_LINK_DIRECTORIES "${_cabert_torch_prefix}/lib")
  target_link_options(cabert_torch INTERFACE "LINKER:-rpath,${_cabert_torch_prefix}/lib")
endif()

if(CABERT_WITH_CUDA)
  target_compile_definitions(cabert_torch INTERFACE CABERT_WITH_CUDA=1)
endif()
message(STATUS "cabert: CUDA kernels ${CABERT_WITH_CUDA}")
