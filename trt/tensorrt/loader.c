//go:build cgo && linux

#include "loader.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void appendf(char* err, size_t cap, const char* fmt, ...) {
	size_t len;
	va_list ap;
	if (cap == 0) {
		return;
	}
	len = strnlen(err, cap);
	if (len >= cap - 1) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err + len, cap - len, fmt, ap);
	va_end(ap);
}

int edged_trt_lib_open(const char* const* names, int n, edged_trt_lib* lib, char* err, size_t errcap) {
	int code = EDGED_TRT_LIB_NOT_FOUND;
	int i;
	memset(lib, 0, sizeof(*lib));
	if (errcap > 0) {
		err[0] = '\0';
	}
	for (i = 0; i < n; i++) {
		const char* why;
		void* h;
		void* create;
		void* version;
		if (i > 0) {
			appendf(err, errcap, "; ");
		}
		dlerror();
		h = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
		if (h == NULL) {
			why = dlerror();
			appendf(err, errcap, "%s", why ? why : names[i]);
			continue;
		}
		dlerror();
		create = dlsym(h, "createInferRuntime_INTERNAL");
		version = dlsym(h, "getInferLibVersion");
		if (create == NULL || version == NULL) {
			appendf(err, errcap, "%s: opened, but it does not export %s (not a TensorRT runtime library)", names[i],
				create == NULL ? "createInferRuntime_INTERNAL" : "getInferLibVersion");
			dlclose(h);
			code = EDGED_TRT_LIB_NO_SYMBOL;
			continue;
		}
		lib->handle = h;
		/* POSIX allows converting dlsym's void* to a function pointer. */
		memcpy(&lib->create_runtime, &create, sizeof(create));
		memcpy(&lib->lib_version, &version, sizeof(version));
		lib->version = lib->lib_version();
		snprintf(lib->name, sizeof(lib->name), "%s", names[i]);
		if (errcap > 0) {
			err[0] = '\0';
		}
		return EDGED_TRT_LIB_OK;
	}
	return code;
}

int edged_trt_plugin_open(const char* path, const char* init, void* logger, char* err, size_t errcap) {
	const char* why;
	void* h;
	void* sym;
	_Bool (*initfn)(void*, const char*);
	if (errcap > 0) {
		err[0] = '\0';
	}
	dlerror();
	h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) {
		why = dlerror();
		appendf(err, errcap, "%s", why ? why : path);
		return EDGED_TRT_LIB_NOT_FOUND;
	}
	if (init == NULL) {
		return EDGED_TRT_LIB_OK;
	}
	dlerror();
	sym = dlsym(h, init);
	if (sym == NULL) {
		appendf(err, errcap, "%s: opened, but it does not export %s (not TensorRT's plugin library)", path, init);
		return EDGED_TRT_LIB_NO_SYMBOL;
	}
	memcpy(&initfn, &sym, sizeof(sym));
	if (!initfn(logger, "")) {
		appendf(err, errcap, "%s: %s returned false", path, init);
		return EDGED_TRT_PLUGIN_INIT_FAILED;
	}
	return EDGED_TRT_LIB_OK;
}
