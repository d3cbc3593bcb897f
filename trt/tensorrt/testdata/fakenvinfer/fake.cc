// A fake libnvinfer for the tensorrt package's tests, built at test time
// against the Apache-2.0 TensorRT 10.3 headers (not part of the Go build:
// testdata is ignored by the go tool).
//
// It exports the two symbols edged's shim binds, createInferRuntime_INTERNAL
// and getInferLibVersion, and implements TensorRT 10.3's implementation
// interfaces (apiv::VRuntime, VCudaEngine, VExecutionContext) behind the real
// IRuntime/ICudaEngine/IExecutionContext header classes, so the shim's
// inline header calls reach it through the same vtable slots they would use
// in libnvinfer 10.3. It runs on the CPU: tensor "device" addresses are host
// pointers, and the stream is only logged.
//
// What it proves: the shim's dlopen/dlsym/version handshake, the order and
// arguments of its calls (profile selection before enqueue, shapes, 256-byte
// aligned addresses, enqueueV3 on the engine's stream), the error recorder
// and logger paths back to Go, and the release order (it aborts on a wrong
// one). What it does not prove: anything about real TensorRT's behaviour,
// CUDA, TensorRT 8.x's ABI, or real error texts beyond the ones copied here.
//
// A "plan" for it is a 28-byte TensorRT header (magic "ftrt", word 1 = 0,
// version in bytes 24..27) followed by text lines:
//
//	tensor in|out NAME DTYPE FORMAT DIMS [MIN OPT MAX]   (DIMS like -1,4)
//	flag vc | oom-context | fail-enqueue | spam=N | no-profile | plugin=NAME | dla=N
//
// Every float32, float16 and int32 output element i is 2*x[i]+1 (int32:
// truncated), x being the first input. setInputShape logs the shape it
// sets (info), so tests see when a shape is set against each enqueue.
//
// Plugins: flag plugin=NAME makes deserialisation fail, with TensorRT 10's
// messages, unless a library registered NAME first. The fake's plugin
// registry is edged_fake_register_plugin, which the fake
// libnvinfer_plugin (plugin.cc, from initLibNvInferPlugins) and the fake
// custom plugin library (customplugin.cc, from a static initialiser) call;
// every deserialisation logs the names registered so far, in order.
// DLA: getNbDLACores is $EDGED_FAKE_DLA_CORES (default 0), setDLACore is
// kept (and logged) when the core exists, and flag dla=N makes
// deserialisation fail unless the runtime's DLA core is N (the text is the
// fake's own: what TensorRT says then is not known here).

#include <NvInferRuntime.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if NV_TENSORRT_MAJOR != 10 || NV_TENSORRT_MINOR != 3
#error "the fake libnvinfer implements the TensorRT 10.3 interfaces only"
#endif

using namespace nvinfer1;

#define NOTIMPL(what)                                                       \
	do {                                                                    \
		std::fprintf(stderr, "fake libnvinfer: %s is not implemented\n", what); \
		std::abort();                                                       \
	} while (0)

namespace {

long tid() { return syscall(SYS_gettid); }

// The plugin registry: names in registration order, duplicates counted.
std::mutex gPluginMu;
std::vector<std::string> gPlugins;
int gPluginDuplicates = 0;

bool pluginRegistered(std::string const& name) {
	std::lock_guard<std::mutex> g(gPluginMu);
	for (auto const& p : gPlugins) {
		if (p == name) {
			return true;
		}
	}
	return false;
}

std::string pluginList() {
	std::lock_guard<std::mutex> g(gPluginMu);
	std::string s;
	for (auto const& p : gPlugins) {
		s += (s.empty() ? "" : ",") + p;
	}
	return s.empty() ? "none" : s;
}

uint16_t toHalf(float f) {
	uint32_t b;
	std::memcpy(&b, &f, 4);
	uint32_t sign = (b >> 16) & 0x8000, mant = b & 0x7fffff;
	int exp = static_cast<int>((b >> 23) & 0xff) - 127 + 15;
	if ((b & 0x7fffffff) == 0 || exp <= 0) {
		return static_cast<uint16_t>(sign);
	}
	if (exp >= 0x1f) {
		return static_cast<uint16_t>(sign | 0x7c00);
	}
	uint32_t h = sign | static_cast<uint32_t>(exp) << 10 | mant >> 13;
	uint32_t r = mant & 0x1fff;
	if (r > 0x1000 || (r == 0x1000 && (h & 1))) {
		h++;
	}
	return static_cast<uint16_t>(h);
}

void die(char const* why) {
	std::fprintf(stderr, "fake libnvinfer: %s\n", why);
	std::abort();
}

struct Tensor {
	std::string name;
	bool input;
	DataType dtype;
	TensorFormat format;
	Dims64 dims, min, opt, max;
	bool hasProfile;
};

Dims64 parseDims(char const* s) {
	Dims64 d{};
	d.nbDims = 0;
	while (*s != '\0' && d.nbDims < Dims64::MAX_DIMS) {
		char* end;
		d.d[d.nbDims++] = std::strtoll(s, &end, 10);
		s = *end == ',' ? end + 1 : end;
		if (end == s && *end != ',') {
			break;
		}
	}
	return d;
}

Dims64 badDims() {
	Dims64 d{};
	d.nbDims = -1;
	return d;
}

class Reporter {
public:
	Reporter(ILogger* logger, IErrorRecorder* const* rec) : mLogger(logger), mRec(rec) {}
	void error(ErrorCode code, char const* msg) const {
		if (*mRec != nullptr) {
			(*mRec)->reportError(code, msg);
		} else {
			mLogger->log(ILogger::Severity::kERROR, msg);
		}
	}
	void log(ILogger::Severity s, char const* msg) const { mLogger->log(s, msg); }

private:
	ILogger* mLogger;
	IErrorRecorder* const* mRec;
};

void setRecorder(IErrorRecorder*& slot, IErrorRecorder* r) {
	if (r != nullptr) {
		r->incRefCount();
	}
	if (slot != nullptr) {
		slot->decRefCount();
	}
	slot = r;
}

class FakeEngineImpl;

class FakeContextImpl : public apiv::VExecutionContext {
public:
	FakeContextImpl(FakeEngineImpl* e, IExecutionContext* pub);
	~FakeContextImpl() override;

	IExecutionContext* getPImpl() noexcept override { return mPub; }
	void setDebugSync(bool) noexcept override {}
	bool getDebugSync() const noexcept override { return false; }
	void setProfiler(IProfiler*) noexcept override {}
	IProfiler* getProfiler() const noexcept override { return nullptr; }
	ICudaEngine const& getEngine() const noexcept override;
	void setName(char const* name) noexcept override { mName = name; }
	char const* getName() const noexcept override { return mName.c_str(); }
	void setDeviceMemory(void*) noexcept override { NOTIMPL("setDeviceMemory"); }
	int32_t getOptimizationProfile() const noexcept override { return mProfile; }
	bool allInputDimensionsSpecified() const noexcept override;
	bool allInputShapesSpecified() const noexcept override { return true; }
	void setErrorRecorder(IErrorRecorder* r) noexcept override { setRecorder(mRec, r); }
	IErrorRecorder* getErrorRecorder() const noexcept override { return mRec; }
	bool executeV2(void* const*) noexcept override { NOTIMPL("executeV2"); }
	bool setOptimizationProfileAsync(int32_t index, cudaStream_t stream) noexcept override;
	void setEnqueueEmitsProfile(bool) noexcept override {}
	bool getEnqueueEmitsProfile() const noexcept override { return false; }
	bool reportToProfiler() const noexcept override { return false; }
	bool setInputShape(char const* name, Dims const& dims) noexcept override;
	Dims getTensorShape(char const* name) const noexcept override;
	Dims getTensorStrides(char const*) const noexcept override { NOTIMPL("getTensorStrides"); }
	bool setTensorAddress(char const* name, void* data) noexcept override;
	void const* getTensorAddress(char const*) const noexcept override { NOTIMPL("getTensorAddress"); }
	bool setInputTensorAddress(char const*, void const*) noexcept override { NOTIMPL("setInputTensorAddress"); }
	bool setOutputTensorAddress(char const*, void*) noexcept override { NOTIMPL("setOutputTensorAddress"); }
	int32_t inferShapes(int32_t, char const**) noexcept override { NOTIMPL("inferShapes"); }
	bool setInputConsumedEvent(cudaEvent_t) noexcept override { NOTIMPL("setInputConsumedEvent"); }
	cudaEvent_t getInputConsumedEvent() const noexcept override { NOTIMPL("getInputConsumedEvent"); }
	void* getOutputTensorAddress(char const*) const noexcept override { NOTIMPL("getOutputTensorAddress"); }
	bool setOutputAllocator(char const*, IOutputAllocator*) noexcept override { NOTIMPL("setOutputAllocator"); }
	IOutputAllocator* getOutputAllocator(char const*) noexcept override { NOTIMPL("getOutputAllocator"); }
	int64_t getMaxOutputSize(char const*) const noexcept override { NOTIMPL("getMaxOutputSize"); }
	bool setTemporaryStorageAllocator(IGpuAllocator*) noexcept override { NOTIMPL("setTemporaryStorageAllocator"); }
	IGpuAllocator* getTemporaryStorageAllocator() const noexcept override { NOTIMPL("getTemporaryStorageAllocator"); }
	bool enqueueV3(cudaStream_t stream) noexcept override;
	void setPersistentCacheLimit(size_t) noexcept override {}
	size_t getPersistentCacheLimit() const noexcept override { return 0; }
	bool setNvtxVerbosity(ProfilingVerbosity) noexcept override { return true; }
	ProfilingVerbosity getNvtxVerbosity() const noexcept override { return ProfilingVerbosity::kLAYER_NAMES_ONLY; }
	void setAuxStreams(cudaStream_t*, int32_t) noexcept override { NOTIMPL("setAuxStreams"); }
	bool setDebugListener(IDebugListener*) noexcept override { NOTIMPL("setDebugListener"); }
	IDebugListener* getDebugListener() noexcept override { NOTIMPL("getDebugListener"); }
	bool setTensorDebugState(char const*, bool) noexcept override { NOTIMPL("setTensorDebugState"); }
	bool getDebugState(char const*) const noexcept override { NOTIMPL("getDebugState"); }
	bool setAllTensorsDebugState(bool) noexcept override { NOTIMPL("setAllTensorsDebugState"); }
	size_t updateDeviceMemorySizeForShapes() noexcept override { NOTIMPL("updateDeviceMemorySizeForShapes"); }
	void setDeviceMemoryV2(void*, int64_t) noexcept override { NOTIMPL("setDeviceMemoryV2"); }

private:
	int find(char const* name) const;

	FakeEngineImpl* mEngine;
	IExecutionContext* mPub;
	IErrorRecorder* mRec{nullptr};
	Reporter mRep;
	std::string mName;
	int32_t mProfile{-1}; // as TensorRT 8.5 does for a context that did not get profile 0 implicitly
	std::vector<Dims64> mShapes;
	std::vector<void*> mAddr;
};

class FakeContext : public IExecutionContext {
public:
	explicit FakeContext(FakeEngineImpl* e) { mImpl = new FakeContextImpl(e, this); }
	~FakeContext() noexcept override { delete mImpl; }
};

class FakeEngineImpl : public apiv::VCudaEngine {
public:
	FakeEngineImpl(std::atomic<int>* live, ILogger* logger, ICudaEngine* pub, std::vector<Tensor> t,
		std::vector<std::string> flags)
		: tensors(std::move(t)), flags(std::move(flags)), mLogger(logger), mPub(pub), rep(logger, &mRec), mLive(live) {
		(*mLive)++;
	}
	~FakeEngineImpl() override {
		if (liveContexts.load() > 0) {
			die("engine destroyed before its execution context");
		}
		setRecorder(mRec, nullptr);
		(*mLive)--;
	}
	bool has(char const* flag) const {
		for (auto const& f : flags) {
			if (f == flag) {
				return true;
			}
		}
		return false;
	}
	int find(char const* name) const {
		for (size_t i = 0; i < tensors.size(); i++) {
			if (tensors[i].name == name) {
				return static_cast<int>(i);
			}
		}
		return -1;
	}

	ICudaEngine* getPImpl() noexcept override { return mPub; }
	int32_t getNbLayers() const noexcept override { return 1; }
	IHostMemory* serialize() const noexcept override { NOTIMPL("serialize"); }
	IExecutionContext* createExecutionContext(ExecutionContextAllocationStrategy) noexcept override {
		if (has("oom-context")) {
			rep.error(ErrorCode::kFAILED_ALLOCATION, "fake: out of device memory for the execution context");
			return nullptr;
		}
		return new FakeContext(this);
	}
	IExecutionContext* createExecutionContextWithoutDeviceMemory() noexcept override { NOTIMPL("createExecutionContextWithoutDeviceMemory"); }
	size_t getDeviceMemorySize() const noexcept override { return 1 << 20; }
	bool isRefittable() const noexcept override { return false; }
	char const* getName() const noexcept override { return "fake"; }
	int32_t getNbOptimizationProfiles() const noexcept override { return has("no-profile") ? 0 : 1; }
	int32_t const* getProfileTensorValues(char const*, int32_t, OptProfileSelector) const noexcept override { NOTIMPL("getProfileTensorValues"); }
	EngineCapability getEngineCapability() const noexcept override { return EngineCapability::kSTANDARD; }
	void setErrorRecorder(IErrorRecorder* r) noexcept override { setRecorder(mRec, r); }
	IErrorRecorder* getErrorRecorder() const noexcept override { return mRec; }
	bool hasImplicitBatchDimension() const noexcept override { return false; }
	TacticSources getTacticSources() const noexcept override { return 0; }
	ProfilingVerbosity getProfilingVerbosity() const noexcept override { return ProfilingVerbosity::kLAYER_NAMES_ONLY; }
	IEngineInspector* createEngineInspector() const noexcept override { NOTIMPL("createEngineInspector"); }
	Dims getTensorShape(char const* name) const noexcept override {
		int i = find(name);
		return i < 0 ? badDims() : tensors[i].dims;
	}
	DataType getTensorDataType(char const* name) const noexcept override {
		int i = find(name);
		return i < 0 ? DataType::kFLOAT : tensors[i].dtype;
	}
	TensorLocation getTensorLocation(char const*) const noexcept override { return TensorLocation::kDEVICE; }
	bool isShapeInferenceIO(char const*) const noexcept override { return false; }
	TensorIOMode getTensorIOMode(char const* name) const noexcept override {
		int i = find(name);
		return i < 0 ? TensorIOMode::kNONE : tensors[i].input ? TensorIOMode::kINPUT : TensorIOMode::kOUTPUT;
	}
	int32_t getTensorBytesPerComponent(char const*) const noexcept override { NOTIMPL("getTensorBytesPerComponent"); }
	int32_t getTensorComponentsPerElement(char const*) const noexcept override { NOTIMPL("getTensorComponentsPerElement"); }
	TensorFormat getTensorFormat(char const* name) const noexcept override {
		int i = find(name);
		return i < 0 ? TensorFormat::kLINEAR : tensors[i].format;
	}
	char const* getTensorFormatDesc(char const* name) const noexcept override {
		int i = find(name);
		return i >= 0 && tensors[i].format != TensorFormat::kLINEAR ? "fake vectorized format" : "Row major linear FP32 format (kLINEAR)";
	}
	int32_t getTensorVectorizedDim(char const*) const noexcept override { return -1; }
	Dims getProfileShape(char const* name, int32_t profile, OptProfileSelector sel) const noexcept override {
		int i = find(name);
		if (i < 0 || profile != 0 || !tensors[i].input) {
			rep.error(ErrorCode::kINVALID_ARGUMENT, "fake: getProfileShape on a non-input or a bad profile");
			return badDims();
		}
		Tensor const& t = tensors[i];
		if (!t.hasProfile) {
			return t.dims;
		}
		return sel == OptProfileSelector::kMIN ? t.min : sel == OptProfileSelector::kOPT ? t.opt : t.max;
	}
	int32_t getNbIOTensors() const noexcept override { return static_cast<int32_t>(tensors.size()); }
	char const* getIOTensorName(int32_t i) const noexcept override {
		return i >= 0 && i < static_cast<int32_t>(tensors.size()) ? tensors[i].name.c_str() : nullptr;
	}
	HardwareCompatibilityLevel getHardwareCompatibilityLevel() const noexcept override { return HardwareCompatibilityLevel{}; }
	int32_t getNbAuxStreams() const noexcept override { return 0; }
	int32_t getTensorBytesPerComponentV2(char const*, int32_t) const noexcept override { NOTIMPL("getTensorBytesPerComponentV2"); }
	int32_t getTensorComponentsPerElementV2(char const*, int32_t) const noexcept override { NOTIMPL("getTensorComponentsPerElementV2"); }
	TensorFormat getTensorFormatV2(char const*, int32_t) const noexcept override { NOTIMPL("getTensorFormatV2"); }
	char const* getTensorFormatDescV2(char const*, int32_t) const noexcept override { NOTIMPL("getTensorFormatDescV2"); }
	int32_t getTensorVectorizedDimV2(char const*, int32_t) const noexcept override { NOTIMPL("getTensorVectorizedDimV2"); }
	ISerializationConfig* createSerializationConfig() noexcept override { NOTIMPL("createSerializationConfig"); }
	IHostMemory* serializeWithConfig(ISerializationConfig&) const noexcept override { NOTIMPL("serializeWithConfig"); }
	size_t getDeviceMemorySizeForProfile(int32_t) const noexcept override { return 1 << 20; }
	IRefitter* createRefitter(ILogger&) noexcept override { NOTIMPL("createRefitter"); }
	bool setWeightStreamingBudget(int64_t) noexcept override { NOTIMPL("setWeightStreamingBudget"); }
	int64_t getWeightStreamingBudget() const noexcept override { NOTIMPL("getWeightStreamingBudget"); }
	int64_t getMinimumWeightStreamingBudget() const noexcept override { NOTIMPL("getMinimumWeightStreamingBudget"); }
	int64_t getStreamableWeightsSize() const noexcept override { return 0; }
	bool isDebugTensor(char const*) const noexcept override { return false; }
	bool setWeightStreamingBudgetV2(int64_t) noexcept override { NOTIMPL("setWeightStreamingBudgetV2"); }
	int64_t getWeightStreamingBudgetV2() const noexcept override { NOTIMPL("getWeightStreamingBudgetV2"); }
	int64_t getWeightStreamingAutomaticBudget() const noexcept override { NOTIMPL("getWeightStreamingAutomaticBudget"); }
	int64_t getWeightStreamingScratchMemorySize() const noexcept override { NOTIMPL("getWeightStreamingScratchMemorySize"); }
	int64_t getDeviceMemorySizeV2() const noexcept override { return 3 << 20; }
	int64_t getDeviceMemorySizeForProfileV2(int32_t) const noexcept override { return 3 << 20; }

	std::vector<Tensor> tensors;
	std::vector<std::string> flags;
	std::atomic<int> liveContexts{0};
	ILogger* mLogger;
	ICudaEngine* mPub;
	IErrorRecorder* mRec{nullptr};
	Reporter rep;
	std::atomic<int>* mLive; // the runtime's engine count
};

class FakeEngine : public ICudaEngine {
public:
	FakeEngine(std::atomic<int>* live, ILogger* logger, std::vector<Tensor> t, std::vector<std::string> flags) {
		mImpl = new FakeEngineImpl(live, logger, this, std::move(t), std::move(flags));
	}
	~FakeEngine() noexcept override { delete mImpl; }
};

FakeContextImpl::FakeContextImpl(FakeEngineImpl* e, IExecutionContext* pub)
	: mEngine(e), mPub(pub), mRep(e->mLogger, &mRec), mShapes(e->tensors.size()), mAddr(e->tensors.size()) {
	setRecorder(mRec, e->mRec); // a context inherits its engine's recorder
	for (size_t i = 0; i < e->tensors.size(); i++) {
		mShapes[i] = e->tensors[i].dims;
	}
	e->liveContexts++;
}

FakeContextImpl::~FakeContextImpl() {
	setRecorder(mRec, nullptr);
	mEngine->liveContexts--;
}

ICudaEngine const& FakeContextImpl::getEngine() const noexcept { return *mEngine->mPub; }

int FakeContextImpl::find(char const* name) const { return mEngine->find(name); }

bool FakeContextImpl::allInputDimensionsSpecified() const noexcept {
	for (size_t i = 0; i < mShapes.size(); i++) {
		for (int32_t k = 0; mEngine->tensors[i].input && k < mShapes[i].nbDims; k++) {
			if (mShapes[i].d[k] < 0) {
				return false;
			}
		}
	}
	return true;
}

bool FakeContextImpl::setOptimizationProfileAsync(int32_t index, cudaStream_t stream) noexcept {
	if (index < 0 || index >= mEngine->getNbOptimizationProfiles()) {
		mRep.error(ErrorCode::kINVALID_ARGUMENT, "fake: no such optimization profile");
		return false;
	}
	char msg[128];
	std::snprintf(msg, sizeof(msg), "fake: setOptimizationProfileAsync(%d) on stream %p tid=%ld", index,
		static_cast<void*>(stream), tid());
	mRep.log(ILogger::Severity::kINFO, msg);
	mProfile = index;
	return true;
}

bool FakeContextImpl::setInputShape(char const* name, Dims const& dims) noexcept {
	int i = find(name);
	if (i < 0 || !mEngine->tensors[i].input) {
		mRep.error(ErrorCode::kINVALID_ARGUMENT, "fake: setInputShape on a name that is not an input");
		return false;
	}
	Tensor const& t = mEngine->tensors[i];
	if (dims.nbDims != t.dims.nbDims) {
		mRep.error(ErrorCode::kINVALID_ARGUMENT, "fake: setInputShape with the wrong number of dimensions");
		return false;
	}
	for (int32_t k = 0; k < dims.nbDims; k++) {
		bool fixedMismatch = t.dims.d[k] >= 0 && dims.d[k] != t.dims.d[k];
		bool outside = t.hasProfile && (dims.d[k] < t.min.d[k] || dims.d[k] > t.max.d[k]);
		if (fixedMismatch || outside) {
			mRep.error(ErrorCode::kINVALID_ARGUMENT, "fake: setInputShape outside the optimization profile");
			return false;
		}
	}
	mShapes[i] = dims;
	std::string msg = "fake: setInputShape(" + t.name + ", [";
	for (int32_t k = 0; k < dims.nbDims; k++) {
		msg += (k > 0 ? "," : "") + std::to_string(dims.d[k]);
	}
	mRep.log(ILogger::Severity::kINFO, (msg + "])").c_str());
	return true;
}

Dims FakeContextImpl::getTensorShape(char const* name) const noexcept {
	int i = find(name);
	if (i < 0) {
		return badDims();
	}
	if (mEngine->tensors[i].input) {
		return mShapes[i];
	}
	// Outputs: a dynamic dimension follows the first input's.
	Dims64 d = mEngine->tensors[i].dims;
	for (int32_t k = 0; k < d.nbDims; k++) {
		if (d.d[k] < 0 && !mShapes.empty() && k < mShapes[0].nbDims && mEngine->tensors[0].input) {
			d.d[k] = mShapes[0].d[k];
		}
	}
	return d;
}

bool FakeContextImpl::setTensorAddress(char const* name, void* data) noexcept {
	int i = find(name);
	if (i < 0) {
		mRep.error(ErrorCode::kINVALID_ARGUMENT, "fake: setTensorAddress on an unknown tensor");
		return false;
	}
	if (data == nullptr || reinterpret_cast<uintptr_t>(data) % 256 != 0) {
		mRep.error(ErrorCode::kINVALID_ARGUMENT, "fake: tensor address is null or not 256-byte aligned");
		return false;
	}
	mAddr[i] = data;
	return true;
}

int64_t volume(Dims64 const& d) {
	int64_t n = 1;
	for (int32_t k = 0; k < d.nbDims; k++) {
		n *= d.d[k];
	}
	return n;
}

bool FakeContextImpl::enqueueV3(cudaStream_t stream) noexcept {
	char msg[128];
	std::snprintf(msg, sizeof(msg), "fake: enqueueV3 on stream %p tid=%ld", static_cast<void*>(stream), tid());
	mRep.log(ILogger::Severity::kINFO, msg);
	if (mEngine->has("fail-enqueue")) {
		mRep.log(ILogger::Severity::kERROR, "fake: the kernel launch failed (logged)");
		mRep.error(ErrorCode::kFAILED_EXECUTION, "fake: enqueue failed on purpose");
		return false;
	}
	if (mProfile < 0 && mEngine->getNbOptimizationProfiles() > 0) {
		mRep.error(ErrorCode::kINVALID_STATE, "fake: no optimization profile selected for this context");
		return false;
	}
	if (!allInputDimensionsSpecified()) {
		mRep.error(ErrorCode::kINVALID_STATE, "fake: not all input shapes are specified");
		return false;
	}
	for (void* p : mAddr) {
		if (p == nullptr) {
			mRep.error(ErrorCode::kINVALID_STATE, "fake: a tensor address is not set");
			return false;
		}
	}
	auto const& ts = mEngine->tensors;
	if (ts.empty() || !ts[0].input || ts[0].dtype != DataType::kFLOAT) {
		return true;
	}
	float const* x = static_cast<float const*>(mAddr[0]);
	int64_t nx = volume(mShapes[0]);
	for (size_t i = 0; i < ts.size(); i++) {
		if (ts[i].input) {
			continue;
		}
		int64_t ny = volume(getTensorShape(ts[i].name.c_str()));
		for (int64_t k = 0; k < ny; k++) {
			float v = 2 * x[k % nx] + 1;
			switch (ts[i].dtype) {
			case DataType::kFLOAT: static_cast<float*>(mAddr[i])[k] = v; break;
			case DataType::kHALF: static_cast<uint16_t*>(mAddr[i])[k] = toHalf(v); break;
			case DataType::kINT32: static_cast<int32_t*>(mAddr[i])[k] = static_cast<int32_t>(v); break;
			default: break;
			}
		}
	}
	return true;
}

int32_t libVersion() {
	char const* v = std::getenv("EDGED_FAKE_TRT_VERSION");
	return v != nullptr && *v != '\0' ? static_cast<int32_t>(std::atoi(v)) : static_cast<int32_t>(NV_TENSORRT_VERSION);
}

class FakeRuntimeImpl : public apiv::VRuntime {
public:
	FakeRuntimeImpl(ILogger* logger, IRuntime* pub) : mLogger(logger), mPub(pub), mRep(logger, &mRec) {}
	~FakeRuntimeImpl() override {
		if (mLiveEngines.load() > 0) {
			die("runtime destroyed before its engines");
		}
		setRecorder(mRec, nullptr);
	}

	IRuntime* getPImpl() noexcept override { return mPub; }
	ICudaEngine* deserializeCudaEngine(void const* blob, std::size_t size) noexcept override;
	ICudaEngine* deserializeCudaEngine(IStreamReader&) noexcept override { NOTIMPL("deserializeCudaEngine(IStreamReader)"); }
	void setDLACore(int32_t core) noexcept override {
		char msg[96];
		std::snprintf(msg, sizeof(msg), "fake: setDLACore(%d) with %d DLA cores", core, getNbDLACores());
		mRep.log(ILogger::Severity::kINFO, msg);
		if (core >= 0 && core < getNbDLACores()) {
			mDLA = core; // "if getNbDLACores() returns 0, then this function does nothing"
		}
	}
	int32_t getDLACore() const noexcept override { return mDLA; }
	int32_t getNbDLACores() const noexcept override {
		char const* v = std::getenv("EDGED_FAKE_DLA_CORES");
		return v != nullptr && *v != '\0' ? static_cast<int32_t>(std::atoi(v)) : 0;
	}
	void setGpuAllocator(IGpuAllocator*) noexcept override { NOTIMPL("setGpuAllocator"); }
	void setErrorRecorder(IErrorRecorder* r) noexcept override { setRecorder(mRec, r); }
	IErrorRecorder* getErrorRecorder() const noexcept override { return mRec; }
	ILogger* getLogger() const noexcept override { return mLogger; }
	bool setMaxThreads(int32_t) noexcept override { return true; }
	int32_t getMaxThreads() const noexcept override { return 1; }
	void setTemporaryDirectory(char const*) noexcept override {}
	char const* getTemporaryDirectory() const noexcept override { return ""; }
	void setTempfileControlFlags(TempfileControlFlags) noexcept override {}
	TempfileControlFlags getTempfileControlFlags() const noexcept override { return 0; }
	IPluginRegistry& getPluginRegistry() noexcept override { NOTIMPL("getPluginRegistry"); }
	void setPluginRegistryParent(IPluginRegistry*) noexcept override { NOTIMPL("setPluginRegistryParent"); }
	IRuntime* loadRuntime(char const*) noexcept override { NOTIMPL("loadRuntime"); }
	void setEngineHostCodeAllowed(bool allowed) noexcept override { mHostCode = allowed; }
	bool getEngineHostCodeAllowed() const noexcept override { return mHostCode; }

private:
	ILogger* mLogger;
	IRuntime* mPub;
	IErrorRecorder* mRec{nullptr};
	Reporter mRep;
	bool mHostCode{false};
	int32_t mDLA{-1};
	std::atomic<int> mLiveEngines{0};
};

class FakeRuntime : public IRuntime {
public:
	explicit FakeRuntime(ILogger* logger) { mImpl = new FakeRuntimeImpl(logger, this); }
	~FakeRuntime() noexcept override { delete mImpl; }
};

ICudaEngine* FakeRuntimeImpl::deserializeCudaEngine(void const* blob, std::size_t size) noexcept {
	auto const* b = static_cast<unsigned char const*>(blob);
	if (size < 28 || std::memcmp(b, "ftrt", 4) != 0) {
		// The texts TensorRT 10 reports for a foreign file (research/tensorrt.md section 3.2).
		mRep.error(ErrorCode::kUNSPECIFIED_ERROR, "[stdArchiveReader.cpp::StdArchiveReader::32] Error Code 1: Serialization "
			"(Serialization assertion magicTagRead == kMAGIC_TAG failed.Magic tag does not match)");
		mRep.error(ErrorCode::kINTERNAL_ERROR, "[runtime.cpp::deserializeCudaEngine::65] Error Code 4: Internal Error "
			"(Engine deserialization failed.)");
		return nullptr;
	}
	std::string body(reinterpret_cast<char const*>(b) + 28, size - 28);
	std::vector<Tensor> tensors;
	std::vector<std::string> flags;
	size_t pos = 0;
	while (pos < body.size()) {
		size_t nl = body.find('\n', pos);
		std::string line = body.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
		pos = nl == std::string::npos ? body.size() : nl + 1;
		char kind[16] = {}, io[8] = {}, name[128] = {}, dims[64] = {}, mn[64] = {}, op[64] = {}, mx[64] = {};
		int dtype = 0, format = 0;
		if (std::sscanf(line.c_str(), "%15s", kind) != 1) {
			continue;
		}
		if (std::strcmp(kind, "flag") == 0 && std::sscanf(line.c_str(), "flag %127s", name) == 1) {
			flags.emplace_back(name);
			continue;
		}
		int n = std::sscanf(line.c_str(), "tensor %7s %127s %d %d %63s %63s %63s %63s", io, name, &dtype, &format, dims, mn, op, mx);
		if (n != 5 && n != 8) {
			mRep.error(ErrorCode::kUNSPECIFIED_ERROR, "fake: malformed plan body");
			return nullptr;
		}
		Tensor t{};
		t.name = name;
		t.input = std::strcmp(io, "in") == 0;
		t.dtype = static_cast<DataType>(dtype);
		t.format = static_cast<TensorFormat>(format);
		t.dims = parseDims(dims);
		t.hasProfile = n == 8;
		if (t.hasProfile) {
			t.min = parseDims(mn);
			t.opt = parseDims(op);
			t.max = parseDims(mx);
		}
		tensors.push_back(t);
	}
	{
		char msg[512];
		std::snprintf(msg, sizeof(msg), "fake: deserializing with DLA core %d; plugins registered: %s", mDLA, pluginList().c_str());
		mRep.log(ILogger::Severity::kINFO, msg);
	}
	bool vc = false;
	for (auto const& f : flags) {
		if (f.rfind("plugin=", 0) == 0 && !pluginRegistered(f.substr(7))) {
			// TensorRT 10's texts (issue reports of 10.x, e.g. laugh12321/TensorRT-YOLO#118).
			char msg[256];
			std::snprintf(msg, sizeof(msg), "IPluginRegistry::getCreator: Error Code 4: API Usage Error (Cannot find plugin: %s, "
				"version: 1, namespace:.)", f.c_str() + 7);
			mRep.error(ErrorCode::kINVALID_ARGUMENT, msg);
			mRep.error(ErrorCode::kUNSPECIFIED_ERROR, "IRuntime::deserializeCudaEngine: Error Code 1: Serialization (Serialization "
				"assertion creator failed.Cannot deserialize plugin since corresponding IPluginCreator not found in Plugin Registry)");
			return nullptr;
		}
		if (f.rfind("dla=", 0) == 0 && std::atoi(f.c_str() + 4) != mDLA) {
			char msg[160];
			std::snprintf(msg, sizeof(msg), "fake: the engine was built for DLA core %d (trtexec --useDLACore), and the runtime's DLA "
				"core is %d", std::atoi(f.c_str() + 4), mDLA);
			mRep.error(ErrorCode::kINVALID_CONFIG, msg);
			return nullptr;
		}
		vc = vc || f == "vc";
		if (f.rfind("spam=", 0) == 0) {
			int n = std::atoi(f.c_str() + 5);
			for (int i = 0; i < n; i++) {
				char msg[64];
				std::snprintf(msg, sizeof(msg), "fake: warning %d", i);
				mRep.log(ILogger::Severity::kWARNING, msg);
			}
		}
	}
	int32_t v = libVersion();
	int major = v / 10000, minor = v % 10000 / 100;
	if (!vc && (b[24] != major || b[25] != minor)) {
		char msg[256];
		std::snprintf(msg, sizeof(msg), "IRuntime::deserializeCudaEngine: Error Code 1: Serialization (Serialization "
			"assertion stdVersionRead == kSERIALIZATION_VERSION failed.Version tag does not match. Note: Current Version: "
			"%d, Serialized Engine Version: %d)", 237, 200 + b[25]);
		mRep.error(ErrorCode::kUNSPECIFIED_ERROR, msg);
		return nullptr;
	}
	char msg[96];
	std::snprintf(msg, sizeof(msg), "fake: deserialized an engine with %zu I/O tensors", tensors.size());
	mRep.log(ILogger::Severity::kINFO, msg);
	return new FakeEngine(&mLiveEngines, mLogger, std::move(tensors), std::move(flags));
}

} // namespace

extern "C" TENSORRTAPI void* createInferRuntime_INTERNAL(void* logger, int32_t version) noexcept {
	auto* l = static_cast<ILogger*>(logger);
	if (version / 10000 != NV_TENSORRT_MAJOR) {
		l->log(ILogger::Severity::kERROR, "fake: createInferRuntime called with the version of another major");
		return nullptr;
	}
	return new FakeRuntime(l);
}

extern "C" TENSORRTAPI int32_t getInferLibVersion() noexcept { return libVersion(); }

// The fake plugin registry's door (see the top of this file).
extern "C" TENSORRTAPI void edged_fake_register_plugin(char const* name, char const* from) noexcept {
	(void)from;
	std::lock_guard<std::mutex> g(gPluginMu);
	for (auto const& p : gPlugins) {
		if (p == name) {
			gPluginDuplicates++;
			return;
		}
	}
	gPlugins.emplace_back(name);
}
