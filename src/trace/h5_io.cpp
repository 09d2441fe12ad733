// Typed HDF5 helpers for the trace schema (see h5_io.h). Every id is owned by a Handle and
// every status goes through DLPERF_CHECK_HDF5; shape mismatches found while reading are
// reported as usage errors because they mean the file, not dlperf, is broken.
#include "trace/h5_io.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"

namespace dlperf::h5 {
namespace {

// Fixed-length, null-terminated UTF-8 strings of `size` bytes (length + 1). Written strings
// are fixed-length rather than variable-length on purpose: variable-length strings live in
// HDF5's global heap, and HDF5 1.10 loops forever on some damaged global heaps, so a
// corrupt file could hang a reader instead of failing.
Handle fixed_string_type(size_t size) {
  Handle t = DLPERF_H5(H5Tcopy(H5T_C_S1), H5Tclose);
  DLPERF_CHECK_HDF5(H5Tset_size(t, std::max<size_t>(size, 1)));
  DLPERF_CHECK_HDF5(H5Tset_strpad(t, H5T_STR_NULLTERM));
  DLPERF_CHECK_HDF5(H5Tset_cset(t, H5T_CSET_UTF8));
  return t;
}

// Packs strings into one buffer of n x width bytes, each null-terminated.
std::vector<char> pack(const std::vector<std::string>& values, size_t width) {
  std::vector<char> buf(std::max<size_t>(values.size() * width, 1), '\0');
  for (size_t i = 0; i < values.size(); ++i) std::copy(values[i].begin(), values[i].end(), buf.begin() + static_cast<long>(i * width));
  return buf;
}

size_t width_of(const std::vector<std::string>& values) {
  size_t w = 1;
  for (const auto& v : values) w = std::max(w, v.size() + 1);
  return w;
}

Handle vlen_string_type() {
  Handle t = DLPERF_H5(H5Tcopy(H5T_C_S1), H5Tclose);
  DLPERF_CHECK_HDF5(H5Tset_size(t, H5T_VARIABLE));
  DLPERF_CHECK_HDF5(H5Tset_cset(t, H5T_CSET_UTF8));
  return t;
}

void delete_attr_if(hid_t obj, const char* name) {
  if (DLPERF_CHECK_HDF5(H5Aexists(obj, name)) > 0) DLPERF_CHECK_HDF5(H5Adelete(obj, name));
}

std::string shape_text(const std::vector<hsize_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) t += ',';
    t += std::to_string(s[i]);
  }
  t += ')';
  return t;
}

// Reads n strings of an attribute or dataset whose file type is `ftype` (variable or fixed length).
template <class ReadFn>
std::vector<std::string> read_string_values(hid_t ftype, hid_t space, hsize_t n, const std::string& what, ReadFn read) {
  if (H5Tget_class(ftype) != H5T_STRING) throw_usage_error(what + " is not a string");
  std::vector<std::string> out(n);
  if (DLPERF_CHECK_HDF5(H5Tis_variable_str(ftype)) > 0) {
    Handle mem = vlen_string_type();
    std::vector<char*> ptrs(n, nullptr);
    DLPERF_CHECK_HDF5(read(mem.get(), static_cast<void*>(ptrs.data())));
    for (hsize_t i = 0; i < n; ++i) out[i] = ptrs[i] ? ptrs[i] : "";
    H5Dvlen_reclaim(mem, space, H5P_DEFAULT, ptrs.data());
  } else {
    size_t size = H5Tget_size(ftype);
    if (size == 0) throw_usage_error(what + " has a zero-size string type");
    Handle mem = DLPERF_H5(H5Tcopy(ftype), H5Tclose);
    std::vector<char> buf(size * n + 1, '\0');
    DLPERF_CHECK_HDF5(read(mem.get(), static_cast<void*>(buf.data())));
    for (hsize_t i = 0; i < n; ++i) {
      const char* p = buf.data() + i * size;
      out[i] = std::string(p, strnlen(p, size));
    }
  }
  return out;
}

// dlperf writes chunked datasets. A damaged layout message can turn one into a contiguous or
// compact dataset whose recorded size is smaller than its shape, and HDF5 1.10 then copies
// past its buffer (a crash, not an error); such a dataset is refused before it is read.
void check_storage(hid_t ds, hsize_t elements, const char* name) {
  Handle dcpl = DLPERF_H5(H5Dget_create_plist(ds), H5Pclose);
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  if (layout == H5D_CHUNKED) return;
  if (layout != H5D_CONTIGUOUS && layout != H5D_COMPACT)
    throw_usage_error(std::string("dataset ") + name + " has an unknown storage layout");
  Handle ftype = DLPERF_H5(H5Dget_type(ds), H5Tclose);
  const hsize_t need = elements * H5Tget_size(ftype), have = H5Dget_storage_size(ds);
  if (have != need && !(layout == H5D_CONTIGUOUS && have == 0))  // 0: never written, reads as fill values
    throw_usage_error(std::string("dataset ") + name + " stores " + std::to_string(have) + " bytes where its shape needs " +
                      std::to_string(need));
}

hsize_t point_count(hid_t space) {
  hssize_t n = DLPERF_CHECK_HDF5(H5Sget_simple_extent_npoints(space));
  return static_cast<hsize_t>(n);
}

}  // namespace

void silence_error_stack() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

bool has_attr(hid_t obj, const char* name) { return DLPERF_CHECK_HDF5(H5Aexists(obj, name)) > 0; }

bool has_link(hid_t group, const char* name) { return DLPERF_CHECK_HDF5(H5Lexists(group, name, H5P_DEFAULT)) > 0; }

void write_attr(hid_t obj, const char* name, const std::string& value) {
  delete_attr_if(obj, name);
  Handle type = fixed_string_type(value.size() + 1);
  Handle space = DLPERF_H5(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a = DLPERF_H5(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  DLPERF_CHECK_HDF5(H5Awrite(a, type, value.c_str()));
}

void write_attr(hid_t obj, const char* name, int64_t value) {
  delete_attr_if(obj, name);
  Handle space = DLPERF_H5(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a = DLPERF_H5(H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  DLPERF_CHECK_HDF5(H5Awrite(a, H5T_NATIVE_INT64, &value));
}

void write_attr(hid_t obj, const char* name, double value) {
  delete_attr_if(obj, name);
  Handle space = DLPERF_H5(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a = DLPERF_H5(H5Acreate2(obj, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  DLPERF_CHECK_HDF5(H5Awrite(a, H5T_NATIVE_DOUBLE, &value));
}

void write_attr(hid_t obj, const char* name, const std::vector<std::string>& values) {
  delete_attr_if(obj, name);
  const size_t width = width_of(values);
  Handle type = fixed_string_type(width);
  hsize_t n = values.size();
  Handle space = DLPERF_H5(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle a = DLPERF_H5(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (n > 0) DLPERF_CHECK_HDF5(H5Awrite(a, type, pack(values, width).data()));
}

std::optional<std::string> read_string_attr_if(hid_t obj, const char* name) {
  if (!has_attr(obj, name)) return std::nullopt;
  Handle a = DLPERF_H5(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Handle ftype = DLPERF_H5(H5Aget_type(a), H5Tclose);
  Handle space = DLPERF_H5(H5Aget_space(a), H5Sclose);
  if (point_count(space) != 1) throw_usage_error(std::string("attribute ") + name + " is not a single string");
  auto v = read_string_values(ftype, space, 1, std::string("attribute ") + name,
                              [&](hid_t mem, void* buf) { return H5Aread(a, mem, buf); });
  return v[0];
}

std::string read_string_attr(hid_t obj, const char* name) {
  auto v = read_string_attr_if(obj, name);
  if (!v) throw_usage_error(std::string("missing attribute ") + name);
  return *v;
}

int64_t read_int_attr(hid_t obj, const char* name, int64_t fallback) {
  if (!has_attr(obj, name)) return fallback;
  Handle a = DLPERF_H5(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Handle ftype = DLPERF_H5(H5Aget_type(a), H5Tclose);
  Handle space = DLPERF_H5(H5Aget_space(a), H5Sclose);
  if (H5Tget_class(ftype) != H5T_INTEGER || point_count(space) != 1)
    throw_usage_error(std::string("attribute ") + name + " is not a single integer");
  int64_t v = 0;
  DLPERF_CHECK_HDF5(H5Aread(a, H5T_NATIVE_INT64, &v));
  return v;
}

double read_double_attr(hid_t obj, const char* name, double fallback) {
  if (!has_attr(obj, name)) return fallback;
  Handle a = DLPERF_H5(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Handle ftype = DLPERF_H5(H5Aget_type(a), H5Tclose);
  Handle space = DLPERF_H5(H5Aget_space(a), H5Sclose);
  const H5T_class_t c = H5Tget_class(ftype);
  if ((c != H5T_FLOAT && c != H5T_INTEGER) || point_count(space) != 1)
    throw_usage_error(std::string("attribute ") + name + " is not a single number");
  double v = 0;
  DLPERF_CHECK_HDF5(H5Aread(a, H5T_NATIVE_DOUBLE, &v));
  return v;
}

std::vector<std::string> attr_names(hid_t obj) {
  std::vector<std::string> names;
  auto cb = [](hid_t, const char* n, const H5A_info_t*, void* op) -> herr_t {
    static_cast<std::vector<std::string>*>(op)->emplace_back(n);
    return 0;
  };
  DLPERF_CHECK_HDF5(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &names));
  return names;
}

void write_rows(hid_t group, const char* name, hid_t mem_type, hid_t file_type, const std::vector<hsize_t>& shape,
                const void* data) {
  const int rank = static_cast<int>(shape.size());
  Handle ds;
  if (has_link(group, name)) {
    ds = DLPERF_H5(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
    DLPERF_CHECK_HDF5(H5Dset_extent(ds, shape.data()));
  } else {
    std::vector<hsize_t> maxdims = shape;
    maxdims[0] = H5S_UNLIMITED;
    // Chunks of at most about 64 KiB, and no taller than the data (at least 64 rows so later
    // flushes can grow into them): chunks are allocated whole, so a 256-row chunk for a
    // 120-iteration run would double the file.
    size_t row_bytes = std::max<size_t>(1, H5Tget_size(file_type));
    for (int d = 1; d < rank; ++d) row_bytes *= std::max<hsize_t>(1, shape[d]);
    std::vector<hsize_t> chunk = shape;
    chunk[0] = std::clamp<hsize_t>(std::min<hsize_t>(65536 / row_bytes, std::max<hsize_t>(shape[0], 64)), 1, 1024);
    for (int d = 1; d < rank; ++d) chunk[d] = std::max<hsize_t>(1, shape[d]);
    Handle space = DLPERF_H5(H5Screate_simple(rank, shape.data(), maxdims.data()), H5Sclose);
    Handle dcpl = DLPERF_H5(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    DLPERF_CHECK_HDF5(H5Pset_chunk(dcpl, rank, chunk.data()));
    ds = DLPERF_H5(H5Dcreate2(group, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
  }
  hsize_t n = std::accumulate(shape.begin(), shape.end(), hsize_t{1}, std::multiplies<>());
  if (n == 0) return;
  // Explicit spaces: H5S_ALL after H5Dset_extent writes only the dataset's old extent (HDF5 1.10).
  Handle file_space = DLPERF_H5(H5Dget_space(ds), H5Sclose);
  Handle mem_space = DLPERF_H5(H5Screate_simple(rank, shape.data(), nullptr), H5Sclose);
  DLPERF_CHECK_HDF5(H5Dwrite(ds, mem_type, mem_space, file_space, H5P_DEFAULT, data));
}

std::vector<hsize_t> dataset_shape(hid_t group, const char* name) {
  if (!has_link(group, name)) throw_usage_error(std::string("missing dataset ") + name);
  Handle ds = DLPERF_H5(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  Handle space = DLPERF_H5(H5Dget_space(ds), H5Sclose);
  int rank = DLPERF_CHECK_HDF5(H5Sget_simple_extent_ndims(space));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  DLPERF_CHECK_HDF5(H5Sget_simple_extent_dims(space, dims.data(), nullptr));
  return dims;
}

void read_all(hid_t group, const char* name, hid_t mem_type, const std::vector<hsize_t>& expected, void* out) {
  auto dims = dataset_shape(group, name);
  if (dims != expected)
    throw_usage_error(std::string("dataset ") + name + " has shape " + shape_text(dims) + ", expected " +
                      shape_text(expected));
  hsize_t n = std::accumulate(dims.begin(), dims.end(), hsize_t{1}, std::multiplies<>());
  if (n == 0) return;
  Handle ds = DLPERF_H5(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  check_storage(ds, n, name);
  DLPERF_CHECK_HDF5(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out));
}

void write_strings(hid_t group, const char* name, const std::vector<std::string>& values) {
  // The string width is part of the dataset's type, so a rewrite replaces the dataset
  // (a few bytes per rank; host names do not change between flushes in practice).
  if (has_link(group, name)) DLPERF_CHECK_HDF5(H5Ldelete(group, name, H5P_DEFAULT));
  const size_t width = width_of(values);
  Handle type = fixed_string_type(width);
  write_rows(group, name, type, type, {values.size()}, pack(values, width).data());
}

std::vector<std::string> read_strings(hid_t group, const char* name, hsize_t expected) {
  auto dims = dataset_shape(group, name);
  if (dims != std::vector<hsize_t>{expected})
    throw_usage_error(std::string("dataset ") + name + " has shape " + shape_text(dims) + ", expected (" +
                      std::to_string(expected) + ")");
  if (expected == 0) return {};
  Handle ds = DLPERF_H5(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  check_storage(ds, expected, name);
  Handle ftype = DLPERF_H5(H5Dget_type(ds), H5Tclose);
  Handle space = DLPERF_H5(H5Dget_space(ds), H5Sclose);
  return read_string_values(ftype, space, expected, std::string("dataset ") + name,
                            [&](hid_t mem, void* buf) { return H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf); });
}

}  // namespace dlperf::h5
