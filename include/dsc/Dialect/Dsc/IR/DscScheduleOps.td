//===- DscScheduleOps.td - a pipeline stage's step as ops --*- tablegen -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The ops of a `pipeline_step` program (--dsc-pipeline-schedule): what one
// pipeline rank does in one training step, in order. They name no tensor
// values: each stage has one set of boundary buffers (its input, output and
// their gradients, placed by the memory planner), and the runtime keeps
// each in-flight micro-batch's input until its backward. What these ops
// fix is the order, so that --dsc-verify-collectives proves it free of
// deadlock and the runtime runs it as written.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_SCHEDULE_OPS
#define DSC_SCHEDULE_OPS

def Dsc_PipelineForwardOp : Dsc_Op<"pipeline_forward",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Runs a pipeline stage's forward on one micro-batch";
  let description = [{
    Stage `k`'s forward of micro-batch `microbatch` (interleaved: of one of
    the rank's stages, the callee's `dsc.stage`): on the first stage the
    micro-batch's tokens are loaded into the stage input first. The stage
    input (received, or the tokens) is kept for the micro-batch's
    `dsc.pipeline_backward`. On the last stage the forward is the first half
    of `forward_backward` and `callee` is only checked, not run: the last
    stage runs forward and backward together.

    ```mlir
    dsc.pipeline_forward @loss.stage0 microbatch = 2
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee, I64Attr:$microbatch);
  let assemblyFormat = "$callee `microbatch` `=` $microbatch attr-dict";
}

def Dsc_PipelineBackwardOp : Dsc_Op<"pipeline_backward",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Runs a pipeline stage's backward on one micro-batch";
  let description = [{
    Restores the stage input (and, after --dsc-stage-backward, the
    forward's residuals) kept by micro-batch `microbatch`'s
    `dsc.pipeline_forward` and runs `callee`, the stage's
    `forward_backward` program: it reads the output's gradient (received
    from the next stage; on the last, the micro-batch's targets, and it
    adds the loss) and accumulates the parameters' gradients (a backward
    not split by --dsc-stage-backward computes the stage's forward again
    first). Backwards run in the order of their forwards.

    ```mlir
    dsc.pipeline_backward @backward.stage0 microbatch = 2
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee, I64Attr:$microbatch);
  let assemblyFormat = "$callee `microbatch` `=` $microbatch attr-dict";
}

def Dsc_PipelineBackwardWeightOp : Dsc_Op<"pipeline_backward_weight",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Runs the weight-gradient part of a stage's backward";
  let description = [{
    Under a zero-bubble schedule (`zb-h1`) a stage's backward is split in
    two (`--dsc-split-weight-gradient`): `dsc.pipeline_backward` runs the
    activation-gradient part B, whose input gradient the previous stage
    waits for, and this op, later, the weight-gradient part W: it restores
    the values micro-batch `microbatch`'s B kept for it and runs `callee`,
    the stage's `backward_weight` program, which accumulates the
    parameters' gradients. A stage's W run in the order of its B, each
    after its own.

    ```mlir
    dsc.pipeline_backward_weight @backward_weight.stage0 microbatch = 2
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee, I64Attr:$microbatch);
  let assemblyFormat = "$callee `microbatch` `=` $microbatch attr-dict";
}

def Dsc_PipelineSendOp : Dsc_Op<"pipeline_send",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     DeclareOpInterfaceMethods<Dsc_CommunicationOpInterface>]> {
  let summary = "Sends a stage's boundary activation or its gradient";
  let description = [{
    Sends micro-batch `microbatch`'s `activation` (the stage output, to
    stage `peer` = k+1) or `gradient` (the stage input's gradient, to
    `peer` = k-1) over mesh axis `pp`. A blocking rendezvous with the peer's
    `dsc.pipeline_recv` of the same message and micro-batch (the tag).

    Interleaved (`virtual_stages` = v > 1 in `dsc.pipeline`), rank r of the
    P pp ranks holds the stages c*P + r, and `chunk` names the rank's chunk
    c whose boundary moves: stage s = c*P + r sends its activation to the
    rank of stage s+1, its input's gradient to the rank of stage s-1 (the
    next and previous ranks, wrapping from the last rank to the first).

    ```mlir
    dsc.pipeline_send activation to 1 microbatch = 0 on @mesh : tensor<8x64x128xf32>
    ```
  }];
  let arguments = (ins EnumProp<Dsc_PipelineMessage>:$message,
                       OptionalAttr<I64Attr>:$chunk, I64Attr:$peer,
                       I64Attr:$microbatch, FlatSymbolRefAttr:$mesh,
                       TypeAttr:$payload);
  let assemblyFormat = [{
    $message (`of` `chunk` $chunk^)? `to` $peer `microbatch` `=` $microbatch `on` $mesh attr-dict `:` $payload
  }];
  let hasVerifier = 1;
}

def Dsc_PipelineRecvOp : Dsc_Op<"pipeline_recv",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     DeclareOpInterfaceMethods<Dsc_CommunicationOpInterface>]> {
  let summary = "Receives a stage's boundary activation or its gradient";
  let description = [{
    Receives micro-batch `microbatch`'s `activation` from stage `peer` =
    k-1 into the stage input, or the `gradient` of the stage output from
    stage `peer` = k+1. Interleaved, `chunk` names the receiving chunk as
    for `dsc.pipeline_send`.

    ```mlir
    dsc.pipeline_recv gradient from 1 microbatch = 0 on @mesh : tensor<8x64x128xf32>
    ```
  }];
  let arguments = (ins EnumProp<Dsc_PipelineMessage>:$message,
                       OptionalAttr<I64Attr>:$chunk, I64Attr:$peer,
                       I64Attr:$microbatch, FlatSymbolRefAttr:$mesh,
                       TypeAttr:$payload);
  let assemblyFormat = [{
    $message (`of` `chunk` $chunk^)? `from` $peer `microbatch` `=` $microbatch `on` $mesh attr-dict `:` $payload
  }];
  let hasVerifier = 1;
}

#endif // DSC_SCHEDULE_OPS
