// --dsc-compile's counts below 1 are errors that name them (exit code 1,
// no crash): the plan's one parser checks them (dsc/Support/ParallelPlan.def).
// RUN: not dsc-opt %s --dsc-compile="dp=0" 2>&1 | FileCheck %s --check-prefix=DP
// RUN: not dsc-opt %s --dsc-compile="tp=-1" 2>&1 | FileCheck %s --check-prefix=TP
// RUN: not dsc-opt %s --dsc-compile="pp=0" 2>&1 | FileCheck %s --check-prefix=PP
// RUN: not dsc-opt %s --dsc-compile="microbatches=0" 2>&1 | FileCheck %s --check-prefix=MB
// DP: error: --dsc-compile: plan key 'dp': '0' is not an integer >= 1
// TP: error: --dsc-compile: plan key 'tp': '-1' is not an integer >= 1
// PP: error: --dsc-compile: plan key 'pp': '0' is not an integer >= 1
// MB: error: --dsc-compile: plan key 'microbatches': '0' is not an integer >= 1
// DP-NOT: Stack dump
// MB-NOT: Stack dump

// An unknown or contradictory key is an error naming it; the older
// spellings are aliases (one test each below).
// RUN: not dsc-opt %s --dsc-compile="dp=2 tq=2" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: <Pass-Options-Parser>: no such option tq
// RUN: not dsc-opt %s --dsc-compile="offload-optimizer=host offload=nvme" 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: --dsc-compile: plan key 'offload-optimizer' is given twice: 'offload-optimizer=host' and 'offload=nvme' contradict each other
// The aliases: v= is virtual-stages=, micro-batches= is microbatches=, sp is
// sequence-parallel, zero-stage= is zero=, offload=cpu is
// offload-optimizer=host (DeepSpeed's device name).
// RUN: dsc-opt %s --dsc-compile="dp=2 pp=1 micro-batches=2 zero-stage=1" | FileCheck %s --check-prefix=ALIAS
// ALIAS: dsc.microbatches = 2 : i64
// ZeRO-1 over dp=2: each rank's moment is half of the 8x16 weight.
// ALIAS: dsc.state @adam.m.w : tensor<64xf32> exp_avg of @w
// RUN: not dsc-opt %s --dsc-compile="v=2" 2>&1 | FileCheck %s --check-prefix=VALIAS
// VALIAS: error: --dsc-pipeline: virtual-stages=2 needs pipeline-schedule=interleaved-1f1b
// RUN: not dsc-opt %s --dsc-compile="sp" 2>&1 | FileCheck %s --check-prefix=SPALIAS
// SPALIAS: error: --dsc-tensor-parallel: sequence-parallel=1 splits the tensor-parallel group's tokens and needs tp > 1
// RUN: dsc-opt %s --dsc-compile="dp=2 zero=1 offload=cpu" | FileCheck %s --check-prefix=OFFLOAD
// OFFLOAD: dsc.state @offload.master.w : tensor<64xf32> master of @w in host

dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %w = dsc.get_parameter @w : tensor<8x16xf32>
  %y = dsc.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %l = dsc.cross_entropy %y, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}
