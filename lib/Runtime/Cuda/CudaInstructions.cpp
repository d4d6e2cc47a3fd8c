//===- CudaInstructions.cpp - Plan instructions as CUDA kernels ----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The CUDA backend's dispatch: each compute instruction of Instructions.def
// on its CUDA kernel or cuBLASLt GEMM in the data's element type (f32, bf16,
// f16), optimizer operands in f32. Its state lives in CudaBackendImpl.h.
//
//===----------------------------------------------------------------------===//

#include "CudaBackendImpl.h"
#include "dsc/Runtime/CpuAdam.h"

#include <cmath>
#include <string>
#include <vector>

using namespace dsc::rt;
using namespace dsc::rt::cuda_backend;

template <typename T>
void CudaBackend::execute(InstructionContext &ex, const Program &prog, size_t index) {
  const Plan &plan = ex.plan();
  const Instruction &inst = prog.instructions[index];
  auto fail = [&](const std::string &msg) {
    throw instructionError(prog, index, msg);
  };
  auto launched = [&](cudaError_t e) {
    if (e != cudaSuccess)
      fail("kernel launch failed (" + cudaMessage(e) + ")");
  };
  auto gemmDone = [&](cublasStatus_t s) {
    if (s != CUBLAS_STATUS_SUCCESS)
      fail("cuBLASLt GEMM failed (status " + std::to_string(int(s)) + ")");
  };
  auto inB = [&](size_t i) -> const Buffer & {
    return plan.buffers[inst.inputs[i]];
  };
  auto outB = [&](size_t i) -> const Buffer & {
    return plan.buffers[inst.outputs[i]];
  };
  // The data in the instruction's element type; f32 scalars and optimizer
  // operands (losses, norms, learning rates, master weights, moments).
  auto in = [&](size_t i) { return ex.buffer(inst.inputs[i]).as<T>(); };
  auto out = [&](size_t i) { return ex.buffer(inst.outputs[i]).as<T>(); };
  auto inF = [&](size_t i) { return ex.buffer(inst.inputs[i]).as<float>(); };
  auto outF = [&](size_t i) {
    return ex.buffer(inst.outputs[i]).as<float>();
  };
  auto ids = [&](size_t i) {
    return ex.buffer(inst.inputs[i]).as<int32_t>();
  };
  auto count = [&](const Buffer &b) { return numElements(b.shape); };
  // Runs `launch(counts)` with `n` device int64 counters and returns them
  // on the host: a wait on the stream, paid where a bad plan must fail at
  // its instruction as on the CPU (MoE slots naming no token, a dropless
  // router that dropped) and for the MoE routers' expert loads.
  auto countsOnHost = [&](int64_t n, auto &&launch) {
    std::vector<int64_t> host(size_t(n), 0);
    int64_t *device = nullptr;
    check(cudaMallocAsync((void **)&device, sizeof(int64_t) * host.size(),
                          stream),
          "cudaMallocAsync (a kernel's counts)");
    const cudaError_t e = launch(device);
    if (e == cudaSuccess)
      copyOut(host.data(), device, sizeof(int64_t) * host.size());
    check(cudaFreeAsync(device, stream), "cudaFreeAsync (a kernel's counts)");
    launched(e);
    return host;
  };

  switch (inst.opcode) {
  case Opcode::Embedding: {
    // Its ids are the tokens buffer (prepare), checked on the host when
    // they were copied in (Executor::setTokens): no wait here.
    const Buffer &table = inB(0);
    launched(cuda::embeddingForward(in(0), ids(1), out(0), count(inB(1)),
                                    table.shape[0], table.shape[1],
                                    /*badCount=*/nullptr, stream));
    break;
  }
  case Opcode::EmbeddingGrad: {
    const Buffer &table = outB(0);
    launched(cuda::embeddingBackward(in(0), ids(1), out(0), count(inB(1)),
                                     table.shape[0], table.shape[1],
                                     ops::EmbeddingGrad::decode(inst).accumulate != 0,
                                     stream));
    break;
  }
  case Opcode::PositionEmbedding: {
    const ops::PositionEmbedding pe = ops::PositionEmbedding::decode(inst);
    launched(cuda::positionEmbeddingForward(in(0), out(0), pe.batch, pe.seq,
                                            inB(0).shape[1], stream));
    break;
  }
  case Opcode::PositionEmbeddingGrad: {
    const auto pg = ops::PositionEmbeddingGrad::decode(inst);
    launched(cuda::positionEmbeddingBackward(in(0), out(0), pg.batch, pg.seq,
                                             outB(0).shape[0],
                                             outB(0).shape[1],
                                             pg.accumulate != 0, stream));
    break;
  }
  case Opcode::Matmul:
    gemmDone(cuda::matmulForward(matmul, in(0), in(1), out(0),
                                 matmulShapeOf(inst),
                                 ops::Matmul::decode(inst).accumulate != 0,
                                 stream));
    break;
  case Opcode::Add:
    launched(cuda::addForward(in(0), in(1), out(0), count(inB(0)), stream));
    break;
  case Opcode::Mul:
    launched(cuda::mulForward(in(0), in(1), out(0), count(inB(0)), stream));
    break;
  case Opcode::BiasAdd:
    launched(cuda::biasAddForward(in(0), in(1), out(0), rowsOf(inB(0)),
                                  lastDim(inB(0)), stream));
    break;
  case Opcode::Gelu:
    launched(cuda::geluForward(in(0), out(0), count(inB(0)), stream));
    break;
  case Opcode::GeluExact:
    launched(cuda::geluExactForward(in(0), out(0), count(inB(0)), stream));
    break;
  case Opcode::BiasGelu:
    launched(cuda::biasGeluForward(
        in(0), in(1), out(0), rowsOf(inB(0)), lastDim(inB(0)),
        ops::BiasGelu::decode(inst).exact != 0, stream));
    break;
  case Opcode::MoeRoute: {
    const ops::MoeRoute op = ops::MoeRoute::decode(inst);
    const MoeRouting r = moeRoutingOf(inst, inB(0), outB(0));
    int32_t *slots = ex.buffer(inst.outputs[0]).as<int32_t>();
    // The drop count, then the experts' loads (one copy back).
    const std::vector<int64_t> counts =
        countsOnHost(1 + r.experts, [&](int64_t *device) {
          return cuda::moeRoute(r, in(0), ex.dropoutSeed(op.seed), slots,
                                out(1), out(2), device, device + 1, stream);
        });
    if (!r.dropTokens && counts[0])
      fail(std::to_string(counts[0]) +
           " (token, expert) pairs did not fit although the router drops "
           "none");
    ex.noteExpertLoads(prog, index, counts.data() + 1, r.experts);
    break;
  }
  case Opcode::MoeRouteGrad:
    // dAux stays on the device: the kernel reads it there.
    launched(cuda::moeRouteBackward(moeRoutingOf(inst, inB(0), inB(1)), in(0),
                                    ids(1), in(2), in(3), out(0),
                                    /*accumulate=*/false, stream));
    break;
  case Opcode::MoeDispatch:
  case Opcode::MoeDispatchScaled: {
    const bool scaled = inst.opcode == Opcode::MoeDispatchScaled;
    if (countsOnHost(1, [&](int64_t *bad) {
          return cuda::moeDispatch(in(0), ids(1), scaled ? in(2) : nullptr,
                                   out(0), count(inB(1)), lastDim(inB(0)),
                                   rowsOf(inB(0)), bad, stream);
        })[0])
      fail("a slot names a token outside [0, " +
           std::to_string(rowsOf(inB(0))) + ")");
    break;
  }
  case Opcode::MoeCombine:
  case Opcode::MoeCombineSum: {
    const bool weighted = inst.opcode == Opcode::MoeCombine;
    const bool accumulate =
        (weighted ? ops::MoeCombine::decode(inst).accumulate
                  : ops::MoeCombineSum::decode(inst).accumulate) != 0;
    if (countsOnHost(1, [&](int64_t *bad) {
          return cuda::moeCombine(in(0), ids(1), weighted ? in(2) : nullptr,
                                  out(0), count(inB(1)), lastDim(outB(0)),
                                  rowsOf(outB(0)), accumulate, bad, stream);
        })[0])
      fail("a slot names a token outside [0, " +
           std::to_string(rowsOf(outB(0))) + ")");
    break;
  }
  case Opcode::MoeGatesGrad:
    launched(cuda::moeGatesGrad(in(0), ids(1), in(2), out(0), count(inB(1)),
                                lastDim(inB(2)), rowsOf(inB(2)),
                                ops::MoeGatesGrad::decode(inst).accumulate != 0,
                                stream));
    break;
  case Opcode::Swiglu:
    launched(cuda::swigluForward(in(0), out(0), rowsOf(inB(0)),
                                 lastDim(outB(0)), stream));
    break;
  case Opcode::SwigluGrad:
    launched(cuda::swigluBackward(in(0), in(1), out(0), rowsOf(inB(0)),
                                  lastDim(inB(1)), stream));
    break;
  case Opcode::RepeatHeads: {
    const ops::RepeatHeads rh = ops::RepeatHeads::decode(inst);
    launched(cuda::repeatHeadsForward(in(0), out(0), rowsOf(inB(0)),
                                      lastDim(inB(0)) / rh.headDim, rh.headDim,
                                      rh.repeats, stream));
    break;
  }
  case Opcode::RepeatHeadsGrad: {
    const ops::RepeatHeadsGrad rh = ops::RepeatHeadsGrad::decode(inst);
    launched(cuda::repeatHeadsBackward(in(0), out(0), rowsOf(outB(0)),
                                       lastDim(outB(0)) / rh.headDim,
                                       rh.headDim, rh.repeats, stream));
    break;
  }
  case Opcode::Rotary: {
    const ops::Rotary ro = ops::Rotary::decode(inst);
    const std::vector<int64_t> &shape = inB(0).shape;
    launched(cuda::rotaryForward(in(0), out(0), rowsOf(inB(0)),
                                 shape[shape.size() - 2], lastDim(inB(0)),
                                 ro.headDim, ro.rotaryDims, ro.base,
                                 bool(ro.inverse), stream));
    break;
  }
  case Opcode::LayerNorm:
    launched(cuda::layerNormForward(in(0), in(1), in(2), out(0), nullptr,
                                    nullptr, rowsOf(inB(0)), lastDim(inB(0)),
                                    float(ops::LayerNorm::decode(inst).eps),
                                    stream));
    break;
  case Opcode::RmsNorm: {
    const ops::RmsNorm rn = ops::RmsNorm::decode(inst);
    launched(cuda::rmsNormForward(in(0), in(1), out(0), rowsOf(inB(0)),
                                  lastDim(inB(0)), float(rn.eps),
                                  bool(rn.epsOutside), stream));
    break;
  }
  case Opcode::Softmax:
    launched(cuda::softmaxForward(in(0), out(0), rowsOf(inB(0)),
                                  lastDim(inB(0)), stream));
    break;
  case Opcode::Attention:
  case Opcode::AttentionGrad:
  case Opcode::AttentionLse:
  case Opcode::AttentionGradLse: {
    AttentionShape s = attentionShapeOf(plan, inst, ex.dropoutSeed(attentionSeedOf(inst)),
                                        ex.meshCoordinates());
    // With the forward's output and logsumexp saved (the *Lse pair) the
    // backward takes its row terms from them instead of running the
    // forward again.
    if (inst.opcode == Opcode::Attention)
      launched(cuda::attentionForward(in(0), in(1), in(2), out(0), nullptr, s,
                                      stream));
    else if (inst.opcode == Opcode::AttentionLse)
      launched(cuda::attentionForward(in(0), in(1), in(2), out(0), outF(1), s,
                                      stream));
    else if (inst.opcode == Opcode::AttentionGradLse)
      launched(cuda::attentionBackward(in(0), in(1), in(2), inF(5), in(3),
                                       out(0), out(1), out(2), s,
                                       AccumulateMask(0), stream, in(4)));
    else
      launched(cuda::attentionBackward(in(0), in(1), in(2), nullptr, in(3),
                                       out(0), out(1), out(2), s,
                                       AccumulateMask(0), stream));
    break;
  }
  case Opcode::CrossEntropy:
    // A target outside the vocabulary makes the loss NaN, which dsc-run
    // reports; the data sources check targets before they get here.
    launched(cuda::crossEntropyForward(
        in(0), ids(1), nullptr, outF(0), rowsOf(inB(0)), lastDim(inB(0)),
        ops::CrossEntropy::decode(inst).classes, stream));
    break;
  case Opcode::CrossEntropyGrad:
    launched(cuda::crossEntropyBackward(
        in(0), ids(1), nullptr, float(readScalar(inB(2), in(2))), out(0),
        rowsOf(inB(0)), lastDim(inB(0)),
        ops::CrossEntropyGrad::decode(inst).classes, false, stream));
    break;
  case Opcode::Copy:
    copy(out(0), in(0), inB(0).bytes);
    break;
  case Opcode::TakeChunk: {
    // This rank's chunk of the replicated input.
    Communicator *comm =
        &ex.requireGroup(prog, index, ops::TakeChunk::decode(inst).axes);
    const size_t bytes = outB(0).bytes;
    copy(out(0),
         reinterpret_cast<const uint8_t *>(in(0)) +
             bytes * size_t(comm->rank()),
         bytes);
    break;
  }
  case Opcode::Transpose: {
    const Permutation p = permutationOf(inst);
    launched(cuda::transposeForward(in(0), out(0), inB(0).shape.data(), p.perm,
                                    p.rank, stream));
    break;
  }
  case Opcode::Slice: {
    const std::vector<int64_t> offsets = ops::Slice::decode(inst).offsets;
    launched(cuda::sliceForward(in(0), out(0), inB(0).shape.data(),
                                outB(0).shape.data(), offsets.data(),
                                int(offsets.size()), stream));
    break;
  }
  case Opcode::SliceGrad: {
    const std::vector<int64_t> offsets = ops::SliceGrad::decode(inst).offsets;
    launched(cuda::sliceBackward(in(0), out(0), outB(0).shape.data(),
                                 inB(0).shape.data(), offsets.data(),
                                 int(offsets.size()), false, stream));
    break;
  }
  case Opcode::Concat: {
    const Buffer &y = outB(0);
    const size_t dim = size_t(ops::Concat::decode(inst).dim);
    std::vector<const T *> ins;
    std::vector<int64_t> dims;
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      ins.push_back(in(i));
      dims.push_back(inB(i).shape[dim]);
    }
    launched(cuda::concatForward(ins.data(), dims.data(), int(ins.size()),
                                 out(0), product(y.shape, 0, dim),
                                 product(y.shape, dim + 1, y.shape.size()),
                                 stream));
    break;
  }
  case Opcode::Dropout: {
    const ops::Dropout dr = ops::Dropout::decode(inst);
    launched(cuda::dropoutForward(in(0), out(0), count(inB(0)), float(dr.p),
                                  ex.dropoutSeed(dr.seed), 0, stream));
    break;
  }
  case Opcode::DropoutChunk: {
    const ops::DropoutChunk dr = ops::DropoutChunk::decode(inst);
    Communicator *comm = &ex.requireGroup(prog, index, dr.axes);
    launched(cuda::dropoutForward(
        in(0), out(0), count(inB(0)), float(dr.p), ex.dropoutSeed(dr.seed),
        uint64_t(count(inB(0))) * uint64_t(comm->rank()), stream));
    break;
  }
  case Opcode::BiasGrad:
    launched(cuda::biasGrad(in(0), out(0), rowsOf(inB(0)), lastDim(inB(0)),
                            ops::BiasGrad::decode(inst).accumulate != 0,
                            stream));
    break;
  case Opcode::GeluGrad:
    launched(cuda::geluBackward(in(0), in(1), out(0), count(inB(0)), false,
                                stream));
    break;
  case Opcode::GeluExactGrad:
    launched(cuda::geluExactBackward(in(0), in(1), out(0), count(inB(0)), false,
                                     stream));
    break;
  case Opcode::BiasGeluGrad:
    launched(cuda::biasGeluBackward(
        in(0), in(1), in(2), out(0), rowsOf(inB(0)), lastDim(inB(0)),
        ops::BiasGeluGrad::decode(inst).exact != 0, false, stream));
    break;
  case Opcode::SoftmaxGrad:
    launched(cuda::softmaxBackward(in(0), in(1), out(0), rowsOf(inB(0)),
                                   lastDim(inB(0)), false, stream));
    break;
  case Opcode::LayerNormGrad: {
    const ops::LayerNormGrad lg = ops::LayerNormGrad::decode(inst);
    launched(cuda::layerNormBackward(
        in(0), in(1), nullptr, nullptr, in(2), out(0), out(1), out(2),
        rowsOf(inB(0)), lastDim(inB(0)), float(lg.eps),
        AccumulateMask(lg.accumulate), stream));
    break;
  }
  case Opcode::RmsNormGrad: {
    const ops::RmsNormGrad rg = ops::RmsNormGrad::decode(inst);
    launched(cuda::rmsNormBackward(in(0), in(1), in(2), out(0), out(1),
                                   rowsOf(inB(0)), lastDim(inB(0)),
                                   float(rg.eps), bool(rg.epsOutside),
                                   AccumulateMask(rg.accumulate), stream));
    break;
  }
  case Opcode::Accumulate:
    launched(cuda::accumulate(in(0), out(0), count(inB(0)), stream));
    break;
  case Opcode::GlobalNormClip: {
    std::vector<float *> ptrs;
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      ptrs.push_back(inF(i));
      sizes.push_back(count(inB(i)));
    }
    launched(cuda::sumOfSquares(
        const_cast<const float *const *>(ptrs.data()), sizes.data(),
        int(ptrs.size()), deviceSums, stream));
    // The clip factor is computed on the device from the same sum; no
    // clipping below a positive max norm, as on the CPU.
    const double maxNorm = ops::GlobalNormClip::decode(inst).maxNorm;
    if (maxNorm > 0)
      launched(cuda::clipGradients(ptrs.data(), sizes.data(),
                                   int(ptrs.size()), deviceSums, 1.0, maxNorm,
                                   stream));
    double sum = 0;
    copyOut(&sum, deviceSums, sizeof sum);
    writeScalar(outF(0), std::sqrt(sum));
    break;
  }
  case Opcode::GlobalNormClipParts: {
    // As the CPU backend: each part's valid elements weighted by 1/(its
    // copies in the group), summed over the group, then one clip factor.
    const ops::GlobalNormClipParts op = ops::GlobalNormClipParts::decode(inst);
    const std::vector<NormPart> parts = normParts(op);
    Communicator *comm = &ex.requireGroup(prog, index, op.axes);
    const std::vector<int64_t> &coords = ex.meshCoordinates();
    std::vector<float *> held;
    std::vector<int64_t> sizes;
    std::vector<double> copies;
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      const int64_t chunkAxes = parts[i].chunkAxes;
      const int64_t splitAxes = parts[i].splitAxes;
      const bool inBuffer = parts[i].inBuffer;
      int64_t n = count(inB(i));
      float *data = inF(i);
      if (chunkAxes && !inBuffer) {
        n /= groupSize(plan.mesh, chunkAxes);
        data += n * groupIndex(plan.mesh, coords, chunkAxes);
      }
      const int64_t parts =
          groupSize(plan.mesh, chunkAxes) * groupSize(plan.mesh, splitAxes);
      copies.push_back(double(comm->size()) / double(parts));
      held.push_back(data);
      sizes.push_back(n);
    }
    std::vector<double> sums =
        sumsOfSquares(held.data(), sizes.data(), int(held.size()));
    double sum = 0;
    for (size_t i = 0; i < sums.size(); ++i)
      sum += sums[i] / copies[i];
    copyIn(deviceSums, &sum, sizeof sum);
    // NCCL runs on the communication stream; the clip waits for it.
    waitCollective(launchCollective(
        [&] { comm->allReduce(deviceSums, 1, DType::F64, ReduceOp::Sum); }));
    if (op.maxNorm > 0)
      launched(cuda::clipGradients(held.data(), sizes.data(),
                                   int(held.size()), deviceSums, 1.0,
                                   op.maxNorm, stream));
    copyOut(&sum, deviceSums, sizeof sum);
    writeScalar(outF(0), std::sqrt(sum));
    break;
  }
  case Opcode::LearningRate:
    writeScalar(outF(0), ex.learningRate(ops::LearningRate::decode(inst)));
    break;
  case Opcode::CyclicLearningRate:
    writeScalar(outF(0), cyclicLearningRate(
                             ops::CyclicLearningRate::decode(inst), ex.step()));
    break;
  case Opcode::AdamW: {
    AdamWConfig cfg = adamConfigOf(inst, readScalar(inB(1), in(1)));
    // States in the pinned host tier (--dsc-offload): ZeRO-Offload's CPU
    // Adam on the host's cores, not a kernel reading them across PCIe. The
    // stream's work on them (the norm's clipping of the gradient copies)
    // finishes first.
    if (ex.plan().arenas[outB(0).arena].tier == Tier::Host) {
      synchronize();
      static const CpuIsa isa = detectCpuIsa();
      cpuAdamW(outF(0), inF(0), outF(1), outF(2), count(inB(0)), cfg,
               ex.step(), adamDecayOf(inst), nullptr, isa);
      break;
    }
    launched(cuda::adamwStep<float, __nv_bfloat16>(
        outF(0), inF(0), outF(1), outF(2), count(inB(0)), cfg, ex.step(),
        adamDecayOf(inst), 1.0f, nullptr, stream));
    break;
  }
  case Opcode::AdamWShard: {
    // This rank's chunk of the flattened parameter, as on the CPU.
    Communicator *comm =
        &ex.requireGroup(prog, index, ops::AdamWShard::decode(inst).axes);
    const int64_t chunk = numElements(outB(1).shape);
    const int64_t offset = chunk * comm->rank();
    const int64_t gradOffset = count(inB(0)) == chunk ? 0 : offset;
    AdamWConfig cfg = adamConfigOf(inst, readScalar(inB(1), in(1)));
    launched(cuda::adamwStep<float, __nv_bfloat16>(
        outF(0) + offset, inF(0) + gradOffset, outF(1), outF(2), chunk, cfg,
        ex.step(), adamDecayOf(inst), 1.0f, nullptr, stream));
    break;
  }
  case Opcode::Sgd:
    launched(cuda::sgdStep<float, __nv_bfloat16>(
        outF(0), inF(0), outF(1), count(inB(0)),
        sgdConfigOf(inst, readScalar(inB(1), in(1))), 1.0f, nullptr, stream));
    break;
  default:
    fail("the CUDA backend does not run this instruction");
  }
}

template void CudaBackend::execute<float>(InstructionContext &, const Program &, size_t);
template void CudaBackend::execute<__nv_bfloat16>(InstructionContext &, const Program &,
                                                  size_t);
template void CudaBackend::execute<__half>(InstructionContext &, const Program &, size_t);
