//===- Initializers.cpp - A plan's buffers' initial values ----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Counter-based draws, so a value is a pure function of its coordinates.
//
//===----------------------------------------------------------------------===//

#include "Initializers.h"

#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/Fnv1a.h"
#include "dsc/Runtime/ShardLayout.h"
#include "dsc/Runtime/SplitMix64.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>

using namespace dsc::rt;

namespace {

/// A uniform double in (0, 1) from 53 random bits; never 0, so log() is safe.
double uniformOpen(uint64_t bits) {
  return (double(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/// Element i of N(0, 1) for stream `key`: Box-Muller over two counter-based
/// uniforms, a pure function of (key, i).
double normalAt(uint64_t key, uint64_t i) {
  double u1 = uniformOpen(splitmix64(key ^ splitmix64(2 * i)));
  double u2 = uniformOpen(splitmix64(key ^ splitmix64(2 * i + 1)));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

} // namespace

void dsc::rt::writeInitialValues(const Plan &plan,
                                 const std::vector<int64_t> &coords,
                                 uint64_t seed, Arenas &arenas) {
  // Values are drawn on the host and copied in, so every backend starts
  // from the same bits.
  std::vector<uint8_t> host;
  for (uint32_t id = 0; id < plan.buffers.size(); ++id) {
    const Buffer &b = plan.buffers[id];
    if (b.init.kind == InitKind::None || b.init.kind == InitKind::Zeros ||
        !arenas.holds(id)) // another pipeline rank's
      continue;
    const int64_t n = numElements(b.shape);
    const bool normal = b.init.kind == InitKind::Normal;
    const double value = b.init.kind == InitKind::Ones ? 1.0 : b.init.value;
    const double stddev = b.init.std;
    const uint64_t key = splitmix64(
        seed ^
        splitmix64(fnv1a64(reinterpret_cast<const uint8_t *>(b.name.data()),
                           b.name.size())));
    // A rank's part of a sharded parameter draws the whole parameter's
    // values at its elements' whole indices.
    const bool sharded = normal && !b.layout.isWhole();
    std::optional<ShardIndexer> indexer;
    if (sharded)
      indexer.emplace(b.layout, n, plan.mesh, coords);
    host.resize(b.bytes);
    auto fill = [&](auto *p) {
      using T = std::remove_pointer_t<decltype(p)>;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t at = sharded ? indexer->wholeIndex(i) : i;
        p[i] = normal ? T(stddev * normalAt(key, uint64_t(at))) : T(value);
      }
    };
    if (b.dtype == DType::F32)
      fill(reinterpret_cast<float *>(host.data()));
    else if (b.dtype == DType::F64)
      fill(reinterpret_cast<double *>(host.data()));
    else if (b.dtype == DType::I32 && !normal)
      std::fill_n(reinterpret_cast<int32_t *>(host.data()), n, int32_t(value));
    else if (b.dtype == DType::BF16 || b.dtype == DType::F16) {
      // Drawn in f32, then rounded: the values an f32 master would cast to.
      std::vector<float> wide(static_cast<size_t>(n));
      fill(wide.data());
      convertFloats(wide.data(), DType::F32, host.data(), b.dtype, n);
    } else
      throw Error("buffer '" + b.name + "': cannot initialize " +
                  std::string(dtypeName(b.dtype)) + " buffers");
    arenas.writeBytes(id, host.data());
  }
}
