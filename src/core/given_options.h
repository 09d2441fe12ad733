#pragma once
// What boost::program_options' types hide, checked from the text as given on the command line.
// Shared by every dlperf program, so `--x ""` and `--x 1e-400` mean the same thing to all of them.
// Header-only: each program links Boost::program_options itself, the core libraries do not.

#include <boost/program_options.hpp>
#include <initializer_list>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/parse_number.h"

namespace dlperf {

// Throws a usage error for
//  * an empty value, unless the option is in `may_be_empty`: an unset shell variable
//    (`--optimizer "$OPT"`, `--tokens "$PREFIX"`) would otherwise run with the default, or make
//    something other than what was asked, and exit 0;
//  * a non-zero number that the option's type reads as 0 (1e-400 as a double, 1e-50 as a float),
//    which would turn "tiny" into "off" (a threshold, a timeout, a link rate).
// Positional words are left to the program. Call after po::store().
inline void check_given_texts(const boost::program_options::parsed_options& parsed,
                              const boost::program_options::variables_map& vm,
                              std::initializer_list<std::string_view> may_be_empty = {}) {
  for (const auto& opt : parsed.options) {
    if (opt.position_key != -1 || !vm.count(opt.string_key)) continue;
    const auto& v = vm[opt.string_key].value();
    const auto* f = boost::any_cast<float>(&v);
    const auto* d = boost::any_cast<double>(&v);
    for (const auto& text : opt.value) {
      bool allowed = false;
      for (const auto name : may_be_empty) allowed = allowed || name == opt.string_key;
      if (text.empty() && !allowed)
        throw_usage_error("--" + opt.string_key + " was given an empty value (an unset variable?): give a value or drop the option");
      if (((f && *f == 0) || (d && *d == 0)) && names_a_nonzero_number(text))
        throw_usage_error("--" + opt.string_key + " " + text + " is too small: it would be read as 0" +
                          (f ? " (the smallest fp32 is 1.2e-38)" : " (the smallest double is 2.2e-308)"));
    }
  }
}

}  // namespace dlperf
