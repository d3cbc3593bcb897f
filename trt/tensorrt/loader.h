/*
 * Binding libnvinfer at run time. Plain C, no TensorRT headers: the two
 * symbols a runtime-only TensorRT user needs are looked up with dlsym, so
 * edged links and starts without TensorRT installed.
 */
#ifndef EDGED_TRT_LOADER_H
#define EDGED_TRT_LOADER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes of edged_trt_lib_open. */
enum {
	EDGED_TRT_LIB_OK = 0,
	EDGED_TRT_LIB_NOT_FOUND = 1, /* no name could be opened */
	EDGED_TRT_LIB_NO_SYMBOL = 2  /* a library opened but lacks a symbol */
};

typedef void* (*edged_trt_create_runtime_fn)(void* logger, int32_t version);
typedef int32_t (*edged_trt_lib_version_fn)(void);

typedef struct edged_trt_lib {
	void* handle; /* never dlclosed: libnvinfer is not safe to unload */
	edged_trt_create_runtime_fn create_runtime; /* createInferRuntime_INTERNAL */
	edged_trt_lib_version_fn lib_version;       /* getInferLibVersion */
	int32_t version;                            /* getInferLibVersion() */
	char name[256];                             /* the name that opened */
} edged_trt_lib;

/*
 * Opens the first of names[0..n) that dlopen accepts and that exports both
 * createInferRuntime_INTERNAL and getInferLibVersion, and reads its
 * version. On failure it writes "name: reason; name: reason" for every name
 * tried into err (always NUL-terminated) and returns a nonzero code.
 * Thread-safe: dlerror is read in the same call, on the same thread.
 */
int edged_trt_lib_open(const char* const* names, int n, edged_trt_lib* lib, char* err, size_t errcap);

/* Result codes of edged_trt_plugin_open, besides EDGED_TRT_LIB_OK,
 * EDGED_TRT_LIB_NOT_FOUND (dlopen failed) and EDGED_TRT_LIB_NO_SYMBOL (no
 * init function). */
enum {
	EDGED_TRT_PLUGIN_INIT_FAILED = 3 /* the init function returned false */
};

/*
 * Opens a TensorRT plugin library (RTLD_LAZY | RTLD_LOCAL, as trtexec
 * does; never closed: its creators stay registered with libnvinfer).
 * Loading a custom plugin library registers its plugins from its static
 * initialisers. When init is not NULL, the function of that name
 * (initLibNvInferPlugins for TensorRT's standard library) is called with
 * logger and the empty namespace; the library keeps the logger, which
 * must therefore live as long as the process. err receives dlerror's
 * text (always NUL-terminated).
 */
int edged_trt_plugin_open(const char* path, const char* init, void* logger, char* err, size_t errcap);

#ifdef __cplusplus
}
#endif

#endif
