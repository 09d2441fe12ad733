// Reads the golden fixtures that tests/golden/*.py write with PyTorch (layout in
// tests/golden/README.md): float32/int32 datasets, numeric attributes, and the per-tensor
// fp32 error scale the scripts store with each reference. Header-only, test use only.
#pragma once

#include <hdf5.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace dlperf::testing {

class H5Fixture {
 public:
  explicit H5Fixture(const std::string& path) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file_ < 0) throw std::runtime_error("cannot open fixture " + path + " (regenerate: tests/golden/README.md)");
  }
  ~H5Fixture() { H5Fclose(file_); }
  H5Fixture(const H5Fixture&) = delete;
  H5Fixture& operator=(const H5Fixture&) = delete;

  bool has(const std::string& name) const { return H5Lexists(file_, name.c_str(), H5P_DEFAULT) > 0; }

  std::vector<float> floats(const std::string& name) const { return read<float>(name, H5T_NATIVE_FLOAT); }
  std::vector<int32_t> ints(const std::string& name) const { return read<int32_t>(name, H5T_NATIVE_INT32); }
  float scalar(const std::string& name) const { return floats(name).at(0); }

  // A numeric attribute of an object ("/" for the root), converted to double.
  std::vector<double> attribute(const std::string& object, const std::string& attr) const {
    hid_t a = H5Aopen_by_name(file_, object.c_str(), attr.c_str(), H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) throw std::runtime_error("fixture has no attribute " + object + "@" + attr);
    hid_t space = H5Aget_space(a);
    std::vector<double> v(static_cast<size_t>(std::max<hssize_t>(1, H5Sget_simple_extent_npoints(space))));
    H5Aread(a, H5T_NATIVE_DOUBLE, v.data());
    H5Sclose(space);
    H5Aclose(a);
    return v;
  }
  bool has_attribute(const std::string& object, const std::string& attr) const {
    return H5Aexists_by_name(file_, object.c_str(), attr.c_str(), H5P_DEFAULT) > 0;
  }

  // The tolerance rule of tests/golden/README.md: max |x - ref| <= max(floor, k * fp32 rel
  // diff) * max |ref|, where the fp32 rel diff is how far PyTorch's own fp32 result was from
  // the float64 reference; analytically zero tensors get an absolute 1e-6.
  double tolerance(const std::string& name, const std::vector<float>& ref, double floor = 1e-4, double k = 20) const {
    if (has_attribute(name, "analytically_zero") && attribute(name, "analytically_zero")[0] != 0) return 1e-6;
    double scale = 0;
    for (float r : ref) scale = std::max(scale, static_cast<double>(std::abs(r)));
    const double rel = has_attribute(name, "fp32_max_rel_diff") ? attribute(name, "fp32_max_rel_diff")[0] : 0.0;
    return std::max(floor, k * rel) * std::max(scale, 1e-12);
  }

 private:
  template <class T>
  std::vector<T> read(const std::string& name, hid_t type) const {
    hid_t d = H5Dopen2(file_, name.c_str(), H5P_DEFAULT);
    if (d < 0) throw std::runtime_error("fixture has no dataset " + name);
    hid_t space = H5Dget_space(d);
    std::vector<T> v(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
    const herr_t rc = H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Sclose(space);
    H5Dclose(d);
    if (rc < 0) throw std::runtime_error("cannot read fixture dataset " + name);
    return v;
  }
  hid_t file_ = -1;
};

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

}  // namespace dlperf::testing
