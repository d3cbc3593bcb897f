/*
 * The part of CUDA's runtime API header that TensorRT's public headers use:
 * two opaque handle types. TensorRT includes <cuda_runtime_api.h> only for
 * these, so edged needs no CUDA toolkit to compile its TensorRT shim. The
 * typedefs have the shape of the real ones in driver_types.h
 * (typedef struct CUstream_st *cudaStream_t), so the ABI is identical, and a
 * CUstream from the driver API is the same handle.
 */
#ifndef EDGED_CUDA_RUNTIME_API_STUB_H
#define EDGED_CUDA_RUNTIME_API_STUB_H

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;

#endif
