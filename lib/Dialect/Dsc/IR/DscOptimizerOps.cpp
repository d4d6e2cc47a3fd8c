//===- DscOptimizerOps.cpp - dsc optimizer op verifiers ---------*- C++ -*-===//
//
// Checks of the learning-rate schedule, clipping and update ops: every named
// state exists, has the parameter's type and the right kind, and every
// hyper-parameter is in range.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Support/CollectiveBytes.h"

#include <cmath>

using namespace mlir;
using namespace mlir::dsc;

/// Checks that `name` is a dsc.state of `kind` belonging to `param`.
static LogicalResult verifyStateOf(Operation *op, SymbolTableCollection &tables,
                                   FlatSymbolRefAttr name, StateKind kind,
                                   ParameterOp param, StringRef role) {
  auto state = tables.lookupNearestSymbolFrom<StateOp>(op, name);
  if (!state)
    return op->emitOpError(role)
           << " '" << name << "' does not name a dsc.state";
  if (state.getKind() != kind)
    return op->emitOpError(role)
           << " '" << name << "' is a " << stringifyStateKind(state.getKind())
           << " state, expected " << stringifyStateKind(kind);
  if (state.getOf() != param.getSymName())
    return op->emitOpError(role)
           << " '" << name << "' belongs to '@" << state.getOf()
           << "', not to '@" << param.getSymName() << "'";
  return success();
}

static FailureOr<ParameterOp> lookupParam(Operation *op,
                                          SymbolTableCollection &tables,
                                          FlatSymbolRefAttr name) {
  auto param = tables.lookupNearestSymbolFrom<ParameterOp>(op, name);
  if (!param)
    return op->emitOpError("'") << name << "' does not name a dsc.parameter";
  return param;
}

static LogicalResult verifyStateList(Operation *op,
                                     SymbolTableCollection &tables,
                                     ArrayAttr states, bool gradientsOnly) {
  for (Attribute attr : states) {
    auto name = dyn_cast<FlatSymbolRefAttr>(attr);
    if (!name)
      return op->emitOpError("expects flat symbol references, got ") << attr;
    auto state = tables.lookupNearestSymbolFrom<StateOp>(op, name);
    if (!state)
      return op->emitOpError("'") << name << "' does not name a dsc.state";
    if (gradientsOnly && state.getKind() != StateKind::Gradient &&
        state.getKind() != StateKind::GradientCopy)
      return op->emitOpError("'") << name << "' is not a gradient state";
  }
  return success();
}

LogicalResult LearningRateOp::verify() {
  double base = getBase().convertToDouble(), min = getMin().convertToDouble();
  int64_t warmup = getWarmupAttr().getInt(), total = getTotalAttr().getInt();
  if (!(base > 0.0))
    return emitOpError("base learning rate must be > 0, got ") << base;
  if (!(min >= 0.0 && min <= base))
    return emitOpError("min learning rate must be in [0, base = ")
           << base << "], got " << min;
  if (warmup < 0 || total < 0)
    return emitOpError("warmup and total steps must be >= 0");
  double start = getWarmupStart().convertToDouble();
  if (!(start >= 0.0 && start <= base))
    return emitOpError("warmup_start must be in [0, base = ")
           << base << "], got " << start;
  const LrSchedule schedule = getSchedule();
  if (decaysAfterWarmup(schedule) && total <= warmup)
    return emitOpError("a decaying schedule needs total steps (")
           << total << ") > warmup steps (" << warmup << ")";
  // GPT-NeoX's AnnealingLR ramps from 0 linearly: DeepSpeed's warmup
  // options do not apply to it.
  if (isAnnealing(schedule) && (start != 0.0 || getLogWarmup()))
    return emitOpError("'")
           << stringifyLrSchedule(schedule)
           << "' (GPT-NeoX's AnnealingLR) warms up linearly from 0: "
              "warmup_start and log_warmup do not apply";
  return success();
}

LogicalResult CyclicMomentumOp::verify() {
  const double min = getMin().convertToDouble(),
               max = getMax().convertToDouble();
  if (!(min > 0.0 && min <= max && max < 1.0))
    return emitOpError("needs 0 < min <= max < 1 (Adam's beta1), got min = ")
           << min << ", max = " << max;
  const double first = getFirstSize().convertToDouble(),
               second = getSecondSize().convertToDouble();
  if (!(first > 0.0) || !(second >= 0.0) ||
      !(getDecaySize().convertToDouble() >= 0.0) ||
      !std::isfinite(getRate().convertToDouble()))
    return emitOpError("first_size must be > 0, second_size and decay_size "
                       ">= 0, rate finite");
  if (getFirstStairs() < 0 || getSecondStairs() < 0)
    return emitOpError("stair counts must be >= 0");
  return success();
}

LogicalResult CyclicLearningRateOp::verify() {
  const double min = getMin().convertToDouble(),
               max = getMax().convertToDouble();
  const double first = getFirstSize().convertToDouble(),
               second = getSecondSize().convertToDouble();
  if (!(min > 0.0))
    return emitOpError("min learning rate must be > 0, got ") << min;
  if (!(first > 0.0))
    return emitOpError("first_size must be > 0, got ") << first;
  if (!(second >= 0.0) || !(getDecaySize().convertToDouble() >= 0.0) ||
      !std::isfinite(getRate().convertToDouble()))
    return emitOpError("second_size and decay_size must be >= 0 and rate "
                       "finite");
  if (getFirstStairs() < 0 || getSecondStairs() < 0)
    return emitOpError("stair counts must be >= 0");
  if (getSchedule() == CyclicLrSchedule::OneCycle) {
    if (!(max >= min))
      return emitOpError("one_cycle's max learning rate must be >= min = ")
             << min << ", got " << max;
    if (getSecondStairs() > 0 && second == 0.0)
      return emitOpError("second_stairs needs a second_size > 0");
  }
  return success();
}

LogicalResult ClipGradNormOp::verify() {
  if (getMaxNorm().convertToDouble() < 0.0)
    return emitOpError("max_norm must be >= 0 (0 disables clipping)");
  return success();
}

LogicalResult ClipGradNormOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (failed(verifyStateList(*this, tables, getGradients(),
                             /*gradientsOnly=*/true)))
    return failure();
  if (!getMeshAttr() && !getShardAxesAttr() && !getShardedAttr())
    return success();
  if (!getMeshAttr() || !getShardAxesAttr() || !getShardedAttr())
    return emitOpError("a sharded norm needs a mesh, shard axes and one "
                       "sharded flag per gradient");
  FailureOr<int64_t> group =
      getMeshGroupSize(*this, tables, getMeshAttr(), getShardAxesAttr());
  if (failed(group))
    return failure();
  ArrayRef<bool> flags = getShardedAttr().asArrayRef();
  if (flags.size() != getGradients().size())
    return emitOpError("has ") << flags.size() << " sharded flags for "
                               << getGradients().size() << " gradients";
  for (auto [name, flag] : llvm::zip(getGradients(), flags)) {
    auto state = tables.lookupNearestSymbolFrom<StateOp>(
        *this, cast<FlatSymbolRefAttr>(name));
    // A whole gradient must split into chunks; a shard is one already, and
    // so is the gradient of a ZeRO-3 chunk, which has the chunk's type.
    auto param =
        tables.lookupNearestSymbolFrom<ParameterOp>(*this, state.getOfAttr());
    bool whole =
        param && param.getType() == state.getType() && !param.isChunked();
    if (flag && whole && state.getTensorType().getNumElements() % *group != 0)
      return emitOpError("gradient '")
             << name << "' is sharded but does not divide into " << *group
             << " chunks";
  }
  return success();
}

LogicalResult
ReduceScatterStatesOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> group =
      getMeshGroupSize(*this, tables, getMeshAttr(), getMeshAxes());
  if (failed(group))
    return failure();
  if (getStates().empty())
    return emitOpError("needs at least one state");
  for (Attribute attr : getStates()) {
    auto name = dyn_cast<FlatSymbolRefAttr>(attr);
    auto state =
        name ? tables.lookupNearestSymbolFrom<StateOp>(*this, name) : nullptr;
    if (!state)
      return emitOpError("'") << attr << "' does not name a dsc.state";
    if (state.getTensorType().getNumElements() % *group != 0)
      return emitOpError("'")
             << attr << "' has " << state.getTensorType().getNumElements()
             << " elements, not divisible into " << *group << " chunks";
  }
  return success();
}

LogicalResult ZeroOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyStateList(*this, tables, getStates(), /*gradientsOnly=*/false);
}

LogicalResult AdamWOp::verify() {
  double beta1 = getBeta1().convertToDouble();
  double beta2 = getBeta2().convertToDouble();
  if (!(beta1 >= 0.0 && beta1 < 1.0) || !(beta2 >= 0.0 && beta2 < 1.0))
    return emitOpError("betas must be in [0, 1), got (")
           << beta1 << ", " << beta2 << ")";
  if (!(getEps().convertToDouble() > 0.0))
    return emitOpError("eps must be > 0");
  if (getWeightDecay().convertToDouble() < 0.0)
    return emitOpError("weight_decay must be >= 0");
  return success();
}

LogicalResult AdamWOp::verifySymbolUses(SymbolTableCollection &tables) {
  // The update runs on the parameter, or (--dsc-offload) on its master copy
  // in the offload tier with the gradient moved there.
  FailureOr<ParameterOp> param;
  int64_t n = 0;
  StateKind gradKind = StateKind::Gradient;
  if (auto master =
          tables.lookupNearestSymbolFrom<StateOp>(*this, getParamAttr());
      master && master.getKind() == StateKind::Master) {
    param = lookupParam(*this, tables, master.getOfAttr());
    n = master.getTensorType().getNumElements();
    gradKind = StateKind::GradientCopy;
  } else {
    param = lookupParam(*this, tables, getParamAttr());
    if (succeeded(param))
      n = param->getNumElements();
    // An offloaded ZeRO-3 chunk is updated where it lives, from the
    // gradient's copy there.
    if (succeeded(param) && param->getTier() != MemoryTier::Device)
      gradKind = StateKind::GradientCopy;
  }
  if (failed(param))
    return failure();
  if (failed(verifyStateOf(*this, tables, getGradAttr(), gradKind, *param,
                           "grad")) ||
      failed(verifyStateOf(*this, tables, getExpAvgAttr(), StateKind::ExpAvg,
                           *param, "exp_avg")) ||
      failed(verifyStateOf(*this, tables, getExpAvgSqAttr(),
                           StateKind::ExpAvgSq, *param, "exp_avg_sq")))
    return failure();
  // Unsharded moments have the parameter's type; ZeRO-1 moments hold
  // numel/D elements for a group of D ranks.
  int64_t shards = 1;
  if (getMeshAttr() || getShardAxesAttr()) {
    if (!getMeshAttr() || !getShardAxesAttr())
      return emitOpError("a sharded update needs both a mesh and shard axes");
    FailureOr<int64_t> group =
        getMeshGroupSize(*this, tables, getMeshAttr(), getShardAxesAttr());
    if (failed(group))
      return failure();
    shards = *group;
    if (n % shards != 0)
      return emitOpError("parameter '@")
             << getParam() << "' has " << n << " elements, not divisible into "
             << shards << " shards";
  }
  for (FlatSymbolRefAttr name : {getExpAvgAttr(), getExpAvgSqAttr()}) {
    auto state = tables.lookupNearestSymbolFrom<StateOp>(*this, name);
    int64_t have = state.getTensorType().getNumElements();
    if (have * shards != n)
      return emitOpError("state '")
             << name << "' has " << have << " elements; "
             << (shards == 1 ? "an unsharded update needs the parameter's "
                             : "a shard over the group needs ")
             << n / shards;
  }
  return success();
}

LogicalResult
AllGatherStatesOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> group =
      getMeshGroupSize(*this, tables, getMeshAttr(), getMeshAxes());
  if (failed(group))
    return failure();
  if (getBuffers().empty())
    return emitOpError("needs at least one buffer to gather");
  for (Attribute attr : getBuffers()) {
    auto name = dyn_cast<FlatSymbolRefAttr>(attr);
    Operation *decl =
        name ? tables.lookupNearestSymbolFrom(*this, name) : nullptr;
    RankedTensorType type;
    if (auto param = dyn_cast_or_null<ParameterOp>(decl))
      type = param.getTensorType();
    else if (auto state = dyn_cast_or_null<StateOp>(decl))
      type = state.getTensorType();
    else
      return emitOpError("'")
             << attr << "' does not name a dsc.parameter or dsc.state";
    if (type.getNumElements() % *group != 0)
      return emitOpError("'")
             << attr << "' has " << type.getNumElements()
             << " elements, not divisible into " << *group << " chunks";
  }
  return success();
}

LogicalResult SgdOp::verify() {
  if (getMomentum().convertToDouble() < 0.0)
    return emitOpError("momentum must be >= 0");
  if (getWeightDecay().convertToDouble() < 0.0)
    return emitOpError("weight_decay must be >= 0");
  return success();
}

LogicalResult SgdOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<ParameterOp> param = lookupParam(*this, tables, getParamAttr());
  if (failed(param))
    return failure();
  return failure(
      failed(verifyStateOf(*this, tables, getGradAttr(), StateKind::Gradient,
                           *param, "grad")) ||
      failed(verifyStateOf(*this, tables, getMomentumBufferAttr(),
                           StateKind::Momentum, *param, "momentum_buffer")));
}

//===----------------------------------------------------------------------===//
// 1-bit Adam
//===----------------------------------------------------------------------===//

/// Adam's hyper-parameters in range; `betas` only where the op takes them.
static LogicalResult verifyAdamHyperParameters(Operation *op,
                                               std::optional<double> beta1,
                                               std::optional<double> beta2,
                                               std::optional<double> eps,
                                               std::optional<double> wd) {
  for (auto [name, beta] :
       {std::make_pair("beta1", beta1), std::make_pair("beta2", beta2)})
    if (beta && !(*beta >= 0.0 && *beta < 1.0))
      return op->emitOpError(name) << " must be in [0, 1), got " << *beta;
  if (eps && !(*eps > 0.0))
    return op->emitOpError("eps must be > 0");
  if (wd && !(*wd >= 0.0))
    return op->emitOpError("weight_decay must be >= 0");
  return success();
}

/// 1-bit Adam's moments: `exp_avg` whole (the compression phase's local
/// momentum reads all of it), `exp_avg_sq` whole or, with `sharded on @mesh
/// axes = [...]` (ZeRO-1/2), this rank's chunk of the group's D.
static LogicalResult
verifyOnebitMoments(Operation *op, SymbolTableCollection &tables,
                    ParameterOp param, FlatSymbolRefAttr expAvg,
                    FlatSymbolRefAttr expAvgSq, FlatSymbolRefAttr mesh,
                    ArrayAttr shardAxes) {
  const int64_t n = param.getNumElements();
  int64_t shards = 1;
  if (mesh || shardAxes) {
    if (!mesh || !shardAxes)
      return op->emitOpError("a sharded update needs both a mesh and shard "
                             "axes");
    FailureOr<int64_t> group = getMeshGroupSize(op, tables, mesh, shardAxes);
    if (failed(group))
      return failure();
    shards = *group;
    if (n % shards != 0)
      return op->emitOpError("parameter '@")
             << param.getSymName() << "' has " << n
             << " elements, not divisible into " << shards << " shards";
  }
  for (auto [name, want, what] :
       {std::make_tuple(expAvg, n,
                        "the parameter's (1-bit Adam keeps the "
                        "momentum whole)"),
        std::make_tuple(expAvgSq, n / shards,
                        shards == 1 ? "the parameter's"
                                    : "a shard over the group's")}) {
    auto state = tables.lookupNearestSymbolFrom<StateOp>(op, name);
    if (state && state.getTensorType().getNumElements() != want)
      return op->emitOpError("state '")
             << name << "' has " << state.getTensorType().getNumElements()
             << " elements; it needs " << what << " " << want;
  }
  return success();
}

LogicalResult OnebitAdamOp::verify() {
  return verifyAdamHyperParameters(
      *this, getBeta1().convertToDouble(), getBeta2().convertToDouble(),
      getEps().convertToDouble(), getWeightDecay().convertToDouble());
}

LogicalResult OnebitAdamOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<ParameterOp> param = lookupParam(*this, tables, getParamAttr());
  if (failed(param))
    return failure();
  return failure(
      failed(verifyStateOf(*this, tables, getGradAttr(), StateKind::Gradient,
                           *param, "grad")) ||
      failed(verifyStateOf(*this, tables, getExpAvgAttr(), StateKind::ExpAvg,
                           *param, "exp_avg")) ||
      failed(verifyStateOf(*this, tables, getExpAvgSqAttr(),
                           StateKind::ExpAvgSq, *param, "exp_avg_sq")) ||
      failed(verifyOnebitMoments(*this, tables, *param, getExpAvgAttr(),
                                 getExpAvgSqAttr(), getMeshAttr(),
                                 getShardAxesAttr())));
}

LogicalResult AdamMomentumOp::verify() {
  return verifyAdamHyperParameters(*this, getBeta1().convertToDouble(),
                                   std::nullopt, std::nullopt, std::nullopt);
}

LogicalResult AdamMomentumOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto moment = tables.lookupNearestSymbolFrom<StateOp>(*this, getExpAvgAttr());
  if (!moment)
    return emitOpError("exp_avg '")
           << getExpAvgAttr() << "' does not name a dsc.state";
  FailureOr<ParameterOp> param = lookupParam(*this, tables, moment.getOfAttr());
  if (failed(param))
    return failure();
  return failure(failed(verifyStateOf(*this, tables, getExpAvgAttr(),
                                      StateKind::ExpAvg, *param, "exp_avg")) ||
                 failed(verifyStateOf(*this, tables, getGradAttr(),
                                      StateKind::Gradient, *param, "grad")));
}

LogicalResult FrozenAdamOp::verify() {
  return verifyAdamHyperParameters(*this, std::nullopt, std::nullopt,
                                   getEps().convertToDouble(),
                                   getWeightDecay().convertToDouble());
}

LogicalResult FrozenAdamOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<ParameterOp> param = lookupParam(*this, tables, getParamAttr());
  if (failed(param))
    return failure();
  return failure(
      failed(verifyStateOf(*this, tables, getExpAvgAttr(), StateKind::ExpAvg,
                           *param, "exp_avg")) ||
      failed(verifyStateOf(*this, tables, getExpAvgSqAttr(),
                           StateKind::ExpAvgSq, *param, "exp_avg_sq")) ||
      failed(verifyOnebitMoments(*this, tables, *param, getExpAvgAttr(),
                                 getExpAvgSqAttr(), getMeshAttr(),
                                 getShardAxesAttr())));
}

LogicalResult
CompressedAllReduceStatesOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> group =
      getMeshGroupSize(*this, tables, getMeshAttr(), getMeshAxes());
  if (failed(group))
    return failure();
  if (getStates().empty())
    return emitOpError("needs at least one state");
  int64_t n = 0;
  for (Attribute x : getStates()) {
    auto state = tables.lookupNearestSymbolFrom<StateOp>(
        *this, cast<FlatSymbolRefAttr>(x));
    if (!state)
      return emitOpError("'") << x << "' does not name a dsc.state";
    if (!state.getTensorType().getElementType().isF32())
      return emitOpError("'") << x << "' is " << state.getType()
                              << "; the compression works on f32";
    n += state.getTensorType().getNumElements();
  }
  const int64_t padded = ::dsc::onebitPaddedSize(n, *group);
  for (auto [name, kind, want] :
       {std::make_tuple(getWorkerErrorAttr(), StateKind::WorkerError, padded),
        std::make_tuple(getServerErrorAttr(), StateKind::ServerError,
                        padded / *group)}) {
    auto error = tables.lookupNearestSymbolFrom<StateOp>(*this, name);
    if (!error)
      return emitOpError("'") << name << "' does not name a dsc.state";
    if (error.getKind() != kind)
      return emitOpError("'")
             << name << "' is a " << stringifyStateKind(error.getKind())
             << " state, expected " << stringifyStateKind(kind);
    RankedTensorType type = error.getTensorType();
    if (type.getRank() != 1 || type.getNumElements() != want ||
        !type.getElementType().isF32())
      return emitOpError("'")
             << name << "' is " << error.getType() << "; the "
             << stringifyStateKind(kind) << " of " << getStates().size()
             << " states of " << n << " elements (padded to " << padded
             << " over " << *group << " ranks) is tensor<" << want << "xf32>";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// 1-bit LAMB
//===----------------------------------------------------------------------===//

/// A 1-bit LAMB step's hyper-parameters: Adam's, a range [lo, hi] with
/// lo > 0 (the trust ratio's, or the factor's), and a fraction in [0, 1]
/// (coeff_beta, or factor_threshold).
static LogicalResult
verifyLambHyperParameters(Operation *op, double beta1, double beta2, double eps,
                          double wd, StringRef loName, double lo,
                          StringRef hiName, double hi, StringRef fractionName,
                          double fraction) {
  if (failed(verifyAdamHyperParameters(op, beta1, beta2, eps, wd)))
    return failure();
  if (!(lo > 0.0))
    return op->emitOpError(loName) << " must be > 0, got " << lo;
  if (!(hi >= lo))
    return op->emitOpError(hiName)
           << " (" << hi << ") must be >= " << loName << " (" << lo << ")";
  if (!(fraction >= 0.0 && fraction <= 1.0))
    return op->emitOpError(fractionName)
           << " must be in [0, 1], got " << fraction;
  return success();
}

/// 1-bit LAMB's states of `param`: each `(name, kind, role)` a whole f32
/// tensor of the parameter's shape, and `coefficients` its f64 [5].
static LogicalResult verifyLambStates(
    Operation *op, SymbolTableCollection &tables, ParameterOp param,
    ArrayRef<std::tuple<FlatSymbolRefAttr, StateKind, StringRef>> states,
    FlatSymbolRefAttr coefficients) {
  for (auto [name, kind, role] : states) {
    if (failed(verifyStateOf(op, tables, name, kind, param, role)))
      return failure();
    auto state = tables.lookupNearestSymbolFrom<StateOp>(op, name);
    if (state.getType() != param.getType() ||
        !state.getTensorType().getElementType().isF32())
      return op->emitOpError(role)
             << " '" << name << "' is " << state.getType()
             << "; 1-bit LAMB keeps whole f32 states of the parameter's "
             << param.getType();
  }
  if (!coefficients)
    return success();
  if (failed(verifyStateOf(op, tables, coefficients,
                           StateKind::LambCoefficients, param, "coefficients")))
    return failure();
  auto state = tables.lookupNearestSymbolFrom<StateOp>(op, coefficients);
  RankedTensorType type = state.getTensorType();
  if (type.getRank() != 1 || type.getNumElements() != 5 ||
      !type.getElementType().isF64())
    return op->emitOpError("coefficients '")
           << coefficients << "' is " << state.getType()
           << "; a tensor's 1-bit LAMB coefficients are tensor<5xf64>";
  return success();
}

LogicalResult OnebitLambOp::verify() {
  return verifyLambHyperParameters(
      *this, getBeta1().convertToDouble(), getBeta2().convertToDouble(),
      getEps().convertToDouble(), getWeightDecay().convertToDouble(),
      "min_coeff", getMinCoeff().convertToDouble(), "max_coeff",
      getMaxCoeff().convertToDouble(), "coeff_beta",
      getCoeffBeta().convertToDouble());
}

LogicalResult OnebitLambOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<ParameterOp> param = lookupParam(*this, tables, getParamAttr());
  if (failed(param))
    return failure();
  return verifyLambStates(
      *this, tables, *param,
      {{getGradAttr(), StateKind::Gradient, "grad"},
       {getExpAvgAttr(), StateKind::ExpAvg, "exp_avg"},
       {getExpAvgSqAttr(), StateKind::ExpAvgSq, "exp_avg_sq"}},
      getCoefficientsAttr());
}

LogicalResult LambFreezeOp::verify() {
  const size_t n = getCoefficients().size();
  if (n == 0)
    return emitOpError("needs at least one tensor");
  if (getExpAvg().size() != n || getExpAvgSq().size() != n ||
      getFresh().size() != n)
    return emitOpError("has ")
           << n << " coefficients but " << getExpAvg().size() << " exp_avg, "
           << getExpAvgSq().size() << " exp_avg_sq and " << getFresh().size()
           << " fresh states: one of each per tensor";
  return success();
}

LogicalResult LambFreezeOp::verifySymbolUses(SymbolTableCollection &tables) {
  for (auto [c, m, v, vf] :
       llvm::zip(getCoefficients(), getExpAvg(), getExpAvgSq(), getFresh())) {
    auto coefficients = cast<FlatSymbolRefAttr>(c);
    auto state = tables.lookupNearestSymbolFrom<StateOp>(*this, coefficients);
    if (!state)
      return emitOpError("coefficients '")
             << coefficients << "' does not name a dsc.state";
    FailureOr<ParameterOp> param =
        lookupParam(*this, tables, state.getOfAttr());
    if (failed(param) ||
        failed(verifyLambStates(
            *this, tables, *param,
            {{cast<FlatSymbolRefAttr>(m), StateKind::ExpAvg, "exp_avg"},
             {cast<FlatSymbolRefAttr>(v), StateKind::ExpAvgSq, "exp_avg_sq"},
             {cast<FlatSymbolRefAttr>(vf), StateKind::ExpAvgSqFresh, "fresh"}},
            coefficients)))
      return failure();
  }
  return success();
}

LogicalResult LambMomentumOp::verify() {
  return verifyAdamHyperParameters(*this, getBeta1().convertToDouble(),
                                   std::nullopt, std::nullopt, std::nullopt);
}

LogicalResult LambMomentumOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto moment = tables.lookupNearestSymbolFrom<StateOp>(*this, getExpAvgAttr());
  if (!moment)
    return emitOpError("exp_avg '")
           << getExpAvgAttr() << "' does not name a dsc.state";
  FailureOr<ParameterOp> param = lookupParam(*this, tables, moment.getOfAttr());
  if (failed(param))
    return failure();
  return verifyLambStates(*this, tables, *param,
                          {{getExpAvgAttr(), StateKind::ExpAvg, "exp_avg"},
                           {getGradAttr(), StateKind::Gradient, "grad"},
                           {getLastAttr(), StateKind::ExpAvgLast, "last"}},
                          getCoefficientsAttr());
}

LogicalResult FrozenLambOp::verify() {
  return verifyLambHyperParameters(
      *this, getBeta1().convertToDouble(), getBeta2().convertToDouble(),
      getEps().convertToDouble(), getWeightDecay().convertToDouble(),
      "factor_min", getFactorMin().convertToDouble(), "factor_max",
      getFactorMax().convertToDouble(), "factor_threshold",
      getFactorThreshold().convertToDouble());
}

LogicalResult FrozenLambOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<ParameterOp> param = lookupParam(*this, tables, getParamAttr());
  if (failed(param))
    return failure();
  return verifyLambStates(
      *this, tables, *param,
      {{getExpAvgAttr(), StateKind::ExpAvg, "exp_avg"},
       {getLastAttr(), StateKind::ExpAvgLast, "last"},
       {getExpAvgSqAttr(), StateKind::ExpAvgSq, "exp_avg_sq"},
       {getFreshAttr(), StateKind::ExpAvgSqFresh, "fresh"}},
      getCoefficientsAttr());
}

//===----------------------------------------------------------------------===//
// 0/1 Adam
//===----------------------------------------------------------------------===//

/// 0/1 Adam's states of `param`: each `(name, kind, role)` a whole f32
/// tensor of the parameter's type (its local steps keep every rank's own
/// momentum and accumulator: nothing of them is sharded).
static LogicalResult verifyZeroOneAdamStates(
    Operation *op, SymbolTableCollection &tables, FlatSymbolRefAttr paramName,
    ArrayRef<std::tuple<FlatSymbolRefAttr, StateKind, StringRef>> states) {
  FailureOr<ParameterOp> param = lookupParam(op, tables, paramName);
  if (failed(param))
    return failure();
  if (!param->getTensorType().getElementType().isF32())
    return op->emitOpError("parameter '@")
           << param->getSymName() << "' is " << param->getType()
           << "; 0/1 Adam's states are f32 (use precision=fp32)";
  for (auto [name, kind, role] : states) {
    if (failed(verifyStateOf(op, tables, name, kind, *param, role)))
      return failure();
    auto state = tables.lookupNearestSymbolFrom<StateOp>(op, name);
    if (state.getType() != param->getType())
      return op->emitOpError(role)
             << " '" << name << "' is " << state.getType()
             << "; 0/1 Adam keeps whole states of the parameter's "
             << param->getType();
  }
  return success();
}

LogicalResult ZeroOneAdamUpdateOp::verify() {
  return verifyAdamHyperParameters(*this, std::nullopt, std::nullopt,
                                   getEps().convertToDouble(),
                                   getWeightDecay().convertToDouble());
}

LogicalResult
ZeroOneAdamUpdateOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyZeroOneAdamStates(
      *this, tables, getParamAttr(),
      {{getExpAvgAttr(), StateKind::ExpAvg, "exp_avg"},
       {getExpAvgSqAttr(), StateKind::ExpAvgSq, "exp_avg_sq"},
       {getAccumulatorAttr(), StateKind::MomentumAccumulator, "accumulator"}});
}

LogicalResult
AddLearningRateOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto state = tables.lookupNearestSymbolFrom<StateOp>(*this, getSumAttr());
  if (!state || state.getKind() != StateKind::LearningRateSum)
    return emitOpError("'")
           << getSumAttr() << "' does not name a learning_rate_sum state";
  return success();
}

LogicalResult ZeroOneAdamRewindOp::verify() {
  return verifyAdamHyperParameters(*this, std::nullopt, std::nullopt,
                                   getEps().convertToDouble(), std::nullopt);
}

LogicalResult
ZeroOneAdamRewindOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyZeroOneAdamStates(
      *this, tables, getParamAttr(),
      {{getAccumulatorAttr(), StateKind::MomentumAccumulator, "accumulator"},
       {getExpAvgSqAttr(), StateKind::ExpAvgSq, "exp_avg_sq"}});
}

LogicalResult ZeroOneAdamResyncOp::verify() {
  return verifyAdamHyperParameters(*this, std::nullopt, std::nullopt,
                                   getEps().convertToDouble(), std::nullopt);
}

LogicalResult
ZeroOneAdamResyncOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto sum = tables.lookupNearestSymbolFrom<StateOp>(*this, getLrSumAttr());
  if (!sum || sum.getKind() != StateKind::LearningRateSum)
    return emitOpError("lr_sum '")
           << getLrSumAttr() << "' does not name a learning_rate_sum state";
  return verifyZeroOneAdamStates(
      *this, tables, getParamAttr(),
      {{getExpAvgAttr(), StateKind::ExpAvg, "exp_avg"},
       {getAccumulatorAttr(), StateKind::MomentumAccumulator, "accumulator"},
       {getExpAvgSqAttr(), StateKind::ExpAvgSq, "exp_avg_sq"}});
}
