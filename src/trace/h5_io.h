// Small typed helpers over the HDF5 C API for the trace schema: scalar and string
// attributes, and 1-3 dimensional datasets whose first dimension (iterations) can grow.
// Strings are written as fixed-length null-terminated UTF-8 (never variable-length: see
// h5_io.cpp); the readers accept both so files edited by other tools can be read.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trace/h5_handle.h"

namespace dlperf::h5 {

// Attributes. Writing replaces an existing attribute of the same name.
void write_attr(hid_t obj, const char* name, const std::string& value);
void write_attr(hid_t obj, const char* name, int64_t value);
void write_attr(hid_t obj, const char* name, double value);  // f64 scalar
void write_attr(hid_t obj, const char* name, const std::vector<std::string>& values);  // (n,)
bool has_attr(hid_t obj, const char* name);
std::string read_string_attr(hid_t obj, const char* name);  // throws when absent or not a string
std::optional<std::string> read_string_attr_if(hid_t obj, const char* name);
int64_t read_int_attr(hid_t obj, const char* name, int64_t fallback);
double read_double_attr(hid_t obj, const char* name, double fallback);  // any numeric scalar
std::vector<std::string> attr_names(hid_t obj);

// Datasets of shape (rows, dims...): chunked, first dimension unlimited so a flush can grow it.
// write_rows resizes the dataset to `rows` and overwrites it all with `data` (row-major).
void write_rows(hid_t group, const char* name, hid_t mem_type, hid_t file_type, const std::vector<hsize_t>& shape,
                const void* data);
std::vector<hsize_t> dataset_shape(hid_t group, const char* name);
// Reads a whole dataset converted to mem_type; `expected` must equal its shape (else the file is corrupt).
void read_all(hid_t group, const char* name, hid_t mem_type, const std::vector<hsize_t>& expected, void* out);

// String datasets (n,), rewritten whole.
void write_strings(hid_t group, const char* name, const std::vector<std::string>& values);
std::vector<std::string> read_strings(hid_t group, const char* name, hsize_t expected);

bool has_link(hid_t group, const char* name);

}  // namespace dlperf::h5
