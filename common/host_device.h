/* TS_HOST_DEVICE marks a header's inline function as callable from host and GPU code alike under
 * nvcc (__host__ __device__), and is empty for the C compiler: small formulas shared by a CPU kernel
 * and its CUDA twin are written once. */
#ifndef TS_HOST_DEVICE_H
#define TS_HOST_DEVICE_H

#ifdef __CUDACC__
#define TS_HOST_DEVICE __host__ __device__
#else
#define TS_HOST_DEVICE
#endif

#endif
