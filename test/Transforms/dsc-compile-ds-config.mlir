// --dsc-compile="ds-config=FILE": a DeepSpeed ds_config.json sets the
// options not written beside it, with DeepSpeed's meanings (the reader
// dsc-run --deepspeed uses, docs/configs.md). Its run-level keys do not
// change a plan and are named in a warning.
// RUN: dsc-opt %s --dsc-compile="ds-config=%S/../Integration/Inputs/deepspeed/zero2-bf16-cosine.json dp=2" 2>%t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=WARN < %t.err
// CHECK: module attributes {{.*}}dsc.microbatches = 2
// CHECK: dsc.mesh @mesh axes = ["dp"] shape = [2]
// CHECK: dsc.matmul {{.*}} : tensor<2x4x8xbf16>, tensor<8x16xbf16>
// CHECK: dsc.reduce_scatter_accumulate {{.*}} into @grad.w on @mesh axes = ["dp"]
// CHECK: dsc.learning_rate warmup_cosine base = 3.000000e-04 min = 3.000000e-08 warmup = 10 total = 100
// CHECK: dsc.clip_grad_norm [@grad.w] max_norm = 1.000000e+00
// CHECK: dsc.adamw @w {{.*}} beta1 = 9.000000e-01 beta2 = {{0.9499999|9.500000e-01}}{{.*}} eps = 1.000000e-08 weight_decay = 1.000000e-01
// WARN: warning: --dsc-compile: ds-config '{{.*}}zero2-bf16-cosine.json': steps_per_print is dsc-run's --log-interval; it does not change the plan
// WARN: warning: --dsc-compile: ds-config '{{.*}}zero2-bf16-cosine.json': zero_optimization.overlap_comm is dsc-run's --overlap-comm; it does not change the plan

// An option written beside ds-config wins over the file's.
// RUN: dsc-opt %s --dsc-compile="ds-config=%S/../Integration/Inputs/deepspeed/zero2-bf16-cosine.json dp=2 lr=1e-3 precision=fp32" 2>/dev/null | FileCheck %s --check-prefix=WINS
// WINS: dsc.matmul {{.*}} : tensor<2x4x8xf32>, tensor<8x16xf32>
// WINS: dsc.learning_rate warmup_cosine base = 1.000000e-03

// A config dsc cannot read, or whose keys it refuses, fails the pipeline
// with the reader's message.
// RUN: not dsc-opt %s --dsc-compile="ds-config=%t.missing.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: cannot read DeepSpeed config '{{.*}}missing.json': No such file or directory
// RUN: %python -c "print('{\"train_batch_size\": 8, \"optimzer\": {}}')" > %t.typo.json
// RUN: not dsc-opt %s --dsc-compile="ds-config=%t.typo.json" 2>&1 | FileCheck %s --check-prefix=TYPO
// TYPO: error: DeepSpeed config '{{.*}}typo.json', line 1: unknown key 'optimzer'; did you mean 'optimizer'?

dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %w = dsc.get_parameter @w : tensor<8x16xf32>
  %y = dsc.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %l = dsc.cross_entropy %y, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}
