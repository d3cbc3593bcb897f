#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" int cc_sum(int n) {
	try {
		std::vector<int> v(n);
		std::iota(v.begin(), v.end(), 0);
		if (n < 0) throw std::runtime_error("negative " + std::to_string(n));
		return std::accumulate(v.begin(), v.end(), 0);
	} catch (const std::exception &) {
		return -1;
	}
}
