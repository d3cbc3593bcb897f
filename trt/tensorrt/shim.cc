//go:build tensorrt && cgo && linux

// edged's TensorRT shim. It is compiled against the TensorRT headers of one
// major version (TENSORRT_INCLUDE, or the JetPack default
// /usr/include/aarch64-linux-gnu) and calls libnvinfer only through the two
// function pointers that loader.c looked up with dlsym; everything else in
// TensorRT's runtime API is an inline header wrapper over virtual calls.

#include "shim.h"

#include <NvInferRuntime.h>
#include <NvInferVersion.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <type_traits>
#include <vector>

#define EDGED_TRT_VER_GE(maj, min) \
	(NV_TENSORRT_MAJOR > (maj) || (NV_TENSORRT_MAJOR == (maj) && NV_TENSORRT_MINOR >= (min)))

#if !EDGED_TRT_VER_GE(8, 5)
#error "edged needs TensorRT 8.5 or later headers (the name-based I/O API)"
#endif

using namespace nvinfer1;

namespace {

// Msg writes a message into a caller-provided buffer, always NUL-terminated.
struct Msg {
	char* buf;
	size_t cap;

	void clear() {
		if (cap > 0) {
			buf[0] = '\0';
		}
	}
	bool empty() const { return cap == 0 || buf[0] == '\0'; }
	void vappend(char const* fmt, va_list ap) {
		if (cap == 0) {
			return;
		}
		size_t len = strnlen(buf, cap);
		if (len + 1 >= cap) {
			return;
		}
		vsnprintf(buf + len, cap - len, fmt, ap);
	}
	void append(char const* fmt, ...) __attribute__((format(printf, 2, 3))) {
		va_list ap;
		va_start(ap, fmt);
		vappend(fmt, ap);
		va_end(ap);
	}
	// part appends a clause, separated from what is there by "; ".
	void part(char const* fmt, ...) __attribute__((format(printf, 2, 3))) {
		if (!empty()) {
			append("; ");
		}
		va_list ap;
		va_start(ap, fmt);
		vappend(fmt, ap);
		va_end(ap);
	}
};

void copyStr(char* dst, size_t cap, char const* src) {
	if (cap == 0) {
		return;
	}
	if (src == nullptr) {
		src = "";
	}
	size_t n = strnlen(src, cap - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

char const* errorCodeName(ErrorCode c) {
	switch (c) {
	case ErrorCode::kSUCCESS: return "kSUCCESS";
	case ErrorCode::kUNSPECIFIED_ERROR: return "kUNSPECIFIED_ERROR";
	case ErrorCode::kINTERNAL_ERROR: return "kINTERNAL_ERROR";
	case ErrorCode::kINVALID_ARGUMENT: return "kINVALID_ARGUMENT";
	case ErrorCode::kINVALID_CONFIG: return "kINVALID_CONFIG";
	case ErrorCode::kFAILED_ALLOCATION: return "kFAILED_ALLOCATION";
	case ErrorCode::kFAILED_INITIALIZATION: return "kFAILED_INITIALIZATION";
	case ErrorCode::kFAILED_EXECUTION: return "kFAILED_EXECUTION";
	case ErrorCode::kFAILED_COMPUTATION: return "kFAILED_COMPUTATION";
	case ErrorCode::kINVALID_STATE: return "kINVALID_STATE";
	case ErrorCode::kUNSUPPORTED_STATE: return "kUNSUPPORTED_STATE";
	}
	return "unknown error code";
}

// Logger keeps TensorRT's log records in a bounded ring that Go drains, and
// the last error records with a sequence number, so a failed call can
// return the errors logged since it started without thread-local state.
class Logger : public ILogger {
public:
	Logger(int32_t keep, int32_t capacity) : mKeep(keep), mRing(capacity > 0 ? capacity : 1) {}

	void log(Severity severity, AsciiChar const* msg) noexcept override {
		try {
			std::lock_guard<std::mutex> g(mMu);
			int32_t s = static_cast<int32_t>(severity);
			uint64_t seq = ++mSeq;
			if (s <= static_cast<int32_t>(Severity::kERROR)) {
				Err& e = mErrs[mErrN % kErrs];
				e.seq = seq;
				copyStr(e.msg, sizeof(e.msg), msg);
				mErrN++;
			}
			if (s > mKeep) {
				return;
			}
			if (mCount == mRing.size()) { // full: drop the oldest
				mHead = (mHead + 1) % mRing.size();
				mCount--;
				mDropped++;
			}
			edged_trt_log_record& r = mRing[(mHead + mCount) % mRing.size()];
			r.severity = s;
			copyStr(r.msg, sizeof(r.msg), msg);
			mCount++;
		} catch (...) {
			// A logger must not throw; losing a record is the lesser harm.
		}
	}

	// mark returns the sequence number of the last record.
	uint64_t mark() {
		std::lock_guard<std::mutex> g(mMu);
		return mSeq;
	}

	// errorsSince appends the error records logged after mark.
	void errorsSince(uint64_t mark, Msg& m) {
		std::lock_guard<std::mutex> g(mMu);
		size_t n = mErrN < kErrs ? mErrN : kErrs;
		for (size_t i = 0; i < n; i++) {
			Err const& e = mErrs[(mErrN - n + i) % kErrs];
			if (e.seq > mark) {
				m.part("TensorRT log: %s", e.msg);
			}
		}
	}

	int32_t drain(edged_trt_log_record* out, int32_t n, uint64_t* dropped) {
		std::lock_guard<std::mutex> g(mMu);
		int32_t k = 0;
		while (k < n && mCount > 0) {
			out[k++] = mRing[mHead];
			mHead = (mHead + 1) % mRing.size();
			mCount--;
		}
		if (dropped != nullptr) {
			*dropped = mDropped;
		}
		mDropped = 0;
		return k;
	}

private:
	static constexpr size_t kErrs = 16;
	struct Err {
		uint64_t seq;
		char msg[EDGED_TRT_LOG_MSG];
	};

	std::mutex mMu;
	int32_t mKeep;
	std::vector<edged_trt_log_record> mRing;
	size_t mHead{0};
	size_t mCount{0};
	uint64_t mDropped{0};
	uint64_t mSeq{0};
	Err mErrs[kErrs]{};
	size_t mErrN{0};
};

// Recorder is one handle's IErrorRecorder: TensorRT reports the errors of
// calls on that handle here, and the shim returns them from the same call.
class Recorder : public IErrorRecorder {
public:
	int32_t getNbErrors() const noexcept override { return mN.load(); }

	ErrorCode getErrorCode(int32_t i) const noexcept override {
		std::lock_guard<std::mutex> g(mMu);
		return valid(i) ? mErr[i].code : ErrorCode::kINVALID_ARGUMENT;
	}

	IErrorRecorder::ErrorDesc getErrorDesc(int32_t i) const noexcept override {
		std::lock_guard<std::mutex> g(mMu);
		return valid(i) ? mErr[i].desc : "error index out of range";
	}

	bool hasOverflowed() const noexcept override { return mOverflow.load(); }

	void clear() noexcept override {
		try {
			std::lock_guard<std::mutex> g(mMu);
			mN.store(0);
			mOverflow.store(false);
		} catch (...) {
		}
	}

	bool reportError(ErrorCode code, IErrorRecorder::ErrorDesc desc) noexcept override {
		try {
			std::lock_guard<std::mutex> g(mMu);
			int32_t n = mN.load();
			if (n >= kMax) {
				mOverflow.store(true);
			} else {
				mErr[n].code = code;
				copyStr(mErr[n].desc, sizeof(mErr[n].desc), desc);
				mN.store(n + 1);
			}
		} catch (...) {
		}
		return true; // every error ends the current call
	}

	IErrorRecorder::RefCount incRefCount() noexcept override { return ++mRefs; }
	IErrorRecorder::RefCount decRefCount() noexcept override { return --mRefs; }

	// take appends the recorded errors to m, reports whether one of them is
	// a failed allocation, and clears the recorder.
	bool take(Msg& m) {
		bool oom = false;
		try {
			std::lock_guard<std::mutex> g(mMu);
			int32_t n = mN.load();
			for (int32_t i = 0; i < n; i++) {
				m.part("TensorRT %s: %s", errorCodeName(mErr[i].code), mErr[i].desc);
				oom = oom || mErr[i].code == ErrorCode::kFAILED_ALLOCATION;
			}
			if (mOverflow.load()) {
				m.part("more TensorRT errors were dropped");
			}
			mN.store(0);
			mOverflow.store(false);
		} catch (...) {
		}
		return oom;
	}

private:
	static constexpr int32_t kMax = 8;
	struct Entry {
		ErrorCode code;
		char desc[EDGED_TRT_LOG_MSG];
	};
	bool valid(int32_t i) const { return i >= 0 && i < mN.load(); }

	mutable std::mutex mMu;
	Entry mErr[kMax]{};
	std::atomic<int32_t> mN{0};
	std::atomic<bool> mOverflow{false};
	std::atomic<int32_t> mRefs{0};
};

using DimValue = std::remove_reference<decltype(Dims{}.d[0])>::type;

bool toDims(int32_t nb, int64_t const* in, Dims& out) {
	if (nb < 0 || nb > Dims::MAX_DIMS || nb > EDGED_TRT_MAX_DIMS) {
		return false;
	}
	out.nbDims = nb;
	for (int32_t i = 0; i < nb; i++) {
		if (static_cast<int64_t>(static_cast<DimValue>(in[i])) != in[i]) {
			return false; // does not fit TensorRT 8's int32 dimensions
		}
		out.d[i] = static_cast<DimValue>(in[i]);
	}
	return true;
}

bool fromDims(Dims const& d, int32_t* nb, int64_t* out) {
	if (d.nbDims < 0 || d.nbDims > EDGED_TRT_MAX_DIMS) {
		return false;
	}
	*nb = d.nbDims;
	for (int32_t i = 0; i < d.nbDims; i++) {
		out[i] = static_cast<int64_t>(d.d[i]);
	}
	return true;
}

} // namespace

struct edged_trt_runtime {
	edged_trt_runtime(edged_trt_lib const& l, int32_t keep, int32_t capacity) : lib(l), logger(keep, capacity) {}

	edged_trt_lib lib;
	Logger logger;     // destroyed last: TensorRT requires it to outlive everything
	Recorder recorder; // the runtime's; destroyed after the runtime
	IRuntime* runtime{nullptr};
	std::mutex mu; // serialises deserialisation, whose errors go to recorder
};

// edged_trt_shared is one deserialised engine and the recorder of its
// engine-level calls, shared by every handle made from it
// (edged_trt_engine_share) and deleted with the last of them.
struct edged_trt_shared {
	Recorder recorder; // the engine's; outlives it
	ICudaEngine* engine{nullptr};
	std::atomic<int> refs{1}; // handles on it
};

struct edged_trt_engine {
	explicit edged_trt_engine(edged_trt_runtime* r) : rt(r) {}

	edged_trt_runtime* rt;
	edged_trt_shared* shared{nullptr};
	Recorder recorder; // the execution context's; outlives it
	ICudaEngine* engine{nullptr}; // shared->engine
	IExecutionContext* ctx{nullptr};
};


// fail finishes a failed call's message with the handle's recorded errors
// and the errors logged since mark, and returns the status.
static int fail(Msg& m, Recorder& rec, Logger& log, uint64_t mark, int status) {
	bool oom = rec.take(m);
	log.errorsSince(mark, m);
	if (oom && status == EDGED_TRT_ERROR) {
		status = EDGED_TRT_NO_MEMORY;
	}
	return status;
}

static int caught(Msg& m, char const* what) {
	m.part("C++ exception in the TensorRT shim: %s", what);
	return EDGED_TRT_EXCEPTION;
}

// newContext gives handle e (its engine set) its execution context: its
// own recorder, its name and optimization profile 0 on stream.
static int newContext(edged_trt_engine* e, uintptr_t stream, char const* name, Msg& m, uint64_t mark) {
	e->ctx = e->engine->createExecutionContext();
	if (e->ctx == nullptr) {
		m.part("creating an execution context failed");
		return fail(m, e->shared->recorder, e->rt->logger, mark, EDGED_TRT_ERROR);
	}
	e->ctx->setErrorRecorder(&e->recorder);
	if (name != nullptr) {
		e->ctx->setName(name);
	}
	// 8.5 gives only the first context of an engine profile 0 implicitly,
	// so always select it.
	if (e->engine->getNbOptimizationProfiles() > 0 &&
		!e->ctx->setOptimizationProfileAsync(0, reinterpret_cast<cudaStream_t>(stream))) {
		m.part("selecting optimization profile 0 failed");
		return fail(m, e->recorder, e->rt->logger, mark, EDGED_TRT_ERROR);
	}
	return EDGED_TRT_OK;
}

extern "C" {

void edged_trt_header_version(edged_trt_version* v) {
	v->major = NV_TENSORRT_MAJOR;
	v->minor = NV_TENSORRT_MINOR;
	v->patch = NV_TENSORRT_PATCH;
	v->build = NV_TENSORRT_BUILD;
}

int edged_trt_runtime_new(edged_trt_lib const* lib, edged_trt_runtime_options const* opts, edged_trt_runtime** out,
	char* err, size_t errcap) {
	Msg m{err, errcap};
	m.clear();
	*out = nullptr;
	edged_trt_runtime* rt = nullptr;
	try {
		rt = new edged_trt_runtime(*lib, opts->log_severity, opts->log_capacity);
		uint64_t mark = rt->logger.mark();
		rt->runtime = static_cast<IRuntime*>(
			lib->create_runtime(static_cast<ILogger*>(&rt->logger), static_cast<int32_t>(NV_TENSORRT_VERSION)));
		if (rt->runtime == nullptr) {
			m.part("%s: createInferRuntime_INTERNAL returned no runtime", lib->name);
			rt->logger.errorsSince(mark, m);
			delete rt;
			return EDGED_TRT_ERROR;
		}
		rt->runtime->setErrorRecorder(&rt->recorder);
#if EDGED_TRT_VER_GE(8, 6)
		rt->runtime->setEngineHostCodeAllowed(opts->allow_host_code != 0);
#endif
		if (opts->dla_core >= 0) {
			// Before any deserialisation: an engine built for a DLA core is
			// deserialised for the runtime's core.
			int32_t n = rt->runtime->getNbDLACores();
			if (opts->dla_core >= n) {
				if (n == 0) {
					m.part("DLA core %d requested (dla_core), but TensorRT finds no DLA cores on this device", opts->dla_core);
				} else {
					m.part("DLA core %d requested (dla_core), but this device has %d DLA cores (0 to %d)", opts->dla_core, n, n - 1);
				}
				delete rt->runtime;
				rt->runtime = nullptr;
				delete rt;
				return EDGED_TRT_NO_DLA;
			}
			rt->runtime->setDLACore(opts->dla_core);
			if (rt->runtime->getDLACore() != opts->dla_core) {
				m.part("IRuntime::setDLACore(%d) did not take (getDLACore is %d)", opts->dla_core, rt->runtime->getDLACore());
				delete rt->runtime;
				rt->runtime = nullptr;
				delete rt;
				return EDGED_TRT_NO_DLA;
			}
		}
		*out = rt;
		return EDGED_TRT_OK;
	} catch (std::exception const& ex) {
		delete rt;
		return caught(m, ex.what());
	} catch (...) {
		delete rt;
		return caught(m, "unknown");
	}
}

void edged_trt_runtime_free(edged_trt_runtime* rt) {
	if (rt == nullptr) {
		return;
	}
	delete rt->runtime;
	rt->runtime = nullptr;
	delete rt; // recorder, then logger
}

int32_t edged_trt_runtime_dla_cores(edged_trt_runtime* rt) { return rt->runtime->getNbDLACores(); }

// pluginLogger is never destroyed: TensorRT's plugin libraries keep the
// logger they were initialised with for the life of the process.
static Logger* pluginLogger() {
	static Logger* l = new Logger(static_cast<int32_t>(ILogger::Severity::kINFO), 64);
	return l;
}

void* edged_trt_plugin_logger(void) {
	try {
		return static_cast<ILogger*>(pluginLogger());
	} catch (...) {
		return nullptr;
	}
}

int32_t edged_trt_plugin_drain_log(edged_trt_log_record* out, int32_t n, uint64_t* dropped) {
	try {
		return pluginLogger()->drain(out, n, dropped);
	} catch (...) {
		return 0;
	}
}

int32_t edged_trt_runtime_drain_log(edged_trt_runtime* rt, edged_trt_log_record* out, int32_t n, uint64_t* dropped) {
	try {
		return rt->logger.drain(out, n, dropped);
	} catch (...) {
		return 0;
	}
}

int edged_trt_engine_new(edged_trt_runtime* rt, void const* plan, size_t size, uintptr_t stream, char const* name,
	edged_trt_engine** out, char* err, size_t errcap) {
	Msg m{err, errcap};
	m.clear();
	*out = nullptr;
	edged_trt_engine* e = nullptr;
	try {
		std::lock_guard<std::mutex> g(rt->mu);
		uint64_t mark = rt->logger.mark();
		rt->recorder.clear();
		ICudaEngine* engine = rt->runtime->deserializeCudaEngine(plan, size);
		if (engine == nullptr) {
			m.part("deserializing the engine failed");
			int st = fail(m, rt->recorder, rt->logger, mark, EDGED_TRT_BAD_ENGINE);
			return st;
		}
		e = new edged_trt_engine(rt);
		e->shared = new edged_trt_shared();
		e->shared->engine = e->engine = engine;
		engine->setErrorRecorder(&e->shared->recorder);
		if (int st = newContext(e, stream, name, m, mark); st != EDGED_TRT_OK) {
			edged_trt_engine_free(e);
			return st;
		}
		*out = e;
		return EDGED_TRT_OK;
	} catch (std::exception const& ex) {
		edged_trt_engine_free(e);
		return caught(m, ex.what());
	} catch (...) {
		edged_trt_engine_free(e);
		return caught(m, "unknown");
	}
}

int edged_trt_engine_share(edged_trt_engine* base, uintptr_t stream, char const* name, edged_trt_engine** out, char* err,
	size_t errcap) {
	Msg m{err, errcap};
	m.clear();
	*out = nullptr;
	edged_trt_engine* e = nullptr;
	try {
		std::lock_guard<std::mutex> g(base->rt->mu);
		uint64_t mark = base->rt->logger.mark();
		base->shared->recorder.clear();
		e = new edged_trt_engine(base->rt);
		e->shared = base->shared;
		e->shared->refs++;
		e->engine = base->engine;
		if (int st = newContext(e, stream, name, m, mark); st != EDGED_TRT_OK) {
			edged_trt_engine_free(e);
			return st;
		}
		*out = e;
		return EDGED_TRT_OK;
	} catch (std::exception const& ex) {
		edged_trt_engine_free(e);
		return caught(m, ex.what());
	} catch (...) {
		edged_trt_engine_free(e);
		return caught(m, "unknown");
	}
}

const void* edged_trt_engine_shared(edged_trt_engine* e) { return e->shared; }

void edged_trt_engine_free(edged_trt_engine* e) {
	if (e == nullptr) {
		return;
	}
	delete e->ctx;
	e->ctx = nullptr;
	edged_trt_shared* sh = e->shared;
	if (sh != nullptr && --sh->refs == 0) {
		delete sh->engine; // after every context made from it
		delete sh;         // then its recorder
	}
	e->engine = nullptr;
	delete e; // the context's recorder
}

int32_t edged_trt_engine_nb_io(edged_trt_engine* e) { return e->engine->getNbIOTensors(); }

int64_t edged_trt_engine_device_memory(edged_trt_engine* e) {
#if EDGED_TRT_VER_GE(10, 1)
	return e->engine->getDeviceMemorySizeV2();
#else
	return static_cast<int64_t>(e->engine->getDeviceMemorySize());
#endif
}

int edged_trt_engine_tensor(edged_trt_engine* e, int32_t index, edged_trt_tensor* out, char* err, size_t errcap) {
	Msg m{err, errcap};
	m.clear();
	try {
		uint64_t mark = e->rt->logger.mark();
		memset(out, 0, sizeof(*out));
		ICudaEngine* eng = e->engine;
		char const* name = eng->getIOTensorName(index);
		if (name == nullptr) {
			m.part("I/O tensor %d has no name", index);
			return fail(m, e->shared->recorder, e->rt->logger, mark, EDGED_TRT_ERROR);
		}
		out->name = name;
		out->mode = static_cast<int32_t>(eng->getTensorIOMode(name));
		out->dtype = static_cast<int32_t>(eng->getTensorDataType(name));
		out->format = static_cast<int32_t>(eng->getTensorFormat(name));
		out->location = static_cast<int32_t>(eng->getTensorLocation(name));
		out->shape_io = eng->isShapeInferenceIO(name) ? 1 : 0;
		copyStr(out->format_desc, sizeof(out->format_desc), eng->getTensorFormatDesc(name));
		if (!fromDims(eng->getTensorShape(name), &out->nbdims, out->dims)) {
			m.part("tensor %s: TensorRT reports no valid shape", name);
			return fail(m, e->shared->recorder, e->rt->logger, mark, EDGED_TRT_ERROR);
		}
		if (out->mode == static_cast<int32_t>(TensorIOMode::kINPUT) && !out->shape_io &&
			eng->getNbOptimizationProfiles() > 0) {
			int32_t nb = 0;
			if (!fromDims(eng->getProfileShape(name, 0, OptProfileSelector::kMIN), &nb, out->min) ||
				!fromDims(eng->getProfileShape(name, 0, OptProfileSelector::kOPT), &nb, out->opt) ||
				!fromDims(eng->getProfileShape(name, 0, OptProfileSelector::kMAX), &nb, out->max) ||
				nb != out->nbdims) {
				m.part("input %s: TensorRT reports no valid shapes for optimization profile 0", name);
				return fail(m, e->shared->recorder, e->rt->logger, mark, EDGED_TRT_ERROR);
			}
			out->has_profile = 1;
		}
		return EDGED_TRT_OK;
	} catch (std::exception const& ex) {
		return caught(m, ex.what());
	} catch (...) {
		return caught(m, "unknown");
	}
}

int edged_trt_set_input_shape(edged_trt_engine* e, char const* name, int32_t nbdims, int64_t const* dims, char* err,
	size_t errcap) {
	Msg m{err, errcap};
	m.clear();
	try {
		uint64_t mark = e->rt->logger.mark();
		Dims d{};
		if (!toDims(nbdims, dims, d)) {
			m.part("input %s: shape with %d dimensions does not fit this TensorRT's Dims", name, nbdims);
			return EDGED_TRT_ERROR;
		}
		if (!e->ctx->setInputShape(name, d)) {
			m.part("input %s: setInputShape refused the shape", name);
			return fail(m, e->recorder, e->rt->logger, mark, EDGED_TRT_ERROR);
		}
		return EDGED_TRT_OK;
	} catch (std::exception const& ex) {
		return caught(m, ex.what());
	} catch (...) {
		return caught(m, "unknown");
	}
}

int edged_trt_context_shape(edged_trt_engine* e, char const* name, int32_t* nbdims, int64_t* dims, char* err,
	size_t errcap) {
	Msg m{err, errcap};
	m.clear();
	try {
		uint64_t mark = e->rt->logger.mark();
		if (!fromDims(e->ctx->getTensorShape(name), nbdims, dims)) {
			m.part("tensor %s: the execution context reports no valid shape", name);
			return fail(m, e->recorder, e->rt->logger, mark, EDGED_TRT_ERROR);
		}
		return EDGED_TRT_OK;
	} catch (std::exception const& ex) {
		return caught(m, ex.what());
	} catch (...) {
		return caught(m, "unknown");
	}
}

int edged_trt_set_address(edged_trt_engine* e, char const* name, uintptr_t addr, char* err, size_t errcap) {
	Msg m{err, errcap};
	m.clear();
	try {
		uint64_t mark = e->rt->logger.mark();
		if (!e->ctx->setTensorAddress(name, reinterpret_cast<void*>(addr))) {
			m.part("tensor %s: setTensorAddress refused address %#lx", name, static_cast<unsigned long>(addr));
			return fail(m, e->recorder, e->rt->logger, mark, EDGED_TRT_ERROR);
		}
		return EDGED_TRT_OK;
	} catch (std::exception const& ex) {
		return caught(m, ex.what());
	} catch (...) {
		return caught(m, "unknown");
	}
}

int edged_trt_enqueue(edged_trt_engine* e, uintptr_t stream, char* err, size_t errcap) {
	Msg m{err, errcap};
	m.clear();
	try {
		uint64_t mark = e->rt->logger.mark();
		if (e->recorder.getNbErrors() > 0) {
			e->recorder.clear(); // errors of earlier calls that did not fail
		}
		if (!e->ctx->enqueueV3(reinterpret_cast<cudaStream_t>(stream))) {
			m.part("enqueueV3 failed");
			return fail(m, e->recorder, e->rt->logger, mark, EDGED_TRT_ERROR);
		}
		return EDGED_TRT_OK;
	} catch (std::exception const& ex) {
		return caught(m, ex.what());
	} catch (...) {
		return caught(m, "unknown");
	}
}

} // extern "C"
