# CUDA Toolkit targets. The driver library (libcuda) is never linked: its entry points are loaded at run time
# through cudaGetDriverEntryPointByVersion, so every ovl binary starts on a machine with no driver.
find_package(CUDAToolkit 12.8 REQUIRED)
find_package(NCCL REQUIRED)
