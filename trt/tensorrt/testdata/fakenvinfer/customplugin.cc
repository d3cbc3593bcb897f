// A fake custom plugin library (as DeepStream-Yolo's is): loading it
// registers its plugin from a static initialiser, with the fake libnvinfer
// it is linked against.

extern "C" void edged_fake_register_plugin(char const* name, char const* from);

namespace {
struct Register {
	Register() { edged_fake_register_plugin("YoloLayer_TRT", "custom"); }
} reg;
} // namespace
