// RUN: dsc-opt %s --dsc-declare-mesh="dp=2 tp=4" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: dsc-opt %s --dsc-declare-mesh="tp=4 dp=2 pp=1" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: %python -c "print('dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros>')" | dsc-opt --dsc-declare-mesh="dp=2 pp=3 tp=2" | FileCheck %s --check-prefix=ORDER
// RUN: %python -c "print('dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros>')" | dsc-opt --dsc-declare-mesh | FileCheck %s --check-prefix=ONE
// RUN: %python -c "print('dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros>')" | not dsc-opt --dsc-declare-mesh="dp=2 pp=0" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: %python -c "print('module {}')" | dsc-opt --dsc-declare-mesh="dp=2" | FileCheck %s --check-prefix=EMPTY
// RUN: %python -c "print('module {}')" | dsc-opt --dsc-declare-mesh="dp=4 ep=2 tp=2" | FileCheck %s --check-prefix=EP
// RUN: %python -c "print('module {}')" | dsc-opt --dsc-declare-mesh="dp=2 ep=2" | FileCheck %s --check-prefix=EP-ALL
// RUN: %python -c "print('module {}')" | not dsc-opt --dsc-declare-mesh="dp=4 ep=3" 2>&1 | FileCheck %s --check-prefix=EP-BAD
// RUN: %python -c "print('module {}')" | not dsc-opt --dsc-declare-mesh="ep=2" 2>&1 | FileCheck %s --check-prefix=EP-NO-DP

// Expert parallelism splits dp into edp x ep, ep innermost (DeepSpeed's
// E+D grouping: an expert group is consecutive data-parallel ranks); edp
// stays on the mesh at size 1, so the data-parallel axes are always both.
// EP: dsc.mesh @mesh axes = ["edp", "ep", "tp"] shape = [2, 2, 2]
// EP-ALL: dsc.mesh @mesh axes = ["edp", "ep"] shape = [1, 2]
// EP-BAD: error: --dsc-declare-mesh: ep=3 does not divide dp=4 (expert parallelism splits the data-parallel group)
// EP-NO-DP: error: --dsc-declare-mesh: ep=2 does not divide dp=1

// A module with no dsc op yet still gets its mesh (the pass loads the
// dialect of the op it creates).
// EMPTY: dsc.mesh @mesh axes = ["dp"] shape = [2]

// The axes above 1, in Megatron-LM's order whatever the options' order:
// dp, pp, tp (tp innermost, a tensor-parallel group is consecutive ranks).
// ORDER: dsc.mesh @mesh axes = ["dp", "pp", "tp"] shape = [2, 3, 2]
// One rank needs no mesh.
// ONE-NOT: dsc.mesh
// ONE: dsc.parameter @w
// ONE-NOT: dsc.mesh
// BAD: error: --dsc-declare-mesh: plan key 'pp': '0' is not an integer >= 1

// The mesh goes first, before the declarations that use it; axes of size 1
// are left out.
// CHECK-LABEL: module @declares
// CHECK-NEXT: dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 4]
// CHECK-NEXT: dsc.parameter @w
// CHECK-NOT: dsc.mesh
module @declares {
  dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<zeros>
}

// -----

// A mesh with these axes and sizes is kept as it is, whatever its name.
// CHECK-LABEL: module @matches
// CHECK-NEXT: dsc.mesh @grid axes = ["dp", "tp"] shape = [2, 4]
// CHECK-NOT: dsc.mesh
module @matches {
  dsc.mesh @grid axes = ["dp", "tp"] shape = [2, 4]
}

// -----

module @other_size {
  // expected-error @+1 {{--dsc-declare-mesh: the module's mesh differs from dp=2 pp=1 tp=4}}
  dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
}

// -----

// The order of the axes is the rank order: tp must be innermost.
module @other_order {
  // expected-error @+1 {{--dsc-declare-mesh: the module's mesh differs from dp=2 pp=1 tp=4}}
  dsc.mesh @mesh axes = ["tp", "dp"] shape = [4, 2]
}

// -----

// An axis of size 1 is not on the mesh: a pp axis of one stage differs.
module @size_one_axis {
  // expected-error @+1 {{--dsc-declare-mesh: the module's mesh differs from dp=2 pp=1 tp=4}}
  dsc.mesh @mesh axes = ["dp", "pp", "tp"] shape = [2, 1, 4]
}
