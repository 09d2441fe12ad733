// Tests of the cpu backend's bf16. It computes bf16 only on a CPU with native bf16 (AVX512-BF16
// or AMX) and refuses it elsewhere (AMD Zen 3, Intel before Cooper Lake), so there such a test
// skips. Its name must contain "Bf16": tests/CMakeLists.txt gives those the label hardware, and
// scripts/check-fresh-machine.sh lets a fresh root skip only tests labelled cuda or hardware.
#pragma once
#include <gtest/gtest.h>

#include "backend/backend.h"

#define DLPERF_SKIP_WITHOUT_CPU_BF16()                                                                                  \
  if (!::dlperf::cpu_computes_bf16())                                                                                   \
  GTEST_SKIP() << "this CPU has no native bf16 (AVX512-BF16 or AMX), and the cpu backend refuses bf16 without it"
