/*
 * The C surface of edged's TensorRT shim: opaque handles, plain structs,
 * and an int status from every call that can fail, with the reason written
 * into a caller-provided buffer in the same call (TensorRT's error recorder
 * and logger messages included). Nothing is kept in thread-local state, so a
 * goroutine may move between OS threads between two calls.
 *
 * CUDA context: TensorRT is a CUDA runtime API library and runs in the
 * context current on the calling thread, or the device's primary context
 * when none is. Every function here that reaches TensorRT requires the
 * caller's OS thread to have the primary context current: the Go side calls
 * them only inside GPU.Do (umem.Worker, a locked thread on which umem made
 * the primary context current), so the shim itself never touches CUDA.
 *
 * Release order is the one TensorRT requires: an engine handle deletes its
 * execution context, then (when it is the last handle sharing the engine,
 * edged_trt_engine_share) the engine, then the engine's error recorder; a runtime
 * handle must outlive its engines and deletes the runtime, its recorder and
 * finally its logger.
 */
#ifndef EDGED_TRT_SHIM_H
#define EDGED_TRT_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include "loader.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
enum {
	EDGED_TRT_OK = 0,
	EDGED_TRT_ERROR = 1,          /* a TensorRT call failed; see the message */
	EDGED_TRT_BAD_ENGINE = 2,     /* deserialisation failed */
	EDGED_TRT_NO_MEMORY = 3,      /* TensorRT reported a failed allocation */
	EDGED_TRT_EXCEPTION = 4,      /* a C++ exception was caught at the boundary */
	EDGED_TRT_NO_DLA = 5          /* the DLA core asked for is not on this device */
};

#define EDGED_TRT_MAX_DIMS 8
#define EDGED_TRT_LOG_MSG 512

typedef struct edged_trt_runtime edged_trt_runtime;
typedef struct edged_trt_engine edged_trt_engine;

typedef struct edged_trt_version {
	int32_t major, minor, patch, build;
} edged_trt_version;

/* The TensorRT version of the headers the shim was compiled against. */
void edged_trt_header_version(edged_trt_version* v);

typedef struct edged_trt_runtime_options {
	int32_t allow_host_code;  /* setEngineHostCodeAllowed (8.6+): version-compatible engines */
	int32_t log_severity;     /* keep log records with ILogger::Severity <= this */
	int32_t log_capacity;     /* records kept for draining; older ones are dropped */
	int32_t dla_core;         /* IRuntime::setDLACore before any deserialisation; -1: the GPU */
} edged_trt_runtime_options;

/*
 * Creates a runtime through lib (opened with edged_trt_lib_open, whose
 * version the caller has already compared with the headers'), with its own
 * logger and error recorder. With dla_core >= 0 the device must have that
 * DLA core (getNbDLACores), else EDGED_TRT_NO_DLA; the runtime then
 * deserialises its engines for it.
 */
int edged_trt_runtime_new(const edged_trt_lib* lib, const edged_trt_runtime_options* opts, edged_trt_runtime** out,
	char* err, size_t errcap);

/* Deletes the runtime, its recorder and its logger. All engines must be freed first. */
void edged_trt_runtime_free(edged_trt_runtime* rt);

/* IRuntime::getNbDLACores: the DLA cores TensorRT can use on this device. */
int32_t edged_trt_runtime_dla_cores(edged_trt_runtime* rt);


typedef struct edged_trt_log_record {
	int32_t severity; /* nvinfer1::ILogger::Severity */
	char msg[EDGED_TRT_LOG_MSG];
} edged_trt_log_record;

/*
 * Moves up to n of the oldest kept log records into out and returns how
 * many; *dropped receives the number of records lost to overflow since the
 * last drain.
 */
int32_t edged_trt_runtime_drain_log(edged_trt_runtime* rt, edged_trt_log_record* out, int32_t n, uint64_t* dropped);

/*
 * The logger TensorRT's plugin libraries are initialised with. It lives as
 * long as the process (plugin libraries keep the logger they are given);
 * its records are drained with edged_trt_plugin_drain_log.
 */
void* edged_trt_plugin_logger(void);

/* As edged_trt_runtime_drain_log, for the plugin logger. */
int32_t edged_trt_plugin_drain_log(edged_trt_log_record* out, int32_t n, uint64_t* dropped);

/*
 * Deserialises a plan, gives the engine its own error recorder, creates one
 * execution context and selects optimisation profile 0 on stream (calls are
 * serialised per runtime). The plan bytes are not retained.
 */
int edged_trt_engine_new(edged_trt_runtime* rt, const void* plan, size_t size, uintptr_t stream, const char* name,
	edged_trt_engine** out, char* err, size_t errcap);

/*
 * Makes another handle on base's engine (not deserialised again): its own
 * execution context and error recorder, profile 0 selected on stream. The
 * engine is shared: it is deleted with the last handle on it.
 */
int edged_trt_engine_share(edged_trt_engine* base, uintptr_t stream, const char* name, edged_trt_engine** out, char* err,
	size_t errcap);

/* The engine behind a handle, the same for every handle shared from it (an identity only). */
const void* edged_trt_engine_shared(edged_trt_engine* e);

/* Deletes the execution context, then, with the last handle on it, the engine and its recorder. */
void edged_trt_engine_free(edged_trt_engine* e);

/* Number of I/O tensors. */
int32_t edged_trt_engine_nb_io(edged_trt_engine* e);

/* Activation memory the execution context holds, in bytes. */
int64_t edged_trt_engine_device_memory(edged_trt_engine* e);

typedef struct edged_trt_tensor {
	const char* name;  /* owned by the engine */
	int32_t mode;      /* TensorIOMode: 1 input, 2 output */
	int32_t dtype;     /* DataType */
	int32_t format;    /* TensorFormat; 0 is kLINEAR */
	int32_t location;  /* TensorLocation: 0 device, 1 host */
	int32_t shape_io;  /* isShapeInferenceIO */
	int32_t nbdims;
	int64_t dims[EDGED_TRT_MAX_DIMS];    /* -1 marks a dynamic dimension */
	int32_t has_profile;                 /* min, opt and max are set */
	int64_t min[EDGED_TRT_MAX_DIMS];     /* profile 0, inputs only */
	int64_t opt[EDGED_TRT_MAX_DIMS];
	int64_t max[EDGED_TRT_MAX_DIMS];
	char format_desc[128];
} edged_trt_tensor;

/* Describes I/O tensor index (0 <= index < nb_io). */
int edged_trt_engine_tensor(edged_trt_engine* e, int32_t index, edged_trt_tensor* out, char* err, size_t errcap);

/* IExecutionContext::setInputShape. */
int edged_trt_set_input_shape(edged_trt_engine* e, const char* name, int32_t nbdims, const int64_t* dims, char* err,
	size_t errcap);

/* IExecutionContext::getTensorShape: the resolved shape once all input shapes are set. */
int edged_trt_context_shape(edged_trt_engine* e, const char* name, int32_t* nbdims, int64_t* dims, char* err,
	size_t errcap);

/* IExecutionContext::setTensorAddress; addr must be 256-byte aligned. */
int edged_trt_set_address(edged_trt_engine* e, const char* name, uintptr_t addr, char* err, size_t errcap);

/* IExecutionContext::enqueueV3 on stream. The caller synchronises the stream. */
int edged_trt_enqueue(edged_trt_engine* e, uintptr_t stream, char* err, size_t errcap);

#ifdef __cplusplus
}
#endif

#endif
