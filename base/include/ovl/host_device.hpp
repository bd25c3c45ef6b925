// OVL_HOST_DEVICE: a function written once for the kernels (nvcc: host and device) and the CUDA-free libraries.
#pragma once

#if defined(__CUDACC__)
#define OVL_HOST_DEVICE __host__ __device__
#else
#define OVL_HOST_DEVICE
#endif
