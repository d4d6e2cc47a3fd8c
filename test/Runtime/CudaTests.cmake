#===- test/Runtime/CudaTests.cmake - CUDA backend unit tests ---------------===#
#
# Included from test/Runtime/CMakeLists.txt.
# DscLossScalerTest: the host-side dynamic loss scaler (header-only, no
#   CUDA) against DeepSpeed's goldens (Inputs/loss-scale): built and run
#   everywhere, label "runtime".
# DscCudaKernelTests (only with DSC_HAVE_CUDA): every CUDA kernel against
#   its CPU twin. Without a device the binary exits 77, which ctest reports
#   as skipped: `ctest -L cuda` says the CUDA tests were skipped, not passed.
#   Without nvcc a placeholder test is reported as skipped instead.
# DscNcclCommunicatorTests (only when DscRuntimeNccl is built): the NCCL
#   communicator on min(devices, 4) GPUs as thread ranks; exits 77 (skipped)
#   without a device, like the kernel tests.
# DscCudaBackendTests (when the CUDA executor backend is built): the
#   executor on a GPU against the CPU backend, on the gpt-tiny plans in
#   Inputs/; exits 77 (skipped) without a device.
#
#===------------------------------------------------------------------------===#
add_executable(DscLossScalerTest LossScalerTest.cpp)
target_include_directories(DscLossScalerTest PRIVATE
                           ${DSC_SOURCE_DIR}/include)
target_link_libraries(DscLossScalerTest PRIVATE LLVMSupport
                      GTest::gtest_main)
target_compile_definitions(DscLossScalerTest PRIVATE
  DSC_LOSS_SCALE_GOLDENS_DIR="${CMAKE_CURRENT_SOURCE_DIR}/Inputs/loss-scale")
gtest_discover_tests(DscLossScalerTest
  TEST_PREFIX "runtime." PROPERTIES LABELS runtime
  DISCOVERY_TIMEOUT 60)

if(DSC_HAVE_CUDA AND TARGET DscRuntimeCuda)
  add_executable(DscCudaKernelTests CudaKernelTest.cpp)
  target_link_libraries(DscCudaKernelTests PRIVATE DscRuntimeCuda
                        DscRuntimeCpu GTest::gtest)
  gtest_discover_tests(DscCudaKernelTests
    TEST_PREFIX "cuda."
    PROPERTIES LABELS cuda SKIP_RETURN_CODE 77
               ENVIRONMENT "${DSC_RT_TEST_ENV}"
    DISCOVERY_TIMEOUT 60)
else()
  # No nvcc: one placeholder that ctest reports as skipped, so `ctest -L
  # cuda` says the CUDA tests were skipped instead of finding none.
  add_test(NAME cuda.CudaKernelTests.NotBuilt
           COMMAND ${CMAKE_COMMAND} -E echo
                   "CUDA backend not built (no nvcc): CUDA kernel tests skipped")
  set_tests_properties(cuda.CudaKernelTests.NotBuilt PROPERTIES
    LABELS cuda SKIP_REGULAR_EXPRESSION "tests skipped")
endif()

if(TARGET DscRuntimeNccl)
  add_executable(DscNcclCommunicatorTests NcclCommunicatorTest.cpp)
  target_link_libraries(DscNcclCommunicatorTests PRIVATE DscRuntimeNccl
                        GTest::gtest)
  # A short watchdog: a broken collective fails the test in a minute
  # instead of the default ten.
  gtest_discover_tests(DscNcclCommunicatorTests
    TEST_PREFIX "cuda."
    PROPERTIES LABELS cuda SKIP_RETURN_CODE 77 TIMEOUT 180
               ENVIRONMENT "DSC_NCCL_TIMEOUT_S=60"
    DISCOVERY_TIMEOUT 60)
endif()

if(TARGET DscRuntimeCudaBackend AND TARGET DscRuntimeNccl AND
   TARGET DscRuntimeData)
  add_executable(DscCudaBackendTests CudaBackendTest.cpp)
  target_link_libraries(DscCudaBackendTests PRIVATE DscRuntimeExec DscRuntimeCudaBackend
                        DscRuntimeData DscRuntimeComm GTest::gtest)
  target_compile_definitions(DscCudaBackendTests PRIVATE
    DSC_TEST_INPUTS="${CMAKE_CURRENT_SOURCE_DIR}/Inputs")
  gtest_discover_tests(DscCudaBackendTests
    TEST_PREFIX "cuda."
    PROPERTIES LABELS cuda SKIP_RETURN_CODE 77 TIMEOUT 300
               ENVIRONMENT "DSC_NCCL_TIMEOUT_S=60;${DSC_RT_TEST_ENV}"
    DISCOVERY_TIMEOUT 60)
endif()
