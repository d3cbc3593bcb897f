// A fake libnvinfer_plugin for the tensorrt package's tests: it exports
// initLibNvInferPlugins, as TensorRT's does, and registers two of the
// standard plugins' names with the fake libnvinfer it is linked against
// (edged_fake_register_plugin, the fake's stand-in for the plugin
// registry). It logs through the logger it is given, and keeps it, as
// TensorRT's plugins do (so the logger must outlive the process's
// engines).

#include <NvInferRuntime.h>

#include <cstdio>
#include <cstring>

extern "C" void edged_fake_register_plugin(char const* name, char const* from);

namespace {
nvinfer1::ILogger* gLogger = nullptr;
int gCalls = 0;
} // namespace

extern "C" TENSORRTAPI bool initLibNvInferPlugins(void* logger, char const* libNamespace) noexcept {
	gCalls++;
	gLogger = static_cast<nvinfer1::ILogger*>(logger);
	if (gLogger == nullptr || libNamespace == nullptr || std::strcmp(libNamespace, "") != 0) {
		return false;
	}
	char msg[96];
	std::snprintf(msg, sizeof(msg), "fake plugins: initLibNvInferPlugins call %d", gCalls);
	gLogger->log(nvinfer1::ILogger::Severity::kINFO, msg);
	edged_fake_register_plugin("EfficientNMS_TRT", "libnvinfer_plugin");
	edged_fake_register_plugin("BatchedNMS_TRT", "libnvinfer_plugin");
	return true;
}
