#include "train/memory/out_of_memory.h"

#include <dnnl.hpp>
#include <new>

#include "core/error.h"

namespace dlperf {

bool is_out_of_memory(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const OutOfMemoryError&) {
    return true;
  } catch (const std::bad_alloc&) {
    return true;
  } catch (const dnnl::error& d) {
    return d.status == dnnl_out_of_memory;
  } catch (...) {
    return false;
  }
}

}  // namespace dlperf
